"""The application's side of elasticity: :func:`init`, registered data, resize points.

A malleable mpi4py application uses ``ec.comm`` instead of ``MPI.COMM_WORLD``, registers its
distributed arrays and any other state, and calls ``ec.resize_point()`` once per iteration::

    ec = init()
    u = ec.array("u", (N, N), np.float64)          # rows in blocks over the ranks
    ec.state.setdefault("iteration", 0)              # JSON-able scalars travel too
    if not ec.resumed:
        start, stop = u.rows()
        u.local[:] = initial_rows(start, stop)
    while ec.state["iteration"] < iterations:
        u.local = step(u.local, ec.comm)
        ec.state["iteration"] += 1
        if ec.resize_point():                         # True when the world changed
            pass                                      # ec.comm and u.local are new

Rank 0 hears of the controller's orders in a background thread (:mod:`.orders`), which also
checks the nodes a grow adds and prepares what can be prepared while the ranks compute; the
ranks agree on the resize point where they act through a pre-posted non-blocking broadcast, so
a resize point with nothing to do costs microseconds. To follow an order, the runtime uses
one of two join strategies (:mod:`.probe` chooses; each is a module behind
:class:`~.probe.Join`):

* :mod:`.join_spawn` spawns the new ranks on the added nodes and merges them into ``ec.comm``
  in helper threads while the ranks compute (:mod:`.spawn`; at the resize point when the MPI
  library lacks ``MPI_THREAD_MULTIPLE``), then redistributes the arrays at an agreed resize
  point; or
* :mod:`.join_restart` has the launcher start the next generation at the new size, which waits
  (:mod:`.handover`); then checkpoints arrays and state (to memory where both generations see
  it, else to the job directory) and ends the process (``SystemExit(0)`` through
  :class:`ResizeExit`); the waiting generation's ``init()`` and ``ec.array`` restore the data
  (``ec.resumed``).

``ELASTIC_SLURM_RESIZE_PATH=sequential`` does everything at the resize point instead, as
before (an order looked up at each point, the launcher restarting the application after it
ended), for comparison. The application's pause (from entering the resize point that acts to
computing again) is measured and acknowledged with the phases (``pause``).

New ranks created by a spawn run the same program from the start; their ``init()`` joins the
merged communicator and receives their rows and the state, so they resume like restarted ranks.
Outside the launcher (no job directory) ``resize_point`` never resizes: the same program runs at
a fixed size. An evolving application asks for nodes with :meth:`ElasticComm.request_nodes`,
which asks the PMIx server first (:mod:`.pmix`) and the controller when the server cannot.
"""

from __future__ import annotations

import atexit
import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from mpi4py import MPI

from elastic_slurm import envvars
from elastic_slurm.errors import JobInputError
from elastic_slurm.model.offer import Answer, AnswerKind, Offer
from elastic_slurm.model.resize_order import AckStatus, ResizeAck, ResizeOrder
from elastic_slurm.mpi_runtime.channel import FileChannel, channel_for
from elastic_slurm.mpi_runtime.collective import raise_together
from elastic_slurm.mpi_runtime.data import (
    Block,
    DistArray,
    Distribution,
    StateHooks,
)
from elastic_slurm.mpi_runtime.distribution import BlockRows
from elastic_slurm.mpi_runtime.handover import yield_cpu
from elastic_slurm.mpi_runtime.join_restart import RestartJoin
from elastic_slurm.mpi_runtime.join_spawn import SpawnJoin
from elastic_slurm.mpi_runtime.layout import Layout, current_layout
from elastic_slurm.mpi_runtime.local import from_env as local_try_from_env
from elastic_slurm.mpi_runtime.orders import (
    ORDER_READY,
    SPAWN_DONE,
    YIELD,
    OrderWatcher,
    Vote,
    wait_for_all,
    warn_look_failed,
)
from elastic_slurm.mpi_runtime.probe import RESTART, SPAWN, choose_join
from elastic_slurm.mpi_runtime.resize_paths import SEQUENTIAL, resize_path
from elastic_slurm.mpi_runtime.say import say
from elastic_slurm.mpi_runtime.state import ResizeState
from elastic_slurm.protocol.client import RefusedError
from elastic_slurm.protocol.jobdir import JobDir, write_json_atomic

log = logging.getLogger("elastic_slurm.mpi_runtime")

_SPAWNED = object()  # the vote's answer: the helper threads' spawn is complete
#: In the job directory: the PMIx server's answer to the job's first allocation request.
PMIX_MEMO = "pmix.json"


