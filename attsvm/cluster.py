"""Sweeps on a Dask cluster (or any `concurrent.futures.Executor`): every experiment's chunks
(GD batches through `experiments.core.stream`, SVM blocks through `experiments.core.
ordered_map`) run on its workers; this process draws the work, consumes it in order, stops
early and writes the results. docs/cluster.md says how to start workers and what to trust.

    with attsvm.cluster.use("tcp://scheduler:8786"):     # or a Client, "local:4", an Executor
        result = attsvm.experiments.run("multi-token", ds=(4, 6), runs=20)
    result.backend["cluster"]                              # which workers computed it

    dask worker tcp://scheduler:8786 --nthreads 1 --preload attsvm.cluster

With nothing in use, the experiments run exactly as without this module. A chunk's numbers
depend only on its problems, its inits and the chunk size, never on where it ran, provided
every worker runs the same library sources, jax/jaxlib, backend and CPU instruction set as
this process: `use` checks that of every worker when it connects and again of the worker
behind every result, and refuses a mismatch by the worker's name (`ClusterError`).

Tasks reach the scheduler as `pickle.loads` of opaque bytes (their unpickling on the worker
runs them, `_Task`) and their results come back as bytes: the scheduler never imports attsvm
or JAX, and Problem objects are not rebuilt there. Dask is optional (`pip install
attsvm[cluster]`); it is imported only when a cluster is used.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import platform
import re
import threading
import warnings
from collections import Counter
from concurrent.futures import Executor
from typing import Iterator

from .experiments.core import CLUSTER, in_order
from .store import sources_fingerprint

ENV = "ATTSVM_CLUSTER"
CONNECT_TIMEOUT_S = 30
# in flight per worker thread: one computing and one waiting, so that a worker never idles
# between tasks while the driver handles a result
PER_THREAD = 2


class ClusterError(RuntimeError):
    """The cluster cannot be used: unreachable, or a worker that would not give the same
    bits (other sources, jax/jaxlib, backend or instruction set)."""


# -- what must match for the same bits -----------------------------------------------------
_ISA = re.compile(r"^(sse\d\w*|ssse3|avx\w*|fma\w*|f16c|amx\w*|bmi\d|asimd\w*|sve\w*|neon)$")
_IDENTITY: dict | None = None


def identity() -> dict:
    """What a process must share with the driver for a chunk to come out with the same
    bits: the library's source fingerprint (the results store's), jax and jaxlib versions,
    JAX's backend, the machine and its SIMD instruction-set flags (XLA compiles for the
    host: an AVX machine without FMA rounds differently), and XLA's flags (less the host
    device count, which does not change a chunk's program). Starts JAX's backend."""
    global _IDENTITY
    if _IDENTITY is None:
        import jax
        import jaxlib

        flags = " ".join(
            sorted(
                f
                for f in os.environ.get("XLA_FLAGS", "").split()
                if "host_platform_device_count" not in f
            )
        )
        _IDENTITY = dict(
            sources=sources_fingerprint(),
            jax=jax.__version__,
            jaxlib=jaxlib.__version__,
            backend=jax.default_backend(),
            machine=platform.machine(),
            isa=" ".join(_isa_flags()),
            xla_flags=flags,
        )
    return _IDENTITY


def _isa_flags() -> list:
    try:
        with open("/proc/cpuinfo") as f:
            lines = [line for line in f if line.startswith(("flags", "Features"))]
    except OSError:
        return []
    words = lines[0].partition(":")[2].split() if lines else []
    return sorted({w for w in words if _ISA.match(w)})


def mismatch(worker: str, theirs: dict, ours: dict | None = None) -> str | None:
    """Why worker `worker` (its `identity()` `theirs`) would not give this process's bits,
    or None when it would."""
    ours = ours or identity()
    diff = [k for k in ours if theirs.get(k) != ours[k]]
    if not diff:
        return None
    parts = []
    for k in diff:
        a, b = str(theirs.get(k)), str(ours[k])
        if k == "isa":
            sa, sb = set(a.split()), set(b.split())
            a = "+" + " +".join(sorted(sa - sb)) if sa - sb else ""
            a += (" -" + " -".join(sorted(sb - sa))) if sb - sa else ""
            parts.append(f"CPU instruction set differs ({a.strip()})")
        else:
            parts.append(f"{k} {a[:16]!s} (here {b[:16]})")
    return (
        f"worker {worker} would not compute the same bits as this process: "
        + "; ".join(parts)
        + ". Start every worker from the same attsvm sources, jax and "
        "jaxlib on the same kind of CPU (docs/cluster.md)"
    )


# -- tasks as opaque bytes -----------------------------------------------------------------
class _Task:
    """fn(*args), pickled so that unpickling it on the worker runs it (`_run`): the
    scheduler sees `pickle.loads` and bytes."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return _run, (self.fn, self.args)


