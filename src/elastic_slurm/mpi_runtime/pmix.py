"""A small ctypes client of the PMIx library (``libpmix.so.2``), optional and safe.

Why our own layer: the project runs on its own virtual-environment Python, not Debian's.
Debian's ``python3-pmix`` 4.2.2 bindings exist only for Debian's Python; they also print debug
lines to standard output (which would corrupt an application's output) and poll at about
1 kHz, about 3 % of a core per idle rank (SLURM-FACTS.md). PyPI has nothing usable (its
``pmix`` package is unrelated). ctypes needs no build step and works with any Python.

What this layer does, and does not:

* :func:`connect` calls ``PMIx_Init`` once per process. Under a PMIx server (``srun
  --mpi=pmix``: slurmstepd's ``pmix_v4`` plugin; ``mpirun``: Open MPI 4.1's ORTE) it
  succeeds in 2-55 ms (0.5 ms once MPI is up: Open MPI's ``ext3x`` component uses the same
  library, which counts initialisations). Outside a job it returns ``-25``
  (``PMIX_ERR_UNREACH``) in about 12 ms; the runtime then logs one line and goes on with
  environment variables. Every successful ``PMIx_Init`` is matched by one ``PMIx_Finalize``
  (:meth:`Client.close`, also registered with :mod:`atexit`): a process that initialises PMIx
  after MPI must finalise it too.
* It reads job facts (``PMIx_Get``), asks the server what it supports (``PMIx_Query_info``)
  and asks for allocation changes (``PMIx_Allocation_request``, which returns ``-47``,
  ``PMIX_ERR_NOT_SUPPORTED``, under both servers here).
* It registers **no** event handler and sends no event: on this stack a default-range event
  reaches only the sender's node under ``srun``, an event without ``PMIX_EVENT_NON_DEFAULT``
  makes slurmstepd kill the step, and under ``mpirun`` non-local events wedge the job.
  Resize orders never travel through PMIx.

``ELASTIC_SLURM_PMIX=0`` turns PMIx use off (no library is loaded). Struct layouts follow
``pmix_common.h`` of PMIx 4.2.2 (checked with ``sizeof``: ``pmix_proc_t`` 260 bytes,
``pmix_value_t`` 32, ``pmix_info_t`` 552 with its value at offset 520); the key strings are
the header's.

Run ``python -m elastic_slurm.mpi_runtime.pmix --json`` inside a job step to print what the
server reports and supports (``elastic-slurm doctor`` does that).
"""

from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import logging
import os
import threading
import time
from collections.abc import Mapping
from typing import Any

from elastic_slurm import envvars

log = logging.getLogger(__name__)

#: The library's soname (PMIx 4.x and 5.x both install ``libpmix.so.2``).
LIBRARY = "libpmix.so.2"

# ----------------------------------------------------------------- constants (pmix_common.h)
PMIX_MAX_NSLEN = 255
PMIX_MAX_KEYLEN = 511
PMIX_RANK_WILDCARD = 0xFFFFFFFF - 1
PMIX_RANK_UNDEF = 0xFFFFFFFF

PMIX_SUCCESS = 0
PMIX_ERR_UNREACH = -25
PMIX_ERR_INIT = -31
PMIX_ERR_NOT_FOUND = -46
PMIX_ERR_NOT_SUPPORTED = -47
PMIX_ERR_PARTIAL_SUCCESS = -52

PMIX_BOOL, PMIX_BYTE, PMIX_STRING, PMIX_SIZE, PMIX_PID = 1, 2, 3, 4, 5
PMIX_INT, PMIX_INT8, PMIX_INT16, PMIX_INT32, PMIX_INT64 = 6, 7, 8, 9, 10
PMIX_UINT, PMIX_UINT8, PMIX_UINT16, PMIX_UINT32, PMIX_UINT64 = 11, 12, 13, 14, 15
PMIX_FLOAT, PMIX_DOUBLE, PMIX_STATUS, PMIX_DATA_ARRAY, PMIX_PROC_RANK = 16, 17, 20, 39, 40
PMIX_INFO = 24

PMIX_ALLOC_NEW, PMIX_ALLOC_EXTEND, PMIX_ALLOC_RELEASE = 1, 2, 3