class ResizeExit(SystemExit):
    """Raised by :meth:`ElasticComm.resize_point` to end this process for a restart.

    Its exit status is 0. Let it propagate (do not catch ``SystemExit``): the launcher restarts
    the application at the new size, and ``init()`` restores the data there.
    """

    def __init__(self) -> None:
        super().__init__(0)


def move_rows(
    comm: MPI.Intracomm,
    local: np.ndarray | None,
    meta: dict[str, Any],
    src_parts: int,
    dst_parts: int,
    src_dist: Distribution | None = None,
    dst_dist: Distribution | None = None,
) -> np.ndarray:
    """Redistribute one array over ``comm`` (collective), between any two distributions.

    ``meta`` is :meth:`DistArray.meta`; ``src_dist``/``dst_dist`` default to its distribution:
    rows (:class:`~.data.Block`, :class:`~.data.BlockCyclic`) or 2-D process grids
    (:class:`~.data.Block2D`, :class:`~.data.BlockCyclic2D`), in any pairing
    (:func:`~.redistribute.move_array`).
    """
    from elastic_slurm.mpi_runtime.redistribute import move_array

    return move_array(comm, local, meta, src_parts, dst_parts, src_dist, dst_dist)


class ElasticComm:
    """The application's communicator, which changes at resize points.

    Attributes
    ----------
    comm
        The current intracommunicator; use it instead of ``MPI.COMM_WORLD``.
    generation
        How many resizes this run has gone through (0 at the first start).
    resumed
        True when this process took over data from an earlier size (restarted or spawned).
    state
        JSON-able scalars (an iteration counter...) carried across resizes, as on rank 0.
    last_resize_s
        Seconds per phase of the last resize this process took part in (``grant``,
        ``spawn``, ``merge``, ``redistribute``, or ``checkpoint``, ``relaunch``,
        ``restore``; ``release`` for shrinks, measured by the controller).
    """

    _unreadable_ack: int | None = None  # rank 0: the order whose damaged ack was warned of

    def __init__(
        self,
        comm: MPI.Intracomm,
        *,
        jobdir: JobDir | None,
        channel: FileChannel | None = None,
        launch: int = 0,
        launch_host: str | None = None,
        ntasks_per_node: int = 1,
        join: str | None = None,
    ) -> None:
        self.comm = comm
        self.jobdir = jobdir
        self.channel = channel if channel is not None or jobdir is None else FileChannel(jobdir)
        self._offer_hook: Callable[[Offer], Answer | None] | None = None
        self.launch = launch
        self.launch_host = launch_host
        self.ntasks_per_node = ntasks_per_node
        self.join = join
        self.generation = 0
        self.next_seq = 1
        self.resumed = False
        self._state = ResizeState()
        self.last_resize_s: dict[str, float] = {}
        self._arrays: dict[str, DistArray] = {}
        self._restored: dict[str, tuple[dict[str, Any], np.ndarray]] = {}
        self._hooks: StateHooks | None = None
        self._packed: list[Any] | None = None
        self._layout: Layout | None = None
        self._path = resize_path()
        self._vote: Vote | None = None
        self._watcher: OrderWatcher | None = None
        self._starting: int | None = None  # rank 0: the order whose successor is starting
        self._failed_look: tuple[int, str] | None = None  # the sequential path's last warning
        self._yielded: int | None = None  # rank 0: the order for which YIELD was voted
        self._known_hosts: list[str] = []
        self._paused_at = 0.0
        self._vendor: tuple[str, tuple[int, ...]] = ("", ())
        # the join strategies (one module each, behind :class:`~.probe.Join`)
        self._spawn = SpawnJoin(self)
        self._restart = RestartJoin(self)
        # ``elastic-slurm try`` (ELASTIC_SLURM_LOCAL_TRY): forced resizes and checks
        self._local = local_try_from_env(jobdir)

    # ------------------------------------------------------------------ basics
    @property
    def state(self) -> ResizeState:
        """Scalars carried across resizes (as on rank 0), checked as they are set.

        ``None``, ``bool``, ``int``, ``float`` or ``str`` values under ``str`` keys; anything
        else raises ``ValueError`` where it is set (save arrays with :meth:`array`).
        """
        return self._state

    @state.setter
    def state(self, value: Any) -> None:
        self._state = value if isinstance(value, ResizeState) else ResizeState(value)

    @property
    def rank(self) -> int:
        """The rank of this process in :attr:`comm`."""
        return int(self.comm.rank)

    @property
    def size(self) -> int:
        """The number of ranks in :attr:`comm`."""
        return int(self.comm.size)

    def rows(self, global_rows: int) -> tuple[int, int]:
        """``(start, stop)``: the rows of a ``global_rows``-row block array this rank owns."""
        return BlockRows(global_rows, self.size).rows_of(self.rank)

    @property
    def layout(self) -> Layout:
        """Where the ranks started together with this one run (:mod:`.layout`).

        From the PMIx server where one answers, else from Slurm's or ``mpirun``'s environment.
        It describes the launch (``mpirun``'s job), so it no longer covers :attr:`comm` once a
        spawn has merged new ranks in; :meth:`hosts` checks that.
        """
        if self._layout is None:
            self._layout = current_layout()
        return self._layout

    def hosts(self) -> list[str]:
        """The hostname of every rank of :attr:`comm`, in rank order (collective).

        The launch's :attr:`layout` when it describes :attr:`comm` exactly on every rank (the
        same group in the same order, every rank's host known); otherwise, e.g. after a spawn
        merged new ranks in, each rank's own hostname, gathered.
        """
        if self._local is not None:
            return self._local.hosts(self.size)
        lay = self.layout
        fits = (
            MPI.Comm.Compare(self.comm, MPI.COMM_WORLD) in (MPI.IDENT, MPI.CONGRUENT)
            and lay.exact
            and (lay.size, lay.rank) == (self.size, self.rank)
            and lay.host == socket.gethostname()
        )
        if self.comm.allreduce(fits, op=MPI.LAND):
            return list(lay.rank_hosts)
        return list(self.comm.allgather(socket.gethostname()))

    # ------------------------------------------------------------------ registration
    def array(
        self,
        name: str,
        global_shape: tuple[int, ...],
        dtype: Any = np.float64,
        dist: Distribution | None = None,
    ) -> DistArray:
        """Register a distributed array (collective: every rank, same arguments).

        Parameters
        ----------
        name
            Unique name (it names the checkpoint file too: letters, digits, ``_-``).
        global_shape
            ``(rows, *trailing)``; distributed along axis 0.
        dtype
            Any numpy dtype (not object).
        dist
            :class:`~.data.Block` (default) or :class:`~.data.BlockCyclic` (rows), or
            :class:`~.data.Block2D` or :class:`~.data.BlockCyclic2D` (a 2-D process grid,
            as ScaLAPACK's; ``docs/distributions.md``).

        Returns
        -------
        DistArray
            After a resize (``resumed``), ``local`` holds this rank's restored rows; otherwise
            zeros of the right shape, for the application to fill.

        Raises
        ------
        ValueError
            A name registered twice, or a restored array whose shape, dtype or distribution
            differ from what the program registers now.
        """
        if name in self._arrays:
            raise ValueError(f"array {name!r} is registered twice")
        arr = DistArray(
            name,
            tuple(int(n) for n in global_shape),
            np.dtype(dtype),
            dist or Block(),
            np.empty(0),
            self.rank,
            self.size,
        )
        if name in self._restored:
            meta, local = self._restored.pop(name)
            if meta != arr.meta():
                raise ValueError(
                    f"array {name!r} was saved as {meta}, but is registered now as {arr.meta()}"
                )
            arr.local = local
        else:
            arr.local = np.zeros(arr.local_shape(), dtype=arr.dtype)
        self._arrays[name] = arr
        return arr

    def on_resize(self, pack: Callable[[], Any], unpack: Callable[[list[Any]], None]) -> None:
        """Register hooks for other state (see :class:`~.data.StateHooks`).

        If this process resumed, ``unpack`` runs at once with what the old ranks packed.
        """
        self._hooks = StateHooks(pack, unpack)
        if self._packed is not None:
            packed, self._packed = self._packed, None
            unpack(packed)

    def request_nodes(self, delta: int) -> int:
        """Ask for ``delta`` more nodes (or give ``-delta`` back); evolving jobs.

        The PMIx server is asked first (``PMIx_Allocation_request``, see :meth:`_ask_pmix`);
        where it cannot serve allocation requests (-47 here) the controller is asked, and the
        answer comes as a resize order at a later resize point (or never, if the policy
        refuses). Only rank 0's call counts (call it on every rank, or just rank 0). Returns
        the controller request's number on rank 0 (0 elsewhere, and when PMIx granted it).

        Raises
        ------
        ValueError
            ``delta`` is 0.
        RuntimeError
            Not running under the elastic launcher (no job directory).
        """
        if delta == 0:
            raise ValueError("ask for at least one node more or fewer")
        if self.jobdir is None:
            raise RuntimeError("evolving requests need the elastic launcher (elastic-slurm run)")
        assert self.channel is not None
        number = 0
        if self.rank == 0:
            if self._ask_pmix(delta):
                return 0
            # numbered after every request of the job, across restarts
            number = self.channel.request(delta, self.size)
        return number

    def _ask_pmix(self, delta: int) -> bool:
        """Ask the PMIx server for the change first (rank 0); True when it granted it.

        ``PMIx_Allocation_request`` (``EXTEND`` by ``delta`` nodes, or ``RELEASE`` of
        ``-delta``). Its first answer other than success (here -47, ``PMIX_ERR_NOT_SUPPORTED``,
        under ``srun`` and ``mpirun`` alike) is logged once, recorded in the job directory
        (``pmix.json`` and a ``pmix`` event) and remembered for the job's lifetime, across
        restarts: later requests go straight to the controller. Without a PMIx server, or
        with ``ELASTIC_SLURM_PMIX=0``, nothing is asked.
        """
        from elastic_slurm.mpi_runtime import pmix

        assert self.jobdir is not None
        memo = self.jobdir.path / PMIX_MEMO
        if memo.exists():
            return False
        client, _why = pmix.connect()
        if client is None:
            return False
        directive = pmix.PMIX_ALLOC_EXTEND if delta > 0 else pmix.PMIX_ALLOC_RELEASE
        name = "EXTEND" if delta > 0 else "RELEASE"
        t0 = time.monotonic()
        status, results = client.allocation_request(directive, abs(delta))
        elapsed_ms = round((time.monotonic() - t0) * 1000, 3)
        text = client.error_string(status)
        record = {"directive": name, "nodes": abs(delta), "status": status, "error": text}
        self._log_event("pmix", call="PMIx_Allocation_request", ms=elapsed_ms, **record)
        if status == pmix.PMIX_SUCCESS:
            say(self.comm, f"PMIx granted {name} of {abs(delta)} node(s): {results}")
            return True
        write_json_atomic(memo, {**record, "at": time.time()})
        say(
            self.comm,
            f"PMIx_Allocation_request {name} returned {status} ({text}); this job's requests "
            "go to the controller from now on",
        )
        return False

    def on_offer(self, hook: Callable[[Offer], Answer | None]) -> None:
        """Decide about the controller's offers yourself (default: accept every offer).

        ``hook(offer)`` runs on rank 0 at a resize point when an offer (expand with
        ``offer.hosts``, or shrink by ``offer.count``) awaits an answer; it returns an
        :class:`~elastic_slurm.model.offer.Answer` (accept, reject, or counter with another
        count; a counter to a ``final`` offer counts as a reject), or ``None`` to accept. Offers
        come only to jobs that talk to a controller (submitted with its URL).
        """
        self._offer_hook = hook

    def _answer(self, offer: Offer) -> None:
        """Answer ``offer`` on rank 0 (the order, if any, comes at a later resize point)."""
        assert self.channel is not None
        answer = self._offer_hook(offer) if self._offer_hook is not None else None
        if answer is None:
            answer = Answer(number=offer.number, answer=AnswerKind.ACCEPT)
        if answer.number != offer.number:
            answer = answer.model_copy(update={"number": offer.number})
        if offer.final and answer.answer is AnswerKind.COUNTER:
            answer = Answer(
                number=offer.number, answer=AnswerKind.REJECT, reason="countered a final offer"
            )
        channel = self.channel

        def send() -> None:
            try:
                channel.answer(answer)
            except RefusedError as exc:  # withdrawn or superseded meanwhile: nothing to do
                log.info("offer %d: %s", offer.number, exc)

        self._send(send)
        if self.jobdir is not None:
            self._log_event(
                "offer",
                number=offer.number,
                action=offer.action,
                count=offer.count,
                hosts=list(offer.hosts),
                final=offer.final,
                answer=answer.answer.value,
                answer_count=answer.count,
            )

    # ------------------------------------------------------------------ resize point
    def resize_point(self) -> bool:
        """Follow the controller's next resize order, if there is one (collective).

        Returns
        -------
        bool
            True when the world changed: ``comm``, ``rank`` and ``size`` are new, every
            registered array's ``local`` holds its new rows, and ``unpack`` has run.

        Raises
        ------
        ResizeExit
            The resize is done by restarting: data and state are saved; let it end the process.
        """
        if self.jobdir is None or self.channel is None:
            return False
        if self._local is not None:
            self._local.tick(self)
        paused_at = time.time()  # the end of the last iteration before a resize
        if self._path == SEQUENTIAL:
            order_json = self._order_now()
        else:
            order_json = self._order_agreed()
        if order_json is _SPAWNED:
            self._paused_at = paused_at
            self._spawn.finish()
            return True
        if order_json is None:
            return False
        self._paused_at = paused_at
        order = ResizeOrder.from_json(order_json)
        hosts = self.hosts()
        if set(hosts) == set(order.nodes):
            # the launcher started this step on the order's nodes already (Slurm resized the
            # job before the application first started): nothing to move
            self._done_with(order.seq)
            self._acknowledge(order.seq, "none", "already running on these nodes", {})
            return False
        choice = choose_join(
            order.action.value,
            self._placement(hosts),
            self.launch_host,
            MPI.get_vendor(),
            self.join,
        )
        say(
            self.comm,
            f"order {order.seq}: {order.action.value} to {len(order.nodes)} node(s) "
            f"{','.join(order.nodes)}; join strategy {choice.strategy}: {choice.reason}",
        )
        if self.rank == 0:
            self._log_event(
                "order",
                seq=order.seq,
                action=order.action.value,
                nodes=list(order.nodes),
                strategy=choice.strategy,
                reason=choice.reason,
            )
        if (
            self._path == SEQUENTIAL
            and order.action.value == "expand"
            and not self._added_nodes_work(order, hosts)
        ):
            return False
        join = self._spawn if choice.strategy == SPAWN else self._restart
        return join.follow(order, hosts, choice.reason)

    def _order_now(self) -> dict[str, Any] | None:
        """The sequential path: rank 0 asks the channel now; the answer is broadcast."""
        assert self.channel is not None
        order_json = None
        if self.rank == 0:
            try:
                got = self.channel.next(self.next_seq)
            except Exception as exc:  # noqa: BLE001 - as the watcher: the job goes on
                self._failed_look = warn_look_failed(self._failed_look, self.next_seq, exc)
                got = None
            if isinstance(got, Offer):
                self._answer(got)
            elif got is not None and got.needs_grant:
                try:
                    order_json = self._take_nodes(got).to_json()
                except Exception as exc:  # noqa: BLE001 - refused with the reason
                    self._refuse(got, list(got.nodes), f"no nodes granted: {exc}")
            elif got is not None:
                order_json = got.to_json()
        return self.comm.bcast(order_json, root=0)

    def _order_agreed(self) -> Any:
        """The overlapped path: the order rank 0's watcher made ready, once every rank voted.

        No I/O and no blocking collective unless an order is ready: rank 0 reads what its
        :class:`~.orders.OrderWatcher` thread found, and the ranks complete the
        :class:`~.orders.Vote` posted at the previous resize point and post the next.
        """
        if self._vote is None:
            self._begin_voting()
        assert self._vote is not None
        flag = 0
        if self.rank == 0:
            assert self._watcher is not None
            for offer in self._watcher.take_offers():
                self._answer(offer)
            for order, why in self._watcher.take_refused():
                say(self.comm, f"order {order.seq}: not followed: {why}")
                self._refuse(order, self._known_hosts, why)
            if self._spawn.pending is not None:
                flag = SPAWN_DONE if self._spawn.pending.done() else 0
            elif self._watcher.ready() is not None:
                flag = ORDER_READY
            elif (starting := self._starting) is not None and self._yielded != starting:
                flag, self._yielded = YIELD, starting
        voted = self._vote.exchange(flag)
        if not voted:
            return None
        if voted & SPAWN_DONE:
            return _SPAWNED
        if voted == YIELD:
            nice = yield_cpu()
            if self.rank == 0 and self.jobdir is not None:
                self._log_event("yielded", seq=self._yielded, nice=nice)
            return None
        # rank 0 alone may get here (its broadcasts complete without the others): check that
        # every rank came before the collectives of the resize
        vote = self._vote
        wait_for_all(self.comm.Ibarrier(), self.comm, vote.checkin, vote.label, vote.timeout_s)
        order_json = None
        if self.rank == 0:
            assert self._watcher is not None
            ready = self._watcher.ready()
            order_json = ready.to_json() if ready is not None else None
        return self.comm.bcast(order_json, root=0)

    def _begin_voting(self) -> None:
        """Set up the overlapped path on :attr:`comm` (collective: at start, after a resize).

        The vote's duplicate communicator, the hosts, and on rank 0 the order watcher.
        """
        if self.jobdir is None or self.channel is None or self._path == SEQUENTIAL:
            return
        checkin = self.jobdir.path / "checkin" / f"launch-{self.launch}-{self.generation}"
        self._vote = Vote(
            self.comm,
            period_s=0.0 if self._local is not None else 0.02,  # try: act at the next points
            checkin=checkin,
            timeout_s=envvars.get_float("RESIZE_POINT_TIMEOUT_S", 60.0),
        )
        self._known_hosts = self.hosts()
        self._vendor = MPI.get_vendor()
        if self.rank == 0 and self._watcher is None:
            self._watcher = OrderWatcher(
                self.channel,
                self.next_seq,
                interval_s=envvars.get_float("ORDER_POLL_S", 0.1),
                check=self._prepare,
                grant=self._take_nodes,
            )
            atexit.register(self._close_watcher)

    def _close_watcher(self) -> None:
        if self._watcher is not None:
            self._watcher.close()
            self._watcher = None

    def _new_comm(self, comm: MPI.Intracomm) -> None:
        """The world changed: vote on the new communicator from the next resize point on."""
        if self._vote is not None:
            self._vote.close()
            self._vote = None
        self.comm = comm
        self._begin_voting()

    def _done_with(self, seq: int) -> None:
        self.next_seq = seq + 1
        if self._watcher is not None:
            self._watcher.done_with(seq)

    def _log_event(self, event: str, **fields: Any) -> None:
        """Rank 0: append an event to the job's ``events.jsonl``, or warn (the log only).

        A full disk or a damaged file in the job directory must not make rank 0 raise alone
        between two collectives (the other ranks would wait for it until the time limit).
        """
        assert self.jobdir is not None
        try:
            self.jobdir.log_event(event, **fields)
        except (OSError, JobInputError) as exc:
            log.warning("event %r not logged in the job directory: %s", event, exc)

    def _send(self, message: Callable[[], None]) -> None:
        """Send a message to the controller: through rank 0's watcher thread if there is one.

        Then the ranks do not wait for the network; without a watcher it goes now. Either
        way a message that fails is logged, not raised (rank 0 would raise alone).
        """
        if self._watcher is not None:
            self._watcher.send(message)
            return
        try:
            message()
        except Exception:  # noqa: BLE001 - as the watcher: logged, rank 0 does not raise alone
            log.exception("a message to the controller failed")

    def _take_nodes(self, order: ResizeOrder) -> ResizeOrder:
        """Rank 0: ask Slurm as the job's user for an expansion's nodes; the granted order.

        A service controller's expansion (:func:`.grant.take_nodes`).

        Raises
        ------
        ResizeError, SlurmCommandError
            Nothing granted; the job keeps its nodes.
        """
        from elastic_slurm.mpi_runtime.grant import take_nodes
        from elastic_slurm.mpi_runtime.slurm_env import job_slurm

        job_id = envvars.get_int("JOB_ID", 0) or int(os.environ.get("SLURM_JOB_ID", "0"))
        if not job_id:
            from elastic_slurm.errors import ResizeError

            raise ResizeError("not inside a Slurm job: no nodes to ask for")
        granted = take_nodes(order, job_slurm(), job_id)
        if self.channel is not None:
            self.channel.record(granted)  # the job's own record, with the nodes it got
        return granted

    def _preflight(self, order: ResizeOrder) -> str | None:
        """Why the nodes ``order`` adds cannot run the job, or ``None`` (rank 0; no MPI).

        A node that died after Slurm granted it would take the whole job down once ranks are
        started there; instead the order is refused: acknowledged as failed, the job goes on at
        its size, and the controller gives the grant back (:mod:`.preflight`).
        """
        if order.action.value != "expand" or self._local is not None:  # try: no nodes to check
            return None
        from elastic_slurm.mpi_runtime.preflight import check_hosts

        added = [n for n in order.nodes if n not in set(self._known_hosts)]
        job_id = envvars.get_int("JOB_ID", 0) or int(os.environ.get("SLURM_JOB_ID", "0"))
        timeout = envvars.get_float("PREFLIGHT_TIMEOUT_S", 20.0)
        bad = check_hosts(added, job_id, timeout) if job_id and added else {}
        if not bad:
            return None
        return "; ".join(f"{h}: {why}" for h, why in sorted(bad.items()))

    def _prepare(self, order: ResizeOrder) -> str | None:
        """Rank 0's watcher thread: get ready to follow ``order``; why not, or ``None``.

        Checks the nodes an expansion adds (:meth:`_preflight`); when the order will be
        followed by a restart, has the launcher start the next generation and waits until it
        is ready (:mod:`.handover`), while the ranks go on computing.
        """
        why = self._preflight(order)
        if why:
            return f"added nodes unusable: {why}"
        hosts = self._known_hosts
        if set(hosts) == set(order.nodes):
            return None
        choice = choose_join(
            order.action.value, self._placement(hosts), self.launch_host, self._vendor, self.join
        )
        if choice.strategy != RESTART:
            return None
        self._starting = order.seq  # the ranks yield the cores to it (:func:`yield_cpu`)
        try:
            return self._restart.prepare(order)
        finally:
            self._starting = None

    def _placement(self, hosts: list[str]) -> list[str]:
        """Where the ranks of ``hosts`` really run (this machine for ``elastic-slurm try``)."""
        return self._local.placement(hosts) if self._local is not None else hosts

    def _added_nodes_work(self, order: ResizeOrder, hosts: list[str]) -> bool:
        """The sequential path: check the added nodes now (collective); refuse if one fails."""
        self._known_hosts = hosts
        why = self._preflight(order) if self.rank == 0 else None
        why = self.comm.bcast(why, root=0)
        if not why:
            return True
        say(self.comm, f"order {order.seq}: refused, added node(s) cannot run the job: {why}")
        if self.rank == 0:
            self._refuse(order, hosts, f"added nodes unusable: {why}")
        self.next_seq = order.seq + 1
        return False

    def _launcher_failed(self, seq: int) -> bool:
        """Rank 0: whether the launcher acknowledged order ``seq`` as failed.

        A damaged acknowledgement is not the launcher's word: ``False``, with a warning once
        per order (a successor's preparation polls this), never an error rank 0 raises alone.
        """
        assert self.jobdir is not None
        try:
            return self.jobdir.read_ack(seq, AckStatus.FAILED) is not None
        except (OSError, JobInputError) as exc:
            if self._unreadable_ack != seq:
                self._unreadable_ack = seq
                log.warning("order %d: the launcher's acknowledgement is unreadable: %s", seq, exc)
            return False

    def _refuse(self, order: ResizeOrder, hosts: list[str], why: str) -> None:
        """Rank 0: acknowledge ``order`` as failed, with ``why``, unless the launcher did.

        Under a service controller (``order.by_job``) the nodes an expansion took and the
        job will not use go back to Slurm: by the launcher when it failed the order (it
        waits for the discarded successor's steps to leave them), otherwise from here.
        """
        assert self.jobdir is not None and self.channel is not None
        channel = self.channel
        ack = ResizeAck(
            order.seq,
            AckStatus.FAILED,
            tuple(dict.fromkeys(hosts)),
            time.time(),
            reason=why,
            ranks=self.size,
        )
        kept = tuple(dict.fromkeys(hosts))
        # the launcher failed it already (a restart's waiting successor): it also gave the
        # taken nodes back, once the successor's steps had left them; otherwise rank 0 does
        launcher_failed = self._launcher_failed(order.seq)
        if (
            not launcher_failed
            and order.by_job
            and order.action.value == "expand"
            and set(order.nodes) - set(kept)
        ):
            # it took nodes it will not use (a service controller cannot give them back)
            self._send(lambda: self._give_back_unused(order, kept))
        if not launcher_failed:  # (the launcher logged its own event with its reason)
            self._send(lambda: channel.ack(ack))
            self._log_event("failed", seq=order.seq, reason=why)
        self.next_seq = order.seq + 1

    def _give_back_unused(self, order: ResizeOrder, kept: tuple[str, ...]) -> None:
        """Rank 0 (the watcher's thread): give back the nodes ``order`` took, keeping ``kept``.

        The job refused the order after Slurm granted it (an added node failed its check).
        """
        from elastic_slurm.mpi_runtime.grant import give_back
        from elastic_slurm.mpi_runtime.slurm_env import job_slurm

        job_id = envvars.get_int("JOB_ID", 0) or int(os.environ.get("SLURM_JOB_ID", "0"))
        try:
            give_back(job_slurm(), job_id, kept)
        except Exception as exc:  # noqa: BLE001 - the job keeps them until it ends
            log.warning("order %d: could not give back the unused nodes: %s", order.seq, exc)
            return
        if self.jobdir is not None:
            self._log_event("released", seq=order.seq, nodes=list(kept))

    def _pack(self) -> list[Any] | None:
        """What every rank's ``pack`` returned, on rank 0 (``None`` elsewhere or no hooks)."""
        if self._hooks is None:
            return None
        return self.comm.gather(self._hooks.pack(), root=0)

    def _arrival(self, packed: list[Any] | None) -> None:
        """After a resize: hand the old ranks' packed state to ``unpack`` (or keep it)."""
        if packed is None:
            return
        if self._hooks is not None:
            self._hooks.unpack(packed)
        else:
            self._packed = packed

    def finalize(self) -> None:
        """Disconnect from spawned (or parent) ranks before MPI ends (collective).

        Run automatically at exit once a spawn has started (:mod:`.join_spawn`). Call it
        yourself only if you end the program some other way than returning normally.
        """
        self._spawn.finalize()

    def _acknowledge(self, seq: int, strategy: str, reason: str, phases: dict[str, float]) -> None:
        """Tell the controller the job now runs on its new nodes (collective)."""
        assert self.jobdir is not None
        hosts = self.hosts()
        if self.rank == 0:
            nodes = tuple(dict.fromkeys(hosts))
            channel = self.channel
            assert channel is not None
            ack = ResizeAck(
                seq,
                AckStatus.DONE,
                nodes,
                time.time(),
                strategy=strategy,
                reason=reason,
                ranks=self.size,
                phases_s=phases,
            )
            self._send(lambda: channel.ack(ack))
            self._log_event(
                "resized",
                seq=seq,
                nodes=list(nodes),
                ranks=self.size,
                strategy=strategy,
                phases_s=phases,
            )
        timing = ", ".join(f"{k} {v:.2f} s" for k, v in phases.items())
        say(
            self.comm,
            f"order {seq} done: {self.size} rank(s) on {len(set(hosts))} node(s) "
            f"({strategy}; {timing})",
        )


