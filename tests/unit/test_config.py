"""Site configs: ``config/load.py`` and ``config/schema.py``; errors name the file and the key."""

from __future__ import annotations

import ipaddress
import os
import re
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from elastic_slurm import yamlsafe
from elastic_slurm.config import load_site, site_config_dirs
from elastic_slurm.config.schema import LocalClusterConfig, NetworkConfig, SiteConfig
from elastic_slurm.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "site_configs" / "local.yaml"


@pytest.fixture(autouse=True)
def _no_site_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's ELASTIC_SLURM_SITE_DIR must not change what these tests load."""
    monkeypatch.delenv("ELASTIC_SLURM_SITE_DIR", raising=False)


def _yaml(tmp_path: Path, text: str, name: str = "site.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("site", [None, "local", str(SHIPPED)])
def test_load_shipped_local(site: str | None) -> None:
    cfg = load_site(site)
    assert isinstance(cfg, SiteConfig)
    assert (cfg.name, cfg.cluster_name, cfg.partition) == ("local", "elastic", "debug")
    assert cfg.source == str(SHIPPED)
    assert cfg.slurm_conf == Path("/var/lib/elastic-slurm/local/etc/slurm.conf")
    assert (cfg.transport.kind, cfg.transport.command_timeout_s) == ("local", 30.0)
    assert cfg.controller.poll_interval_s == 0.5
    assert cfg.controller.resize_timeout_s == 120.0
    assert cfg.controller.grant_timeout_s == 30
    assert (cfg.controller.policy.name, cfg.controller.policy.options) == ("pending_first", {})
    lc = cfg.local_cluster
    assert lc is not None
    assert (lc.nodes, lc.cpus_per_node, lc.real_memory_mib, lc.select_type) == (
        4,
        1,
        1024,
        "linear",
    )
    assert (lc.node_prefix, lc.head_hostname, lc.partition) == ("n", "eshead", "debug")
    assert lc.state_dir == Path("/var/lib/elastic-slurm/local")
    assert lc.run_dir == Path("/run/elastic-slurm/local")
    assert (lc.slurmctld_port, lc.slurmd_port, lc.slurmdbd_port, lc.mariadb_port) == (
        6817,
        6818,
        6819,
        13306,
    )
    assert lc.network.subnet == ipaddress.IPv4Network("10.77.0.0/24")
    assert (lc.network.bridge, lc.network.node_address_offset, lc.network.netns_prefix) == (
        "esbr0",
        10,
        "es-",
    )
    assert (lc.scheduler.sched_interval_s, lc.scheduler.bf_interval_s) == (2, 2)
    assert lc.start_timeout_s == 180.0
    assert lc.node_names() == ("n1", "n2", "n3", "n4")


def test_shipped_values_are_the_schema_defaults() -> None:
    # local.yaml says "the values below are the defaults": keep the two in step.
    cfg = load_site("local")
    assert cfg.local_cluster == LocalClusterConfig()
    assert cfg.controller == SiteConfig(name="x").controller
    assert cfg.transport == SiteConfig(name="x").transport


def test_config_is_frozen() -> None:
    cfg = load_site("local")
    with pytest.raises(ValidationError, match="frozen"):
        cfg.partition = "other"  # type: ignore[misc]


def test_minimal_site_takes_defaults_and_file_name(tmp_path: Path) -> None:
    path = _yaml(tmp_path, "cluster_name: prod\n", "mysite.yaml")
    cfg = load_site(str(path))
    assert (cfg.name, cfg.cluster_name, cfg.source) == ("mysite", "prod", str(path))
    assert (cfg.local_cluster, cfg.slurm_conf, cfg.partition) == (None, None, None)


def test_local_cluster_sets_slurm_conf_and_partition(tmp_path: Path) -> None:
    path = _yaml(
        tmp_path,
        f"name: t\nlocal_cluster:\n  state_dir: {tmp_path}/state\n  run_dir: {tmp_path}/run\n"
        "  partition: batch\n",
    )
    cfg = load_site(str(path))
    assert cfg.slurm_conf == tmp_path / "state" / "etc" / "slurm.conf"
    assert cfg.partition == "batch"


def test_explicit_slurm_conf_and_partition_win(tmp_path: Path) -> None:
    path = _yaml(
        tmp_path,
        "slurm_conf: /etc/slurm/slurm.conf\npartition: gpu\nlocal_cluster:\n  nodes: 2\n",
    )
    cfg = load_site(str(path))
    assert (cfg.slurm_conf, cfg.partition) == (Path("/etc/slurm/slurm.conf"), "gpu")


def test_source_in_yaml_is_overwritten(tmp_path: Path) -> None:
    path = _yaml(tmp_path, "source: /elsewhere.yaml\n")
    assert load_site(str(path)).source == str(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("key: [unclosed\n", "{path}:2:1: not valid YAML: "),
        ("a: b: c\n", "{path}:1:5: not valid YAML: "),
        ("- a\n- b\n", "{path}: expected a mapping of keys at the top level, got list"),
        ("just a string\n", "{path}: expected a mapping of keys at the top level, got str"),
        ("bogus: 1\n", "{path}: bogus: Extra inputs are not permitted"),
        (
            "local_cluster:\n  nodez: 3\n",
            "{path}: local_cluster.nodez: Extra inputs are not permitted",
        ),
        (
            "local_cluster:\n  nodes: many\n",
            "{path}: local_cluster.nodes: Input should be a valid integer",
        ),
        (
            "local_cluster:\n  nodes: 0\n",
            "{path}: local_cluster.nodes: Input should be greater than or equal to 1",
        ),
        (
            "local_cluster:\n  nodes: 65\n",
            "{path}: local_cluster.nodes: Input should be less than or equal to 64",
        ),
        (
            "local_cluster:\n  select_type: cons_res\n",
            "{path}: local_cluster.select_type: Input should be 'linear' or 'cons_tres'",
        ),
        (
            "local_cluster:\n  network:\n    subnet: 8.8.8.0/24\n",
            "{path}: local_cluster.network.subnet: Value error, subnet 8.8.8.0/24 is not a private "
            "range",
        ),
        (
            "local_cluster:\n  network:\n    subnet: 10.77.0.1/24\n",
            "{path}: local_cluster.network.subnet: Input is not a valid IPv4 network",
        ),
        (
            "local_cluster:\n  network:\n    bridge: br0;rm\n",
            "{path}: local_cluster.network.bridge: String should match pattern",
        ),
        (
            "local_cluster:\n  network:\n    netns_prefix: toolong-\n",
            "{path}: local_cluster.network.netns_prefix: String should have at most 6 characters",
        ),
        (
            "local_cluster:\n  state_dir: relative/dir\n",
            "{path}: local_cluster.state_dir: Value error, relative/dir must be an absolute path",
        ),
        (
            "local_cluster:\n  slurmd_port: 80\n",
            "{path}: local_cluster.slurmd_port: Input should be greater than or equal to 1024",
        ),
        (
            "controller:\n  poll_interval_s: 0\n",
            "{path}: controller.poll_interval_s: Input should be greater than 0",
        ),
        (
            "controller:\n  policy:\n    options: [1, 2]\n",
            "{path}: controller.policy.options: Input should be a valid dictionary",
        ),
        (
            "transport:\n  kind: telnet\n",
            "{path}: transport: Input tag 'telnet' found using 'kind' does not match any of the "
            "expected tags: 'local', 'ssh'",
        ),
        ("transport:\n  kind: ssh\n", "{path}: transport.ssh.host: Field required"),
        # issue 14: a port beyond 65535 passed the pattern's five digits
        (
            "controller:\n  address: head:99999\n",
            "{path}: controller.address: Value error, port of 'head:99999' is not 1-65535",
        ),
        (
            "controller:\n  metrics_address: head:0\n",
            "{path}: controller.metrics_address: Value error, port of 'head:0' is not 1-65535",
        ),
        # durations are finite and bounded (sleep(inf) or a 1e300 timeout are not)
        (
            "controller:\n  poll_interval_s: .inf\n",
            "{path}: controller.poll_interval_s: Input should be a finite number",
        ),
        (
            "controller:\n  resize_timeout_s: .nan\n",
            "{path}: controller.resize_timeout_s: Input should be a finite number",
        ),
        (
            "transport:\n  kind: local\n  command_timeout_s: 1e300\n",
            "{path}: transport.local.command_timeout_s: Input should be less than or equal to",
        ),
        # YAML 1.1 pitfalls and loader bombs: one line, naming the place
        ("a: &x [1]\nb: *x\n", "{path}:1:4: not valid YAML: anchors and aliases"),
        ("cluster_name: a\ncluster_name: b\n", "{path}:2:1: not valid YAML: key 'cluster_name'"),
        ("controller:\n  policy:\n    options: !!python/name:os.system x\n", "{path}:3:14: "),
        ("<<: {cluster_name: x}\n", "{path}: <<: Extra inputs are not permitted"),
    ],
)
def test_load_errors_name_file_and_key(tmp_path: Path, text: str, message: str) -> None:
    path = _yaml(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_site(str(path))
    assert str(info.value).startswith(message.format(path=path)), str(info.value)


def test_yes_and_no_stay_words_and_booleans_still_read(tmp_path: Path) -> None:
    text = "cluster_name: no\npartition: on\ncontroller:\n  sizes_moldable: yes\n"
    cfg = load_site(str(_yaml(tmp_path, text)))
    assert (cfg.cluster_name, cfg.partition) == ("no", "on")  # YAML 1.1: False and True
    assert cfg.controller.sizes_moldable is True  # pydantic reads the word for a boolean field


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"cluster_name: caf\xe9\n", "{path}:1: not UTF-8: byte 0xe9 at offset 17"),
        (b"a: 1\n\x00\n", "{path}: character U+0000 at position 5 is not allowed"),
        (
            b"controller:\n  policy:\n    options:\n      a: " + b"[" * 5000 + b"\n",
            "{path}:4:",
        ),
        (b"cluster_name: " + b"x" * 70_000 + b"\n", "{path}: larger than 65536 bytes"),
    ],
)
def test_bad_bytes_depth_and_size_are_one_line_config_errors(
    tmp_path: Path, body: bytes, message: str
) -> None:
    """Latin-1, NUL, deep nesting and huge files: one-line ConfigError, fast (issue 14)."""
    path = tmp_path / "site.yaml"
    path.write_bytes(body)
    started = time.monotonic()
    with pytest.raises(ConfigError) as info:
        load_site(str(path))
    assert time.monotonic() - started < 1.0
    assert str(info.value).startswith(message.format(path=path)), str(info.value)
    assert "\n" not in str(info.value)