# keys
PMIX_JOB_SIZE = "pmix.job.size"
PMIX_UNIV_SIZE = "pmix.univ.size"
PMIX_NUM_NODES = "pmix.num.nodes"
PMIX_NODE_LIST = "pmix.nlist"
PMIX_HOSTNAME = "pmix.hname"
PMIX_NODEID = "pmix.nodeid"
PMIX_LOCAL_PEERS = "pmix.lpeers"
PMIX_LOCAL_RANK = "pmix.lrank"
PMIX_LOCAL_SIZE = "pmix.local.size"
PMIX_ALLOC_NUM_NODES = "pmix.alloc.nnodes"
PMIX_QUERY_SPAWN_SUPPORT = "pmix.qry.spawn"
PMIX_QUERY_SUPPORTED_KEYS = "pmix.qry.keys"
PMIX_SERVER_URI = "pmix.srvr.uri"
PMIX_SERVER_NSPACE = "pmix.srv.nspace"


# ----------------------------------------------------------------- structures (pmix_common.h)
class ProcT(ctypes.Structure):
    """``pmix_proc_t``: ``char nspace[PMIX_MAX_NSLEN+1]; pmix_rank_t rank`` (260 bytes)."""

    _fields_ = [("nspace", ctypes.c_char * (PMIX_MAX_NSLEN + 1)), ("rank", ctypes.c_uint32)]


class _EnvarT(ctypes.Structure):
    # pmix_envar_t {char *envar; char *value; char separator;}: the union's largest member
    _fields_ = [("envar", ctypes.c_char_p), ("value", ctypes.c_char_p), ("sep", ctypes.c_char)]


class _ValueData(ctypes.Union):
    _fields_ = [
        ("flag", ctypes.c_bool),
        ("string", ctypes.c_void_p),  # char*: kept a pointer so we can read and free it
        ("size", ctypes.c_size_t),
        ("integer", ctypes.c_int),
        ("int8", ctypes.c_int8),
        ("int16", ctypes.c_int16),
        ("int32", ctypes.c_int32),
        ("int64", ctypes.c_int64),
        ("uint", ctypes.c_uint),
        ("uint8", ctypes.c_uint8),
        ("uint16", ctypes.c_uint16),
        ("uint32", ctypes.c_uint32),
        ("uint64", ctypes.c_uint64),
        ("fval", ctypes.c_float),
        ("dval", ctypes.c_double),
        ("ptr", ctypes.c_void_p),
        ("envar", _EnvarT),
    ]


class ValueT(ctypes.Structure):
    """``pmix_value_t``: ``pmix_data_type_t type`` (uint16) and a 24-byte union (32 bytes)."""

    _fields_ = [("type", ctypes.c_uint16), ("data", _ValueData)]


class InfoT(ctypes.Structure):
    """``pmix_info_t``: ``char key[PMIX_MAX_KEYLEN+1]; uint32 flags; pmix_value_t value``."""

    _fields_ = [
        ("key", ctypes.c_char * (PMIX_MAX_KEYLEN + 1)),
        ("flags", ctypes.c_uint32),
        ("value", ValueT),
    ]


class DataArrayT(ctypes.Structure):
    """``pmix_data_array_t``: ``type``, ``size_t size``, ``void *array``."""

    _fields_ = [("type", ctypes.c_uint16), ("size", ctypes.c_size_t), ("array", ctypes.c_void_p)]


class QueryT(ctypes.Structure):
    """``pmix_query_t``: ``char **keys`` (NULL-terminated), ``qualifiers``, ``nqual``."""

    _fields_ = [
        ("keys", ctypes.POINTER(ctypes.c_char_p)),
        ("qualifiers", ctypes.POINTER(InfoT)),
        ("nqual", ctypes.c_size_t),
    ]


assert ctypes.sizeof(ProcT) == 260 and ctypes.sizeof(ValueT) == 32
assert ctypes.sizeof(InfoT) == 552 and InfoT.value.offset == 520


class PmixError(Exception):
    """A PMIx call failed; ``status`` is its ``pmix_status_t``."""

    def __init__(self, call: str, status: int, text: str = "") -> None:
        self.call = call
        self.status = status
        super().__init__(f"{call} returned {status}{f' ({text})' if text else ''}")


