"""The protocol's listen address is checked, and TLS with the site's certificate works.

The certificate is a self-signed one made here (``cryptography``) for 127.0.0.1; the client
trusts it as its CA (from its constructor or ``ELASTIC_SLURM_CONTROLLER_CA``) and refuses a
server it cannot verify.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from elastic_slurm.config import load_site
from elastic_slurm.errors import ConfigError
from elastic_slurm.protocol.address import controller_url, default_address, parse_address
from elastic_slurm.protocol.client import CA_ENV, ControllerClient
from elastic_slurm.protocol.gateway import Gateway, JobRecord
from elastic_slurm.protocol.jobdir import JobDir
from elastic_slurm.protocol.server import ProtocolServer

pytestmark = pytest.mark.usefixtures("fictional_users")

SECRET = "tls-secret"


def self_signed(tmp: Path, name: str = "controller") -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and its key (PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / f"{name}.crt", tmp / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[ProtocolServer, Path]]:
    cert, key = self_signed(tmp_path)
    jobs = {12: JobRecord(12, "alice", str(tmp_path), True)}
    gateway = Gateway(jobs.get, verify=lambda c, s: None)  # type: ignore[arg-type,return-value]
    srv = ProtocolServer(gateway, "127.0.0.1:0", tls_cert=cert, tls_key=key).start()
    JobDir.for_job(tmp_path, 12).write_secret(SECRET)
    yield srv, cert
    srv.stop()


def test_tls_serves_https_and_the_client_checks_the_certificate(
    tls_server, tmp_path: Path, monkeypatch
) -> None:
    srv, cert = tls_server
    assert srv.url.startswith("https://127.0.0.1:")
    r = requests.get(f"{srv.url}/v1/health", verify=str(cert), timeout=5)
    assert r.status_code == 200 and r.json()["ok"] is True
    client = ControllerClient(srv.url, 12, SECRET, retry_s=0, ca_file=str(cert))
    assert client.next(1) is None  # authenticated, over TLS
    monkeypatch.setenv(CA_ENV, str(cert))
    assert ControllerClient(srv.url, 12, SECRET, retry_s=0).next(1) is None
    # another CA: the server is not trusted
    other, _ = self_signed(tmp_path / "..", name="someone-else")
    stranger = ControllerClient(srv.url, 12, SECRET, retry_s=0, ca_file=str(other))
    with pytest.raises(ConnectionError, match="CERTIFICATE_VERIFY_FAILED"):
        stranger.next(1)
    # and plain HTTP gets no answer from the TLS port
    with pytest.raises(requests.RequestException):
        requests.get(srv.url.replace("https", "http") + "/v1/health", timeout=5)


def test_unusable_tls_files_are_a_config_error(tmp_path: Path) -> None:
    cert, _ = self_signed(tmp_path, "a")
    _, other_key = self_signed(tmp_path, "b")
    gateway = Gateway(lambda j: None)
    with pytest.raises(ConfigError, match="controller.tls_cert"):
        ProtocolServer(gateway, "127.0.0.1:0", tls_cert=cert, tls_key=other_key)
    with pytest.raises(ConfigError, match="both or neither"):
        ProtocolServer(gateway, "127.0.0.1:0", tls_cert=cert)


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("127.0.0.1:99999", "port 99999 is not in 1-65535"),
        ("127.0.0.1:0", "port 0 is not in 1-65535"),
        ("127.0.0.1", "is not host:port"),
        ("no-such-host.invalid:7717", "host 'no-such-host.invalid' does not resolve"),
        ("bad_host!:7717", "is not a host name or an IP address"),
        ("-x:7717", "is not a host name or an IP address"),
    ],
)
def test_bad_listen_addresses_are_refused(address: str, words: str) -> None:
    with pytest.raises(ConfigError, match="controller.address") as info:
        parse_address(address, what="controller.address")
    assert words in str(info.value)


def test_good_listen_addresses() -> None:
    assert parse_address("127.0.0.1:7717") == ("127.0.0.1", 7717)
    assert parse_address("localhost:1") == ("localhost", 1)
    assert parse_address("[::1]:65535") == ("::1", 65535)
    assert parse_address("127.0.0.1:0", any_port=True) == ("127.0.0.1", 0)


def test_the_server_refuses_a_port_it_would_not_listen_on() -> None:
    with pytest.raises(ConfigError, match="port 99999"):
        ProtocolServer(Gateway(lambda j: None), "127.0.0.1:99999")


def test_the_site_address_and_url(tmp_path: Path) -> None:
    site = load_site()
    bad = site.model_copy(
        update={"controller": site.controller.model_copy(update={"address": "10.0.0.5:99999"})}
    )
    with pytest.raises(ConfigError, match="controller.address '10.0.0.5:99999'"):
        default_address(bad)
    assert controller_url(site) == "http://10.77.0.1:7717"
    cert, key = self_signed(tmp_path)
    tls = site.model_copy(
        update={"controller": site.controller.model_copy(update={"tls_cert": cert, "tls_key": key})}
    )
    assert controller_url(tls) == "https://10.77.0.1:7717"