def test_a_fifo_as_site_config_is_refused_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "site.yaml"
    os.mkfifo(path)
    with pytest.raises(ConfigError, match="is not a regular file"):
        load_site(str(path))


def test_every_error_is_reported(tmp_path: Path) -> None:
    path = _yaml(tmp_path, "local_cluster:\n  nodes: 0\n  cpus_per_node: none\nbogus: 1\n")
    with pytest.raises(ConfigError) as info:
        load_site(str(path))
    lines = str(info.value).splitlines()
    assert [line.split(": ")[1] for line in lines] == [
        "local_cluster.nodes",
        "local_cluster.cpus_per_node",
        "bogus",
    ]
    assert all(line.startswith(f"{path}: ") for line in lines)


@pytest.mark.parametrize(
    ("prefix", "offset", "nodes", "fits"),
    [
        (29, 2, 4, True),  # 6 host addresses: bridge .1, head .2, nodes .3-.6
        (29, 2, 5, False),
        (24, 10, 64, True),
        (28, 10, 4, True),
        (28, 10, 5, False),
    ],
)
def test_nodes_must_fit_in_subnet(prefix: int, offset: int, nodes: int, fits: bool) -> None:
    network = NetworkConfig(subnet=f"10.9.0.0/{prefix}", node_address_offset=offset)
    if fits:
        assert LocalClusterConfig(nodes=nodes, network=network).nodes == nodes
    else:
        message = (
            f"{nodes} nodes do not fit in 10.9.0.0/{prefix} from offset {offset}: "
            "use a larger subnet or fewer nodes"
        )
        with pytest.raises(ValidationError, match=re.escape(message)):
            LocalClusterConfig(nodes=nodes, network=network)