def _run(fn, args) -> bytes:
    """On the worker: (worker address, its identity, fn(*args)), pickled."""
    try:
        from distributed import get_worker

        where = get_worker().address
    except (ImportError, ValueError):
        where = f"{platform.node()}:{os.getpid()}"
    return pickle.dumps((where, identity(), fn(*args)), protocol=pickle.HIGHEST_PROTOCOL)


# -- the executor seam ---------------------------------------------------------------------
class Remote:
    """A Dask client or a `concurrent.futures.Executor` that runs the sweeps' tasks, with
    the tally of which worker computed how many (`workers`)."""

    def __init__(self, target, *, owned=()):
        self.target = target
        self.is_dask = not isinstance(target, Executor)
        self.owned = list(owned)  # what `close` stops (a LocalCluster, our Client)
        self.workers: Counter = Counter()
        self.checked: set = set()
        self.lock = threading.Lock()

    @property
    def address(self) -> str:
        if self.is_dask:
            return str(self.target.scheduler.address)
        return type(self.target).__name__

    def threads(self) -> int:
        """Worker threads now (Dask: summed over the workers, checking the new ones)."""
        if not self.is_dask:
            return max(1, int(getattr(self.target, "_max_workers", 0) or os.cpu_count() or 1))
        self.check()
        info = self.target.scheduler_info(n_workers=-1)["workers"]
        return max(1, sum(int(w.get("nthreads", 1)) for w in info.values()))

    def check(self) -> None:
        """Compare every worker not yet checked with this process (`mismatch`): the first
        that differs is refused by name. Waits for one worker at most `CONNECT_TIMEOUT_S`."""
        client = self.target
        try:
            client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
        except TimeoutError as exc:
            raise ClusterError(
                f"no worker joined the scheduler {self.address} in "
                f"{CONNECT_TIMEOUT_S} s: start one with `dask worker "
                f"{self.address} --nthreads 1 --preload attsvm.cluster`"
            ) from exc
        new = [w for w in client.scheduler_info(n_workers=-1)["workers"] if w not in self.checked]
        if not new:
            return
        blob = pickle.dumps(_Task(_describe, ()))
        answers = client.run(pickle.loads, blob, workers=new, on_error="return")
        ours = identity()
        for w in sorted(answers):
            got = answers[w]
            if isinstance(got, BaseException):
                raise ClusterError(
                    f"worker {w} could not run attsvm ({got!r}): is attsvm "
                    f"importable there (PYTHONPATH)?"
                )
            _, theirs, setup = pickle.loads(got)
            why = mismatch(w, theirs, ours)
            if why:
                raise ClusterError(why)
            if not setup["preloaded"]:
                raise ClusterError(
                    f"worker {w} was not started with `--preload attsvm.cluster`"
                    f" (one JAX device, one BLAS thread, the system allocator)"
                )
            self.checked.add(w)

    def submit(self, fn, *args):
        """Run fn(*args) there; `result` reads it."""
        if self.is_dask:
            blob = pickle.dumps(_Task(fn, args), protocol=pickle.HIGHEST_PROTOCOL)
            return self.target.submit(pickle.loads, blob, pure=False)
        return self.target.submit(_run, fn, args)

    def result(self, fut):
        """The value of a submitted task, after checking who computed it."""
        where, theirs, value = pickle.loads(fut.result())
        if where not in self.checked:
            why = mismatch(where, theirs)
            if why:
                raise ClusterError(why)
            self.checked.add(where)
        with self.lock:
            self.workers[where] += 1
        return value

    def stream(self, tasks: Iterator) -> Iterator[tuple]:
        """(key, fn(*args)) for the items (key, fn, args) of `tasks`, in order:
        `experiments.core.stream`'s chunks on the cluster (built there: problems rebuilt on
        the worker from their seeds where the experiment says how, judged there where it
        judges). `PER_THREAD` tasks per worker thread in flight, the next submitted before
        the caller gets an answer; those not yet read are cancelled when the caller stops.
        A task whose worker dies is rerun by Dask elsewhere, with the same bits."""
        for (key, _, _), out in in_order(
            tasks, lambda t: self.submit(t[1], *t[2]), PER_THREAD * self.threads(), self.result
        ):
            yield key, out

    def map(self, fn, items: list, progress) -> list:
        """[fn(*item) for item in items], each item a task (`experiments.core.ordered_map`
        on the cluster): `PER_THREAD` per worker thread in flight, results in item order."""
        out = []
        for _, value in self.stream((k, fn, item) for k, item in enumerate(items)):
            out.append(value)
            progress(len(out) / len(items), f"{len(out)}/{len(items)}")
        return out

    def record(self, since: Counter | None = None) -> dict:
        """What a result records about where it was computed: the scheduler, and the tasks
        each worker computed (since the tally `since`, a copy of `workers`)."""
        with self.lock:
            done = self.workers - (since or Counter())
        return dict(
            scheduler=self.address, workers=dict(sorted(done.items())), tasks=sum(done.values())
        )

    def close(self) -> None:
        for thing in reversed(self.owned):
            thing.close()


