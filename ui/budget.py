"""The hosted server's time rules: per-action deadlines, per-session compute allowance,
server-wide compute slots. Pure Python (threads, clocks); `ui.hosted` applies them inside
Streamlit. The numbers (seconds, slots) are the active mode's `attsvm.limits.Limits`.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from contextlib import contextmanager

from attsvm import limits as _limits
from attsvm.limits import BudgetError, Limits


class Cancelled(BudgetError):
    """Work stopped before it finished: `reason` is "deadline" or "cancelled"."""

    def __init__(self, message: str, *, reason: str):
        super().__init__(message)
        self.reason = reason


class Deadline:
    """Wall-clock allowance of one action; `check()` between chunks of work.

    Args:
        seconds: allowance (default: the mode's `action_seconds`).
        cancel: optional threading.Event; once set, `check()` raises Cancelled too.
    """

    def __init__(
        self,
        seconds: float | None = None,
        *,
        cancel: threading.Event | None = None,
        limits: Limits | None = None,
        clock=time.monotonic,
    ):
        L = limits or _limits.current()
        self.seconds = L.action_seconds if seconds is None else float(seconds)
        self.cancel = cancel
        self._clock = clock
        self.start = clock()

    @property
    def elapsed(self) -> float:
        return self._clock() - self.start

    @property
    def expired(self) -> bool:
        return self.elapsed > self.seconds

    def check(self) -> None:
        if self.cancel is not None and self.cancel.is_set():
            raise Cancelled("cancelled", reason="cancelled")
        if self.expired:
            raise Cancelled(
                f"stopped after {self.elapsed:.0f} s: one action may run at most "
                f"{self.seconds:.0f} s in {_limits.mode()} mode",
                reason="deadline",
            )


class SessionBudget:
    """Compute seconds one session spent over a rolling window (hosted mode's fairness).

    `charge(s)` after work, `check()` before it: raises BudgetError with the wait once the
    session spent `session_seconds` within the last `session_window` seconds.
    """

    def __init__(self, limits: Limits | None = None, *, clock=time.monotonic):
        self.limits = limits or _limits.current()
        self._clock = clock
        self._spent: deque = deque(maxlen=4096)  # (time, seconds)
        self._lock = threading.Lock()

    def _trim(self, now: float) -> None:
        while self._spent and self._spent[0][0] < now - self.limits.session_window:
            self._spent.popleft()

    def spent(self) -> float:
        with self._lock:
            self._trim(self._clock())
            return sum(s for _, s in self._spent)

    def charge(self, seconds: float) -> None:
        if seconds > 0:
            with self._lock:
                self._spent.append((self._clock(), float(seconds)))

    def check(self) -> None:
        L = self.limits
        if not math.isfinite(L.session_seconds):
            return
        with self._lock:
            now = self._clock()
            self._trim(now)
            total = sum(s for _, s in self._spent)
            if total < L.session_seconds:
                return
            # Wait until enough old charges leave the window.
            acc, wait = total, 0.0
            for t, s in self._spent:
                acc -= s
                wait = t + L.session_window - now
                if acc < L.session_seconds:
                    break
        raise BudgetError(
            f"this session used {total:.0f} s of compute in the last "
            f"{L.session_window / 60:.0f} minutes, the most allowed in {L.mode} mode "
            f"({L.session_seconds:.0f} s); try again in {max(wait, 1):.0f} s"
        )


_slots: dict[int, threading.BoundedSemaphore] = {}
_slots_lock = threading.Lock()
_held = threading.local()


@contextmanager
def compute_slot(limits: Limits | None = None):
    """Hold one of the server's `max_concurrent` compute slots while the block runs.

    Re-entrant per thread (a cached function calling another holds one slot). Raises
    BudgetError when no slot frees up within `queue_seconds`. No-op when max_concurrent=0.
    """
    L = limits or _limits.current()
    if L.max_concurrent <= 0 or getattr(_held, "depth", 0) > 0:
        _held.depth = getattr(_held, "depth", 0) + 1
        try:
            yield
        finally:
            _held.depth -= 1
        return
    with _slots_lock:
        sem = _slots.setdefault(L.max_concurrent, threading.BoundedSemaphore(L.max_concurrent))
    if not sem.acquire(timeout=L.queue_seconds):
        raise BudgetError(
            f"the server is busy: every compute slot ({L.max_concurrent}) stayed "
            f"taken for {L.queue_seconds:.0f} s; try again in a minute"
        )
    _held.depth = 1
    try:
        yield
    finally:
        _held.depth = 0
        sem.release()