@pytest.mark.parametrize(
    ("subnet", "ok"),
    [
        ("10.0.0.0/8", True),
        ("172.16.5.0/24", True),
        ("192.168.1.0/24", True),
        ("8.8.8.0/24", False),
        ("172.32.0.0/24", False),
        ("100.64.0.0/24", False),  # shared address space (carrier NAT) is not private
    ],
)
def test_subnet_must_be_private(subnet: str, ok: bool) -> None:
    if ok:
        assert str(NetworkConfig(subnet=subnet).subnet) == subnet
    else:
        with pytest.raises(ValidationError, match=f"subnet {subnet} is not a private range"):
            NetworkConfig(subnet=subnet)


@pytest.mark.parametrize(
    ("count", "names"),
    [(None, ("n1", "n2", "n3", "n4")), (1, ("n1",)), (6, ("n1", "n2", "n3", "n4", "n5", "n6"))],
)
def test_node_names(count: int | None, names: tuple[str, ...]) -> None:
    assert LocalClusterConfig().node_names(count) == names


def test_unknown_site_lists_known_sites() -> None:
    with pytest.raises(ConfigError) as info:
        load_site("nosuch")
    assert str(info.value) == (
        f"no site config named 'nosuch' in {', '.join(map(str, site_config_dirs()))}; "
        "known sites: example-site, local, local-forky, local-trixie; "
        "or pass a path to a YAML file"
    )