def _describe():
    """On a worker: whether the preload configured it, and what it reports."""
    return dict(preloaded=_PRELOADED)


def active() -> Remote | None:
    """The cluster the sweeps run on now (None: this process, as without this module)."""
    return CLUSTER.get()


def connect(target) -> Remote:
    """A `Remote` for `target`: a `distributed.Client`, a scheduler address ("tcp://host:
    8786", "tls://…"), "local:N" (a LocalCluster of N one-thread workers on 127.0.0.1,
    stopped by `Remote.close`) or a `concurrent.futures.Executor` (used as it is); Dask
    workers are checked (`Remote.check`)."""
    if isinstance(target, Remote):
        return target
    if isinstance(target, Executor):
        return Remote(target)
    try:
        from distributed import Client, LocalCluster
    except ImportError as exc:
        raise ClusterError("a cluster needs Dask: pip install 'attsvm[cluster]'") from exc
    owned = []
    if isinstance(target, str):
        text = target.strip()
        m = re.fullmatch(r"local:(\d+)", text)
        try:
            if m:
                n = int(m.group(1))
                if not 1 <= n <= 256:
                    raise ClusterError(f"`local:N` needs 1 <= N <= 256; got {text!r}")
                with warnings.catch_warnings():  # "port 8787 in use": another is fine
                    warnings.filterwarnings("ignore", "Port .* is already in use")
                    cluster = LocalCluster(
                        n_workers=n,
                        threads_per_worker=1,
                        processes=True,
                        host="127.0.0.1",
                        dashboard_address="127.0.0.1:0",  # a free local port: clusters may overlap
                        preload=["attsvm.cluster"],
                        silence_logs=40,
                    )
                owned.append(cluster)
                target = Client(cluster)
            elif re.fullmatch(r"(tcp|tls|ucx|inproc)://\S+", text):
                target = Client(text, timeout=CONNECT_TIMEOUT_S)
            else:
                raise ClusterError(
                    f"a cluster must be tcp://host:port, tls://host:port or local:N; got {text!r}"
                )
        except (OSError, TimeoutError) as exc:
            for thing in owned:
                thing.close()
            raise ClusterError(f"cannot reach the scheduler {text}: {exc}") from exc
        owned.append(target)
    elif not isinstance(target, Client):
        raise ClusterError(
            f"a cluster must be an address, a distributed.Client or a "
            f"concurrent.futures.Executor; got {type(target).__name__}"
        )
    remote = Remote(target, owned=owned)
    try:
        remote.check()
    except BaseException:
        remote.close()
        raise
    return remote


@contextlib.contextmanager
def use(target):
    """Run every sweep inside the block on `target` (see `connect`); what this opened
    (a LocalCluster, a Client for an address) is closed at the end. None: this process."""
    if target is None:
        yield None
        return
    remote = connect(target)
    token = CLUSTER.set(remote)
    try:
        yield remote
    finally:
        CLUSTER.reset(token)
        remote.close()


def from_env() -> str | None:
    """The cluster named by ATTSVM_CLUSTER, or None."""
    return os.environ.get(ENV, "").strip() or None


# -- the worker preload: `dask worker ADDR --nthreads 1 --preload attsvm.cluster` -----------
_PRELOADED = False


def setup_worker(cache_dir: str | None = None) -> None:
    """Configure this process as a worker, before JAX starts its backend: one JAX CPU
    device (the worker's thread runs one chunk at a time), one BLAS thread, glibc's own
    malloc thresholds (attsvm's kept heap would look like a leak to Dask's memory monitor,
    which pauses a worker at 80 % and kills it at 95 %), and JAX's compile cache in a
    node-local folder (ATTSVM_XLA_CACHE, else the system's temporary folder: compiled
    programs are trusted code, not to be shared through a network home)."""
    global _PRELOADED
    import tempfile

    from . import blas, runtime

    if cache_dir is None and not os.environ.get("ATTSVM_XLA_CACHE", "").strip():
        cache_dir = os.path.join(
            tempfile.gettempdir(), f"attsvm-xla-{os.getuid()}", runtime._cpu_fingerprint()
        )
    if cache_dir is not None:
        os.environ["ATTSVM_XLA_CACHE"] = cache_dir
    os.environ["ATTSVM_MALLOC"] = "system"
    runtime.configure(cores=1, allocator="system", helpers=0)
    blas.one_thread()
    _PRELOADED = True


def dask_setup(worker=None) -> None:
    """Dask's preload hook (`--preload attsvm.cluster`)."""
    setup_worker()