def enabled(env: Mapping[str, str] | None = None) -> bool:
    """False when ``ELASTIC_SLURM_PMIX=0`` (or ``no``/``false``/``off``) turns PMIx use off.

    >>> enabled({"ELASTIC_SLURM_PMIX": "0"}), enabled({})
    (False, True)
    """
    value = envvars.get_str("PMIX", "1", env) or "1"
    return value.strip().lower() not in ("0", "no", "false", "off")


def under_pmix_server(env: Mapping[str, str] | None = None) -> bool:
    """Whether the environment names a PMIx server to connect to (cheap; no library call).

    >>> under_pmix_server({"PMIX_SERVER_URI41": "x"}), under_pmix_server({"HOME": "/"})
    (True, False)
    """
    env = os.environ if env is None else env
    return "PMIX_NAMESPACE" in env or any(k.startswith("PMIX_SERVER_URI") for k in env)


def _load() -> ctypes.CDLL:
    """Load the library and declare the functions used (``OSError`` when missing)."""
    path = ctypes.util.find_library("pmix") or LIBRARY
    try:
        lib = ctypes.CDLL(path)
    except OSError:
        lib = ctypes.CDLL(LIBRARY)
    status = ctypes.c_int
    lib.PMIx_Init.argtypes = [ctypes.POINTER(ProcT), ctypes.POINTER(InfoT), ctypes.c_size_t]
    lib.PMIx_Init.restype = status
    lib.PMIx_Finalize.argtypes = [ctypes.POINTER(InfoT), ctypes.c_size_t]
    lib.PMIx_Finalize.restype = status
    lib.PMIx_Get.argtypes = [
        ctypes.POINTER(ProcT),
        ctypes.c_char_p,
        ctypes.POINTER(InfoT),
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.POINTER(ValueT)),
    ]
    lib.PMIx_Get.restype = status
    lib.PMIx_Value_destruct.argtypes = [ctypes.POINTER(ValueT)]
    lib.PMIx_Value_destruct.restype = None
    lib.PMIx_Info_load.argtypes = [
        ctypes.POINTER(InfoT),
        ctypes.c_char_p,
        ctypes.c_void_p,
        ctypes.c_uint16,
    ]
    lib.PMIx_Info_load.restype = status
    lib.PMIx_Allocation_request.argtypes = [
        ctypes.c_uint8,
        ctypes.POINTER(InfoT),
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.POINTER(InfoT)),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    lib.PMIx_Allocation_request.restype = status
    lib.PMIx_Query_info.argtypes = [
        ctypes.POINTER(QueryT),
        ctypes.c_size_t,
        ctypes.POINTER(ctypes.POINTER(InfoT)),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    lib.PMIx_Query_info.restype = status
    lib.PMIx_Error_string.argtypes = [ctypes.c_int]
    lib.PMIx_Error_string.restype = ctypes.c_char_p
    lib.PMIx_Get_version.argtypes = []
    lib.PMIx_Get_version.restype = ctypes.c_char_p
    return lib


_libc = ctypes.CDLL(None)
_libc.free.argtypes = [ctypes.c_void_p]
_libc.free.restype = None


def _value(v: ValueT) -> Any:
    """A Python value for a ``pmix_value_t`` of a simple type (``None`` for other types)."""
    d, t = v.data, v.type
    if t == PMIX_STRING:
        return ctypes.string_at(d.string).decode(errors="replace") if d.string else ""
    if t == PMIX_BOOL:
        return bool(d.flag)
    simple = {
        PMIX_SIZE: d.size,
        PMIX_INT: d.integer,
        PMIX_INT8: d.int8,
        PMIX_INT16: d.int16,
        PMIX_INT32: d.int32,
        PMIX_INT64: d.int64,
        PMIX_UINT: d.uint,
        PMIX_UINT8: d.uint8,
        PMIX_BYTE: d.uint8,
        PMIX_UINT16: d.uint16,
        PMIX_UINT32: d.uint32,
        PMIX_PROC_RANK: d.uint32,
        PMIX_UINT64: d.uint64,
        PMIX_STATUS: d.integer,
        PMIX_PID: d.integer,
        PMIX_FLOAT: d.fval,
        PMIX_DOUBLE: d.dval,
    }
    if t in simple:
        return simple[t]
    if t == PMIX_DATA_ARRAY and d.ptr:
        arr = ctypes.cast(d.ptr, ctypes.POINTER(DataArrayT)).contents
        if arr.type == PMIX_INFO and arr.array:
            infos = ctypes.cast(arr.array, ctypes.POINTER(InfoT))
            return {infos[i].key.decode(): _value(infos[i].value) for i in range(arr.size)}
    return None


class Client:
    """A process's connection to its PMIx server (made by :func:`connect`).

    Attributes
    ----------
    nspace
        This process's namespace (the job: a Slurm step ``J.S``'s id, or ORTE's job id).
    rank
        This process's rank in the namespace.
    init_s
        How long ``PMIx_Init`` took (seconds).
    """

    def __init__(self, lib: ctypes.CDLL, proc: ProcT, init_s: float) -> None:
        self._lib = lib
        self._proc = proc
        self._lock = threading.Lock()
        self.nspace = proc.nspace.decode()
        self.rank = int(proc.rank)
        self.init_s = init_s
        self.closed = False
        atexit.register(self.close)

    def error_string(self, status: int) -> str:
        """PMIx's name of ``status`` (e.g. ``PMIX_ERR_NOT_SUPPORTED`` for -47)."""
        text = self._lib.PMIx_Error_string(int(status))
        return text.decode() if text else str(status)

    def version(self) -> str:
        """The library's version string, e.g. ``OpenPMIx 4.2.2 (PMIx Standard: 4.2, ...)``."""
        return (self._lib.PMIx_Get_version() or b"").decode()

    def _check_open(self) -> None:
        if self.closed:
            raise PmixError("PMIx (closed)", PMIX_ERR_INIT, "PMIx_Finalize was called")

    def get(self, key: str, rank: int | None = None, *, missing: Any = None) -> Any:
        """``PMIx_Get(key)`` about ``rank`` of this namespace (default: the job, wildcard rank).

        Returns ``missing`` when the server has no such key (``PMIX_ERR_NOT_FOUND``).

        Raises
        ------
        PmixError
            Any other failure (status and name in the message), or the client is closed.
        """
        self._check_open()
        proc = ProcT()
        proc.nspace = self._proc.nspace
        proc.rank = PMIX_RANK_WILDCARD if rank is None else int(rank)
        out = ctypes.POINTER(ValueT)()
        with self._lock:
            status = self._lib.PMIx_Get(
                ctypes.byref(proc), key.encode(), None, 0, ctypes.byref(out)
            )
        if status == PMIX_ERR_NOT_FOUND:
            return missing
        if status != PMIX_SUCCESS:
            raise PmixError(f"PMIx_Get({key})", status, self.error_string(status))
        try:
            return _value(out.contents)
        finally:
            self._lib.PMIx_Value_destruct(out)
            _libc.free(ctypes.cast(out, ctypes.c_void_p))

    def _free_infos(self, infos: Any, n: int) -> None:
        if not infos:
            return
        for i in range(n):
            self._lib.PMIx_Value_destruct(ctypes.byref(infos[i].value))
        _libc.free(ctypes.cast(infos, ctypes.c_void_p))

    def allocation_request(self, directive: int, nodes: int) -> tuple[int, dict[str, Any]]:
        """``PMIx_Allocation_request(directive, PMIX_ALLOC_NUM_NODES=nodes)`` (blocking).

        Parameters
        ----------
        directive
            :data:`PMIX_ALLOC_EXTEND` (more nodes) or :data:`PMIX_ALLOC_RELEASE` (give back).
        nodes
            How many nodes to add or release (> 0).

        Returns
        -------
        tuple
            The status (0 granted, ``-47`` not supported here...) and the results as a dict.
        """
        self._check_open()
        if nodes <= 0:
            raise ValueError(f"an allocation request needs a positive node count, got {nodes}")
        info = InfoT()
        count = ctypes.c_uint64(nodes)
        self._lib.PMIx_Info_load(
            ctypes.byref(info), PMIX_ALLOC_NUM_NODES.encode(), ctypes.byref(count), PMIX_UINT64
        )
        results = ctypes.POINTER(InfoT)()
        nresults = ctypes.c_size_t(0)
        with self._lock:
            status = self._lib.PMIx_Allocation_request(
                directive, ctypes.byref(info), 1, ctypes.byref(results), ctypes.byref(nresults)
            )
        self._lib.PMIx_Value_destruct(ctypes.byref(info.value))
        out = {results[i].key.decode(): _value(results[i].value) for i in range(nresults.value)}
        self._free_infos(results, nresults.value)
        return int(status), out

    def query(self, *keys: str) -> tuple[int, dict[str, Any]]:
        """``PMIx_Query_info`` with one query of ``keys`` (no qualifiers); status and results."""
        self._check_open()
        argv = (ctypes.c_char_p * (len(keys) + 1))(*[k.encode() for k in keys], None)
        query = QueryT(ctypes.cast(argv, ctypes.POINTER(ctypes.c_char_p)), None, 0)
        results = ctypes.POINTER(InfoT)()
        nresults = ctypes.c_size_t(0)
        with self._lock:
            status = self._lib.PMIx_Query_info(
                ctypes.byref(query), 1, ctypes.byref(results), ctypes.byref(nresults)
            )
        out = {results[i].key.decode(): _value(results[i].value) for i in range(nresults.value)}
        self._free_infos(results, nresults.value)
        return int(status), out

    def close(self) -> None:
        """``PMIx_Finalize`` (once; later calls do nothing)."""
        global _client
        with self._lock:
            if self.closed:
                return
            self.closed = True
            status = self._lib.PMIx_Finalize(None, 0)
        if status != PMIX_SUCCESS:
            log.debug("PMIx_Finalize returned %d", status)
        with _state_lock:
            if _client is self:
                _client = None


_state_lock = threading.Lock()
_client: Client | None = None
_unavailable: str | None = None


def connect(env: Mapping[str, str] | None = None) -> tuple[Client | None, str]:
    """The PMIx client of this process, connecting on first use; or ``None`` and why not.

    The answer is remembered for the process: ``PMIx_Init`` runs at most once (until
    :meth:`Client.close`). When PMIx is unavailable one line is logged, once.

    Returns
    -------
    tuple
        ``(client, "")``, or ``(None, reason)``: ``ELASTIC_SLURM_PMIX=0``, no library, or
        ``PMIx_Init`` failed (``-25``/``PMIX_ERR_UNREACH`` outside a job).
    """
    global _client, _unavailable
    with _state_lock:
        if _client is not None:
            return _client, ""
        if _unavailable is not None:
            return None, _unavailable
        if not enabled(env):
            reason = "PMIx use is off (ELASTIC_SLURM_PMIX=0)"
        else:
            try:
                lib = _load()
            except (OSError, AttributeError) as exc:
                reason = f"no usable {LIBRARY}: {exc}"
            else:
                proc = ProcT()
                t0 = time.monotonic()
                status = lib.PMIx_Init(ctypes.byref(proc), None, 0)
                elapsed = time.monotonic() - t0
                if status == PMIX_SUCCESS:
                    _client = Client(lib, proc, elapsed)
                    log.debug("PMIx_Init: %s rank %d in %.4f s", _client.nspace, proc.rank, elapsed)
                    return _client, ""
                text = (lib.PMIx_Error_string(status) or b"").decode()
                reason = (
                    f"PMIx_Init returned {status} ({text}) after {elapsed * 1000:.0f} ms: "
                    "no PMIx server (not in an srun --mpi=pmix step or under mpirun)"
                )
        _unavailable = reason
    log.info("PMIx not used: %s; facts come from the environment", reason)
    return None, reason


def _forget() -> None:
    """Forget the remembered answer of :func:`connect` (tests)."""
    global _client, _unavailable
    with _state_lock:
        _client, _unavailable = None, None


def main(argv: list[str] | None = None) -> int:
    """``python -m elastic_slurm.mpi_runtime.pmix [--json]``: this step's PMIx facts.

    Prints the layout, the server's support for spawning and allocation requests, and the
    library version (see :func:`elastic_slurm.mpi_runtime.probe.pmix_support`). Exit status 0
    also when PMIx is unavailable (the output says why).
    """
    import argparse
    import json

    from elastic_slurm.mpi_runtime.probe import pmix_support

    p = argparse.ArgumentParser(prog="python -m elastic_slurm.mpi_runtime.pmix")
    p.add_argument("--json", action="store_true", help="one JSON object")
    args = p.parse_args(argv)
    facts = pmix_support().to_json()
    if args.json:
        print(json.dumps(facts), flush=True)
    else:
        for key, value in facts.items():
            print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