@pytest.mark.parametrize("name", ["missing.yaml", "missing.yml", "sub/dir/missing"])
def test_missing_path(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    with pytest.raises(
        ConfigError, match=f"^site config file {re.escape(str(path))} does not exist$"
    ):
        load_site(str(path))


def test_site_dir_env_adds_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _yaml(tmp_path, "cluster_name: mine\n", "mysite.yml")
    monkeypatch.setenv("ELASTIC_SLURM_SITE_DIR", str(tmp_path))
    dirs = site_config_dirs()
    assert dirs[:2] == [tmp_path, ROOT / "site_configs"]  # then the wheel's copy, if installed
    cfg = load_site("mysite")
    assert (cfg.name, cfg.cluster_name, cfg.source) == (
        "mysite",
        "mine",
        str(tmp_path / "mysite.yml"),
    )
    assert load_site("local").source == str(SHIPPED)  # the shipped sites are still found
    with pytest.raises(
        ConfigError,
        match=r"known sites: example-site, local, local-forky, local-trixie, mysite; or pass",
    ):
        load_site("nosuch")


def test_site_dir_env_comes_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _yaml(tmp_path, "cluster_name: shadow\n", "local.yaml")
    monkeypatch.setenv("ELASTIC_SLURM_SITE_DIR", str(tmp_path))
    cfg = load_site("local")
    assert (cfg.cluster_name, cfg.source, cfg.local_cluster) == (
        "shadow",
        str(tmp_path / "local.yaml"),
        None,
    )


def test_empty_site_dir_env_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ELASTIC_SLURM_SITE_DIR", "")
    assert site_config_dirs()[0] == ROOT / "site_configs"


def test_empty_site_file_gives_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "blank.yaml"
    path.write_text("")
    cfg = load_site(str(path))
    assert cfg.name == "blank" and cfg.local_cluster is None
    assert cfg.controller.policy.name == "pending_first"


def test_the_example_site_is_valid() -> None:
    cfg = load_site("example-site")
    assert cfg.transport.kind == "ssh" and cfg.transport.host == "login.hpc.example.org"
    assert (cfg.partition, cfg.partitions, cfg.account) == ("batch", ("batch", "debug"), "proj123")
    assert cfg.local_cluster is None and cfg.slurm_conf is None


def test_a_default_partition_outside_the_allowed_ones_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("partition: gpu\npartitions: [batch]\n")
    with pytest.raises(ConfigError, match="partition 'gpu' is not among partitions"):
        load_site(str(path))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1:00:00", "1:00:00"),  # YAML 1.1: 3600 (sexagesimal)
        ("010", 10),  # YAML 1.1: 8 (octal); Slurm reads decimal
        ("0x10", "0x10"),
        ("1_000", "1_000"),
        ("yes", "yes"),
        ("off", "off"),
        ("True", True),
        ("false", False),
        ("~", None),
        ("2024-01-01", "2024-01-01"),  # YAML 1.1: a date
        ("1.5", 1.5),
        ("-7", -7),
        ("'010'", "010"),
        ("[a, 010]", ["a", 10]),
    ],
)
def test_the_one_yaml_loader_reads_values_as_written(text: str, value: object) -> None:
    assert yamlsafe.loads(f"k: {text}\n") == {"k": value}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("k: !!binary aGk=\n", "x.yaml:1:4: not valid YAML: the tag 'tag:yaml.org,2002:binary'"),
        ("k: !!bool maybe\n", "x.yaml:1:4: not valid YAML: 'maybe' is not true or false"),
        ("k: !!int 0x10\n", "x.yaml:1:4: not valid YAML: '0x10' is not a decimal integer"),
        ("a:\n  b: [1, &x 2]\n", "x.yaml:2:10: not valid YAML: anchors and aliases"),
        (
            "k: [" + "1, " * 10_001 + "]\n",
            "x.yaml:1:29996: not valid YAML: more than 10000 values under k[9997]",
        ),
        ("? [a]\n: 1\n", "x.yaml:1:3: not valid YAML: a mapping key must be a plain value"),
    ],
)
def test_the_one_yaml_loader_refuses_in_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        yamlsafe.loads(text, "x.yaml")
    assert str(info.value).startswith(message), str(info.value)
    assert "\n" not in str(info.value)
