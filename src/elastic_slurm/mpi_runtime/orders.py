"""Hearing of resize orders without stopping the ranks: a watcher thread and a pre-posted vote.

A resize point must cost next to nothing when no order is pending (it runs every iteration),
yet every rank must resize at the same iteration. Two pieces do that:

* :class:`OrderWatcher` runs on rank 0 in a background thread. It asks the job's channel
  (:mod:`.channel`: the controller over HTTP, or the job directory) for the next order every
  ``interval_s`` seconds, checks the nodes an expansion adds (:mod:`.preflight`) while the
  ranks compute, and sends acknowledgements and answers without making the ranks wait. The
  thread makes no MPI call.
* :class:`Vote` is a small ``MPI_Ibcast`` from rank 0 that every rank posts at the same resize
  point and completes a fixed number of points later (the same on every rank), on a duplicate
  of the application's communicator. What rank 0 put in is known to every rank at the same
  point, so they all act there. In between, a resize point only counts down (``bench/resize.py
  --micro`` measures the cost); the previous design asked the controller over HTTP at every
  point (about 2.8 ms).

``ELASTIC_SLURM_RESIZE_PATH=sequential`` keeps the old behaviour (an order is looked up by rank
0 and broadcast at every resize point; everything happens at the resize point), for comparison.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from mpi4py import MPI

from elastic_slurm.model.offer import Offer
from elastic_slurm.model.resize_order import ResizeOrder

log = logging.getLogger(__name__)

#: Vote bits.
ORDER_READY = 1
FORCED = 2
SPAWN_DONE = 4
#: The next generation is starting: the ranks lower their priority (they end at the handover).
YIELD = 8


class Vote:
    """A pre-posted broadcast from rank 0: what it put in is seen by every rank at one point.

    Rank 0 puts a value (its flags) into an ``MPI_Ibcast`` that every rank posts at the same
    resize point and completes ``every`` resize points later, at the same point on every rank;
    in between a resize point only counts down. ``every`` is chosen by rank 0 and travels with
    the broadcast: as many resize points as fit in ``period_s`` seconds (1 when an iteration
    takes longer), at most :attr:`MAX_EVERY`. So a vote costs one post of an ``Ibcast``
    (about 20 us with mpi4py and Open MPI 4.1 once the caches are cold) and its completion
    every ``period_s`` (20 ms) at most, a countdown (about 1 us) otherwise, and an order waits
    at most about two periods once rank 0 holds it.

    Parameters
    ----------
    comm
        The application's communicator; a duplicate is used, so the vote never matches the
        application's own messages.
    period_s
        Seconds between two votes (about).
    checkin, timeout_s
        See :func:`wait_for_all`: after ``timeout_s`` seconds waiting for a vote, the ranks
        that never came are named.
    """

    MAX_EVERY = 64

    def __init__(
        self,
        comm: MPI.Intracomm,
        period_s: float = 0.02,
        checkin: Path | None = None,
        timeout_s: float = 60.0,
    ) -> None:
        self._comm = comm.Dup()
        self.checkin = checkin
        self.timeout_s = timeout_s
        self._votes = 0
        self._root = comm.rank == 0
        self.period_s = period_s
        self._buf = np.zeros(2, np.int64)  # (flags, points until the next vote)
        self._req: MPI.Request | None = None
        self._due = 0  # points left before the request in flight is completed
        self._every = 1
        self._posted_at = 0.0
        self._points = 0  # resize points since the last post

    def exchange(self, value: int) -> int:
        """One resize point: rank 0's ``value`` goes out, the flags of the last vote come back.

        Collective in the usual sense: every rank calls it the same number of times; only rank
        0's ``value`` counts. Returns 0 until a vote with flags completes; then that value, and
        nothing is posted (the caller acts on it; the next call starts afresh).
        """
        self._points += 1
        if self._req is not None:
            self._due -= 1
            if self._due > 0:
                return 0
            wait_for_all(self._req, self._comm, self.checkin, self.label, self.timeout_s)
            self._req = None
            flags, every = int(self._buf[0]), int(self._buf[1])
            if flags:
                return flags
            self._every = max(1, min(self.MAX_EVERY, every))
        if self._root:
            now = time.monotonic()
            if self._posted_at:  # points per period, from the time the last ones took
                per_point = (now - self._posted_at) / max(1, self._points)
                self._buf[1] = max(
                    1, min(self.MAX_EVERY, int(self.period_s / max(per_point, 1e-9)))
                )
            else:
                self._buf[1] = 1
            self._posted_at = now
            self._buf[0] = value
        self._req = self._comm.Ibcast(self._buf, root=0)
        self._points = 0
        self._votes += 1
        self._due = self._every
        return 0

    @property
    def label(self) -> str:
        """The point the ranks are at, the same on every rank (for :func:`wait_for_all`)."""
        return f"vote {self._votes}"

    def close(self, timeout_s: float = 1.0) -> None:
        """Complete the vote in flight, then free the duplicate communicator.

        Waits for up to ``timeout_s`` seconds: a rank may have stopped at another point.
        """
        if self._req is not None:
            deadline = time.monotonic() + timeout_s
            while not self._req.Test():
                if time.monotonic() > deadline:
                    log.warning("a resize vote was left incomplete (ranks stopped apart)")
                    return  # freeing the communicator under a pending request would abort
                time.sleep(0.001)
            self._req = None
        self._comm.Free()


class MissingRanks(RuntimeError):
    """Some ranks never reached the resize point the others wait at."""


def wait_for_all(
    request: MPI.Request,
    comm: MPI.Intracomm,
    checkin: Path | None,
    point: str,
    timeout_s: float,
) -> None:
    """Complete ``request`` (a collective every rank should join), or name who never came.

    Tests ``request`` (spinning for 10 ms, then sleeping 1 ms between tests); after
    ``timeout_s`` seconds this rank leaves its mark in ``checkin`` (a directory every rank
    sees: the job's), waits 2 s for the marks of the other waiting ranks, and raises
    :class:`MissingRanks` naming the ranks without one: those that did not call
    ``resize_point()`` at this point (a call on some ranks only, or in a branch). Without a
    ``checkin`` directory it waits for ever.

    Raises
    ------
    MissingRanks
        After ``timeout_s`` seconds, on every rank that came.
    """
    t0 = time.monotonic()
    while not request.Test():
        waited = time.monotonic() - t0
        if waited > 0.01:
            time.sleep(0.001)
        if checkin is None or waited < timeout_s:
            continue
        checkin.mkdir(parents=True, exist_ok=True)
        (checkin / f"rank-{comm.rank}").write_text(point)
        time.sleep(2.0)
        if request.Test():
            return
        here = {
            int(p.name.split("-", 1)[1]) for p in checkin.glob("rank-*") if p.read_text() == point
        }
        missing = sorted(set(range(comm.size)) - here)
        raise MissingRanks(
            f"resize point {point}: rank(s) {missing} of {comm.size} did not reach it within "
            f"{timeout_s:g} s (ranks {sorted(here)} wait there); call ec.resize_point() on "
            "every rank, at the same place in each iteration"
        )


def warn_look_failed(last: tuple[int, str] | None, seq: int, exc: Exception) -> tuple[int, str]:
    """Warn that looking for order ``seq`` failed, unless ``last`` said the same already.

    Returns what to pass as ``last`` next time: a look repeated every 0.1 s (or at every
    resize point) warns once per order and reason, not once per look.
    """
    now = (seq, str(exc))
    if now != last:
        log.warning("looking for order %d failed: %s (said once until it changes)", seq, exc)
    return now


class OrderWatcher:
    """Rank 0's background thread: the next order, checked, ready for the ranks to take.

    Parameters
    ----------
    channel
        The job's channel (``next(seq)``, ``ack``, ``answer``).
    next_seq
        The order number to look for first.
    interval_s
        Seconds between two looks at the channel.
    check
        ``order -> reason or None``, run in the thread on an order before it is handed out
        (the added nodes' preflight check); a reason refuses the order (``refused``).
    grant
        ``order -> order``, run in the thread first on an expansion the job must ask Slurm
        for itself (:attr:`~ResizeOrder.needs_grant`: :func:`.grant.take_nodes`); it returns
        the order with the granted nodes, and an exception refuses the order with its text.
    """

    def __init__(
        self,
        channel: Any,
        next_seq: int,
        *,
        interval_s: float = 0.1,
        check: Callable[[ResizeOrder], str | None] | None = None,
        grant: Callable[[ResizeOrder], ResizeOrder] | None = None,
    ) -> None:
        self.channel = channel
        self.interval_s = interval_s
        self.check = check
        self.grant = grant
        self._seq = next_seq
        self._lock = threading.Lock()
        self._ready: ResizeOrder | None = None
        self._refused: list[tuple[ResizeOrder, str]] = []
        self._offers: list[Offer] = []
        self._seen_offers: set[int] = set()
        self._failed_look: tuple[int, str] | None = None  # (seq, why) last warned of
        self._outbox: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._wake = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="elastic-orders", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- the ranks' side
    def ready(self) -> ResizeOrder | None:
        """The checked order waiting to be followed, if any (cheap: no I/O)."""
        return self._ready

    def take_refused(self) -> list[tuple[ResizeOrder, str]]:
        """Orders the check refused since the last call, with the reason."""
        if not self._refused:
            return []
        with self._lock:
            out, self._refused = self._refused, []
        return out

    def take_offers(self) -> list[Offer]:
        """Offers that came since the last call."""
        if not self._offers:
            return []
        with self._lock:
            out, self._offers = self._offers, []
        return out

    def done_with(self, seq: int) -> None:
        """Order ``seq`` was followed (or dropped): look for ``seq + 1`` from now on."""
        with self._lock:
            if self._ready is not None and self._ready.seq <= seq:
                self._ready = None
            self._seq = max(self._seq, seq + 1)
        self._wake.set()

    def send(self, message: Callable[[], None]) -> None:
        """Run ``message`` (an acknowledgement, an answer) in the thread, in order."""
        self._outbox.put(message)
        self._wake.set()

    def close(self, timeout_s: float = 10.0) -> None:
        """Send what is queued (for up to ``timeout_s``), then stop the thread."""
        self._stop = True
        self._outbox.put(None)
        self._wake.set()
        self._thread.join(timeout_s)

    # ---------------------------------------------------------------- the thread
    def _flush(self) -> None:
        while True:
            try:
                message = self._outbox.get_nowait()
            except queue.Empty:
                return
            if message is None:
                continue
            try:
                message()
            except Exception:  # noqa: BLE001 - a lost message is logged, the job goes on
                log.exception("a message to the controller failed")

    def _look(self) -> None:
        with self._lock:
            seq, busy = self._seq, self._ready is not None
        if busy:
            return
        try:
            got = self.channel.next(seq)
        except Exception as exc:  # noqa: BLE001 - the job never stops for the controller
            self._failed_look = warn_look_failed(self._failed_look, seq, exc)
            return
        if isinstance(got, Offer):
            if got.number not in self._seen_offers:
                self._seen_offers.add(got.number)
                with self._lock:
                    self._offers.append(got)
            return
        if got is None or got.seq != seq:
            return
        why = None
        if got.needs_grant:
            try:
                if self.grant is None:
                    raise RuntimeError("this job cannot ask Slurm for nodes itself")
                got = self.grant(got)
            except Exception as exc:  # noqa: BLE001 - refused with the reason, the job goes on
                why = f"no nodes granted: {exc}"
        if why is None and self.check is not None:
            try:
                why = self.check(got)
            except Exception as exc:  # noqa: BLE001 - refused with the reason, the watcher lives
                log.warning("order %d: could not get ready to follow it: %s", seq, exc)
                why = f"could not get ready: {type(exc).__name__}: {exc}"
        with self._lock:
            if self._seq != seq:
                return
            if why:
                self._refused.append((got, why))
                self._seq = seq + 1
            else:
                self._ready = got

    def _run(self) -> None:
        while True:
            self._flush()
            if self._stop:
                self._flush()
                return
            self._look()
            self._wake.wait(self.interval_s)
            self._wake.clear()
