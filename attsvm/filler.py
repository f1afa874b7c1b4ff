"""The server's background filler: one low-priority process (`python -m attsvm fill`) that
computes the results store's missing entries (`attsvm.store.fill`), started, paused while a
visitor's page runs, and stopped by the server (`ui/results.py`). Process supervision, beside
the process tuning of `attsvm.runtime`; the store itself only reads and writes entries."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from .store import folder, names

log = logging.getLogger("attsvm.store")


ONE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


def background_command(root: Path | None = None) -> tuple[list, dict]:
    """The command line and environment of a background filler: `python -m attsvm fill`
    at the lowest priority, pinned to one core (`LOWER_PRIORITY`), on one CPU device with
    one XLA/BLAS thread, in local mode (a server's own work, not a
    visitor's), on the CPU backend (it leaves an accelerator to the visitors)."""
    env = dict(os.environ)
    env.update(
        ATTSVM_MODE="local",
        JAX_PLATFORMS="cpu",
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
        XLA_FLAGS=f"{env.get('XLA_FLAGS', '')} {ONE_THREAD_XLA}".strip(),
        ATTSVM_RESULTS=str(root or folder()),
    )
    pkg_parent = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (pkg_parent, env.get("PYTHONPATH")) if p)
    argv = [
        sys.executable,
        "-c",
        LOWER_PRIORITY,
        sys.executable,
        "-m",
        "attsvm",
        "fill",
        *fill_names(),
        "--cpu-devices",
        "1",
        "--quiet",
    ]
    return argv, env


# Run first in a fresh interpreter, which then becomes the filler (exec keeps all three):
# the lowest CPU priority, pinned to one core (so its JAX, BLAS and solver threads share
# it), and killed (SIGKILL: it ends a suspended filler too, and an entry is only ever renamed
# into place whole) when its parent thread, the server's, ends. Done here rather
# than in a preexec_fn: the server is multithreaded, and Python code between fork and exec
# can deadlock there.
LOWER_PRIORITY = """
import os, sys
os.nice(19)
try:
    os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
except (AttributeError, OSError):
    pass
try:
    import ctypes
    ctypes.CDLL(None).prctl(1, 9)
except (AttributeError, OSError):
    pass
os.execv(sys.argv[1], sys.argv[1:])
"""


class Filler:
    """One background filler process, started and awaited by its own thread (the thread
    lives as long as the process, so the process's parent-death signal fires only when
    the server exits)."""

    def __init__(self, root: Path | None = None):
        self.root = Path(root or folder())
        self.returncode: int | None = None
        self.pid: int | None = None
        self.started = threading.Event()
        self.thread = threading.Thread(target=self._run, name="attsvm-store-filler", daemon=True)
        self.thread.start()
        self.started.wait(10)

    def _run(self) -> None:
        argv, env = background_command(self.root)
        try:
            proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
        except OSError as exc:
            log.error("results store: could not start the filler: %s", exc)
            self.returncode = -1
            self.started.set()
            return
        self.pid = proc.pid
        self.started.set()
        self.returncode = proc.wait()

    @property
    def running(self) -> bool:
        return self.returncode is None

    def pause(self, paused: bool) -> None:
        """Suspend (SIGSTOP) or continue (SIGCONT) the filler process. A server suspends it
        while a visitor's page runs (`ui.results.page_running`): nice 19 leaves a core's
        time to the visitor but not the core itself, and on the 2-core machine a page's first
        run (compiling its program) took 4.6 s with the filler computing against 2.6 s
        without it. Its parent-death signal is SIGKILL (`LOWER_PRIORITY`), which also ends a
        suspended filler when the server dies."""
        if self.pid is not None and self.running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGSTOP if paused else signal.SIGCONT)

    def stop(self) -> None:
        """Stop the filler (its entry in progress is left to the next one)."""
        if self.pid is not None and self.running:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
                os.kill(self.pid, signal.SIGCONT)  # a suspended filler takes SIGTERM now
        self.thread.join(30)


def fill_names() -> tuple:
    """What a server fills in the background: `ATTSVM_FILL` is 1 (the default: every
    experiment, in `names()` order), 0 (nothing), or a comma-separated list of names."""
    text = os.environ.get("ATTSVM_FILL", "1").strip().lower()
    if text in ("0", "false", "no", "off", ""):
        return ()
    if text in ("1", "true", "yes", "on"):
        return names()
    wanted = {t.strip() for t in text.split(",")}
    return tuple(n for n in names() if n in wanted)


def fill_enabled() -> bool:
    """Whether this server fills the store in the background (`fill_names`)."""
    return bool(fill_names())


__all__ = [
    "LOWER_PRIORITY",
    "ONE_THREAD_XLA",
    "Filler",
    "background_command",
    "fill_enabled",
    "fill_names",
]