def init() -> ElasticComm:
    """Start the elastic runtime in this process (after ``from mpi4py import MPI``).

    Returns an :class:`ElasticComm`; its ``resumed`` says whether this process continues an
    earlier size (its arrays come back when registered with :meth:`ElasticComm.array`, its
    other state through :meth:`ElasticComm.on_resize`). Collective over the processes started
    together.

    Raises
    ------
    elastic_slurm.mpi_runtime.checkpoint.CheckpointError
        A restart found a damaged checkpoint (the message names the file).
    """
    job_dir = envvars.get_str("JOB_DIR")
    jobdir = JobDir(Path(job_dir)) if job_dir else None
    ec = ElasticComm(
        MPI.COMM_WORLD,
        jobdir=jobdir,
        channel=channel_for(jobdir) if jobdir is not None else None,
        launch=envvars.get_int("LAUNCH", 0),
        launch_host=envvars.get_str("LAUNCH_HOST"),
        ntasks_per_node=envvars.get_int("NTASKS_PER_NODE", 1),
        join=envvars.get_str("JOIN"),
    )
    if ec._spawn.arrive():  # a rank a spawn added: it joined the others
        return ec
    if ec.jobdir is not None and ec.rank == 0:
        # for the launcher: this generation's ranks run (it is never launched again)
        ec._log_event("started", generation=ec.launch, ranks=ec.size)
    if ec.jobdir is not None:
        lay = ec.layout
        say(
            ec.comm,
            f"layout from {lay.source} ({lay.scope}): {lay.size} rank(s) on "
            f"{len(lay.nodes)} node(s) {','.join(lay.nodes)}",
        )
    if ec.channel is not None:
        # each generation registers again (a restart is a new set of processes)
        hosts = list(dict.fromkeys(ec.hosts()))
        problem, cause = None, None
        if ec.rank == 0:
            try:
                ec.channel.register(ec.size, hosts)  # an unreachable controller is logged
            except Exception as exc:  # anything else must not leave the other ranks waiting
                problem, cause = (RuntimeError, f"{type(exc).__name__}: {exc}"), exc
        raise_together(ec.comm, problem, "registering with the controller", cause=cause)
    ec._restart.arrive()  # a generation after the first: the data of the one before
    if ec._vote is None:
        ec._begin_voting()  # collective: every rank, before any resize point
    return ec
