"""What every experiment shares: its result record, progress reporting, settings checks and
the device sweep that runs many GD problems in fixed-size chunks.

Sweeps and devices: runs are cut into chunks of a fixed size (`chunk_size`, which depends on
the batch size and the platform, never on how many devices there are) and the chunks are
dealt round-robin to every device JAX sees (`stream`: one worker thread per device and one
more preparing the next chunk). The compiled program for a chunk is then the same whether
one device runs all chunks or four run a quarter each, so the numbers are bit-identical
across device counts (XLA's SPMD partitioner does not promise that: it re-optimizes the
program, and GD amplifies the last-bit differences).
"""

from __future__ import annotations

import contextvars
import itertools
import math
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Callable, Iterator

import numpy as np
import pandas as pd

from .. import limits
from ..model import jax
from ..problems import Problem, check_float, check_int, check_record_every
from ..training import default_init, train_batch
from ..trajectory import Trajectory

Progress = Callable[[float, str], None]
# runs per compiled call on CPU, at most (128): 128 beat 256 by 1.2–1.7× for the multi-token
# shapes (n=3, T=4, d=8, 10) and 64–150 were within 10 % for n=6, T=8, d ≤ 10 on
# the AVX-512 machine (microseconds per run-step; docs/performance.md)
CPU_CHUNK = limits.SWEEP_CHUNK
ACCEL_CHUNK = 8192  # … on a GPU/TPU


def no_progress(frac: float, text: str) -> None:
    """The default progress callback: does nothing."""


@dataclass(frozen=True)
class Result:
    """What an experiment returns.

    Attributes:
        name: the experiment's registry name ("local-convergence", …).
        frames: tidy DataFrames by name (one row per observation).
        summary: the statistics the paper reports, ours next to the paper's, plus "text" (a
            one-line summary) and "paper" (the paper's reference statistic, as text).
        settings: the settings used (plain values).
        notes: remarks (where the authors' own code differs, numerical caveats).
        seconds: wall-clock time of the run.
    """

    name: str
    frames: dict
    summary: dict
    settings: dict
    notes: tuple = ()
    seconds: float = 0.0
    backend: dict = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Experiment:
    """One experiment, as everything else reads it: the registry (`experiments.run`,
    `settings`, `price`), the command line, the results store, the hosted budget and the
    Reproduce page. Each experiment module exports its `RECORD` (or `RECORDS`).

    Attributes:
        name: the registry name ("local-convergence", …).
        title: a one-line title.
        paper: the paper's reference statistic, as text, with its arXiv id.
        Settings: the settings record (frozen dataclass; the defaults are the paper's).
        run: run(settings, *, progress) → Result.
        price: price(settings) → (items, floats, sizes): the work it does, priced by
            `attsvm.limits`' formulas from the same loop sizes as `run`
            (`experiments.budget.Price`).
        chart: "module:function" in attsvm_charts that draws a Result (Altair stays out of
            the library).
        tiny: settings overrides for a shrunken run (the contract test's smoke size).
        notes: where the authors' code differs, numerical caveats.
        helped: whether its Python-bound work pays for helper processes (`ordered_map`).
        followup: a follow-up paper's experiment (not part of `reproduce all`).
        fixed: settings this name fixes (geometry-1's preset).
    """

    name: str
    title: str
    paper: str
    Settings: type
    run: Callable
    price: Callable
    chart: str
    tiny: dict
    notes: tuple = ()
    helped: bool = False
    followup: bool = False
    fixed: dict = field(default_factory=dict)


NORM_OF = {"W": "fro", "KQ": "nuc"}  # the SVM norm GD on each parameterization reaches


def gd_price(
    what, *, n, T, d, steps, runs, param="W", queries="single", record_every=None, span=True
):
    """(what, work) of GD runs (NGD in `attsvm.engine`: priced in its span form where it
    takes it; span=False for another engine) and the floats one call records."""
    item = (
        what,
        limits.gd_work(
            n=n,
            T=T,
            d=d,
            steps=steps,
            runs=runs,
            param=param,
            queries=queries,
            record_every=record_every if span else None,
        ),
    )
    floats = 0
    if record_every is not None:
        floats = limits.record_floats(
            n=n, T=T, d=d, steps=steps, record_every=record_every, runs=runs, queries=queries
        )
    return item, floats


def settings_dict(s) -> dict:
    """Settings as JSON-ready plain values (tuples become lists)."""
    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(s).items()}


def check_settings(s, **ranges) -> None:
    """Validate the settings GD experiments share, where the record `s` has them: steps in
    [1, 100 000], lr in (0, 10], record_every (`check_record_every`), the seeds data_seed,
    first_seed and seed in [0, 2³¹]; and each integer setting `ranges` names (name=(lo, hi))."""
    for name, (lo, hi) in ranges.items():
        check_int(name, getattr(s, name), lo, hi)
    if hasattr(s, "steps"):
        check_int("steps", s.steps, 1, 100_000)
    if hasattr(s, "lr"):
        check_float("lr", s.lr, 0.0, 10.0, lo_open=True)
    if hasattr(s, "record_every"):
        check_record_every(s.record_every, s.steps)
    for name in ("data_seed", "first_seed", "seed"):
        if hasattr(s, name):
            check_int(name, getattr(s, name), 0, 2**31)


def check_grid(name: str, values, lo: int, hi: int) -> tuple:
    """A non-empty tuple of distinct integers in [lo, hi], sorted."""
    try:
        vals = tuple(sorted({check_int(name, v, lo, hi) for v in values}))
    except TypeError as exc:
        raise ValueError(
            f"`{name}` must be a list of integers in [{lo}, {hi}]; got {values!r}"
        ) from exc
    if not vals:
        raise ValueError(
            f"`{name}` must be a non-empty list of integers in [{lo}, {hi}]; got {values!r}"
        )
    return vals


def check_float_grid(name: str, values, lo: float, hi: float, *, lo_open: bool = False) -> tuple:
    """A non-empty tuple of distinct floats in [lo, hi] ((lo, hi] with lo_open), sorted."""
    span = f"{'(' if lo_open else '['}{lo:g}, {hi:g}]"
    try:
        vals = tuple(sorted({float(check_float(name, v, lo, hi, lo_open=lo_open)) for v in values}))
    except TypeError as exc:
        raise ValueError(f"`{name}` must be a list of numbers in {span}; got {values!r}") from exc
    if not vals:
        raise ValueError(f"`{name}` must be a non-empty list of numbers in {span}; got {values!r}")
    return vals


# -- the device sweep ---------------------------------------------------------------------------
def chunk_size(B: int) -> int:
    """Runs per compiled call: a function of the batch and platform only, never of the
    device count (ATTSVM_CHUNK overrides the cap, e.g. to test many chunks on several
    devices). Batches of 128 runs or more make an even number of equal chunks, at least two,
    so that two cores share them evenly (300 runs: 4 × 75, not 256 + 44 padded to 256)."""
    cap = CPU_CHUNK if jax.default_backend() == "cpu" else ACCEL_CHUNK
    cap = int(os.environ.get("ATTSVM_CHUNK", cap))
    if B < 128:
        return max(1, min(cap, B))
    n = -(-B // cap)
    n += n % 2
    return -(-B // n)


def sweep(
    probs: list[Problem],
    *,
    param: str = "W",
    seed: int = 0,
    indices=None,
    progress: Progress = no_progress,
    chunk: int | None = None,
    rebuild=None,
    **train_kw,
) -> Iterator[tuple[np.ndarray, Trajectory]]:
    """Run GD on many problems of one shape; yield (positions, batched Trajectory) per chunk,
    in order. Problem b starts from `default_init(…, seed=seed, index=indices[b])` (default
    index b), so its numbers depend neither on the chunking nor on the device count.

    train_kw: steps, lr, normalized, loss, record_every, m, ridge (see `attsvm.train_batch`).
    rebuild: on a cluster, `rebuild(positions)` = (module-level fn, args) whose call gives
    those problems on the worker (`stream`); without it the problems travel.
    """
    B = len(probs)
    if B == 0:
        return
    C = chunk or chunk_size(B)
    indices = range(B) if indices is None else indices
    if len(indices) != B:
        raise ValueError(f"`indices` must have one entry per problem ({B}); got {len(indices)}")

    chunks = (
        (np.arange(lo, min(lo + C, B)), probs[lo : lo + C], indices[lo : lo + C])
        for lo in range(0, B, C)
    )
    done = 0
    for idx, tr in stream(chunks, C, param=param, seed=seed, rebuild=rebuild, **train_kw):
        done += len(idx)
        progress(done / B, f"gradient descent: {done}/{B} runs")
        yield idx, tr


def stream(
    chunks: Iterator,
    size: int,
    *,
    param: str = "W",
    seed: int = 0,
    judge=None,
    rebuild=None,
    **train_kw,
) -> Iterator[tuple]:
    """GD on a stream of chunks of problems of one shape, each padded to `size` runs (one
    compiled program); yields (key, batched Trajectory) per chunk, in order, or (key,
    judge(problems, Trajectory)) with a (picklable) `judge`. On a cluster (`attsvm.cluster.
    use`) each chunk is a task there (`_on_cluster`: problems rebuilt from `rebuild(key)` =
    (module-level fn, args) where given, judged there). Without one, as follows.

    chunks: items (key, problems, indices), at most `size` problems each; problem b starts
    from `default_init(…, seed=seed, index=indices[b])` (drawn in a worker thread). Items
    are taken from `chunks` only as devices free up, so the stream may be long or endless
    (multi-token's candidate seeds) and reading an item (in this thread: multi-token draws
    its problems there) overlaps the devices' GD. Chunk k runs on device k mod D; D + 1
    chunks are under way at once (one a device, and one more being padded and given its
    inits, which starts on its device when ready), and the next is submitted
    before the caller handles the chunk it was given, so the devices wait neither for the
    caller nor for the Python work of a chunk: a caller that stops early wastes at most
    D + 1 chunks, and those still running finish in the background. train_kw: as
    `sweep`."""
    if CLUSTER.get() is not None:
        yield from _on_cluster(chunks, size, param, seed, judge, rebuild, train_kw)
        return
    m = train_kw.get("m")
    devices = jax.devices()
    depth = len(devices) + 1

    def job(k, ps, inds):
        ps, n = list(ps), len(ps)
        ins = [
            default_init(p, param, seed=seed, m=m, index=int(i))
            for p, i in zip(ps, inds, strict=True)
        ]
        ps += [ps[-1]] * (size - n)  # same shape for every chunk: one compile
        ins += [ins[-1]] * (size - n)
        tr = train_batch(
            ps, param=param, seed=seed, init=ins, devices=[devices[k % len(devices)]], **train_kw
        )
        return _slice(tr, n)

    pool = ThreadPoolExecutor(max_workers=depth)

    def submit(item):
        k, (_, ps, inds) = item
        return pool.submit(job, k, ps, inds)

    try:
        for (_, (key, ps, _)), tr in in_order(enumerate(chunks), submit, depth):
            yield key, (tr if judge is None else judge(ps, tr))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


def in_order(items, submit: Callable, depth: int, wait: Callable = lambda f: f.result()):
    """(item, wait(submit(item))) for each of `items`, in their order, with at most `depth`
    submitted and not yet read: the next is submitted before the caller gets an answer (the
    workers wait neither for the caller nor for each other), items are taken only as
    answers are read (a stream may be endless), and those not read are cancelled when the
    caller stops. `stream` and `attsvm.cluster.Remote.stream` run on it."""
    items = iter(items)
    pending: deque = deque()

    def fill():
        for item in itertools.islice(items, depth - len(pending)):
            pending.append((item, submit(item)))

    try:
        fill()
        while pending:
            item, fut = pending.popleft()
            out = wait(fut)
            fill()  # the freed worker's next item, before the caller's work
            yield item, out
    finally:
        for _, fut in pending:
            fut.cancel()


# The cluster the sweeps run on (an `attsvm.cluster.Remote`, set by `attsvm.cluster.use`);
# None: this process, as above.
CLUSTER: contextvars.ContextVar = contextvars.ContextVar("attsvm_cluster", default=None)


def _on_cluster(chunks, size, param, seed, judge, rebuild, train_kw):
    """`stream` on the cluster in use: each chunk a task (`_remote_chunk`), its problems
    rebuilt there from `rebuild(key)` where given, else sent."""
    tasks = (
        (
            key,
            _remote_chunk,
            (
                rebuild(key) if rebuild is not None else (_given, (list(ps),)),
                [int(i) for i in inds],
                size,
                param,
                seed,
                judge,
                train_kw,
            ),
        )
        for key, ps, inds in chunks
    )
    yield from CLUSTER.get().stream(tasks)


def _given(problems):
    return problems


def _remote_chunk(source, inds, size, param, seed, judge, train_kw):
    """On a cluster worker: one chunk of `stream`, as its local job (inits by index, padded
    to `size` runs, GD on this worker's first device), its problems from `source` = (fn,
    args), judged there where `judge` is given."""
    fn, args = source
    ps = list(fn(*args))
    n, m = len(ps), train_kw.get("m")
    ins = [
        default_init(p, param, seed=seed, m=m, index=int(i)) for p, i in zip(ps, inds, strict=True)
    ]
    tr = _slice(
        train_batch(
            ps + [ps[-1]] * (size - n),
            param=param,
            seed=seed,
            init=ins + [ins[-1]] * (size - n),
            devices=[jax.devices()[0]],
            **train_kw,
        ),
        n,
    )
    return tr if judge is None else list(judge(ps, tr))


# -- helper processes ----------------------------------------------------------------------
HELPERS = 0  # processes `ordered_map` may use beside this one (`use_helper_processes`)
_POOL: dict = {}  # the helpers' pool, by size: started once, kept for the process's life
_SETUP = None  # a module-level function each helper calls first (`use_helper_processes`)


def use_helper_processes(n: int | None, *, setup=None) -> int:
    """Let `ordered_map` run work in `n` helper processes beside the caller's (default: one
    per core but the caller's; 0: none, the default), and start them now: each spends ≈ 3 s
    importing attsvm, which then overlaps the caller's own start instead of its first
    `ordered_map`. The CLI calls it; the app does not (a hosted visitor's call stays in the
    server's process, within its price). `setup`: a module-level function each helper calls
    once started (`runtime.configure` passes its own tuning). Returns n."""
    global HELPERS, _SETUP
    HELPERS = max(0, int((os.cpu_count() or 1) - 1 if n is None else n))
    _SETUP = setup
    if HELPERS:
        _helpers()
    return HELPERS


def stop_helper_processes() -> None:
    """End the helpers now (the CLI, once its command is done): they hold nothing but their
    imports, and waiting at exit for each interpreter to wind down took ≈ 0.3 s more. A later
    `ordered_map` starts new ones."""
    for pool, _ in _POOL.values():
        workers = list((getattr(pool, "_processes", None) or {}).values())  # CPython's
        pool.shutdown(wait=False, cancel_futures=True)
        for w in workers:
            w.terminate()  # the pool's own thread reaps them
    _POOL.clear()


def _helper_init(setup=None) -> None:
    """A helper process: `setup` (the caller's process tuning), one BLAS thread, as
    `experiments.run` gives its caller; attsvm imported (the spawned process starts bare)."""
    if setup is not None:
        setup()
    from .. import blas, fastsvm, svm  # noqa: F401

    blas.one_thread()


def _helpers():
    """The pool of `HELPERS` spawned helper processes (spawned, not forked: JAX's threads
    do not survive a fork), with the futures that say when its workers are up; the workers
    start at once."""
    entry = _POOL.get(HELPERS)
    if entry is None:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        pool = ProcessPoolExecutor(
            HELPERS,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_helper_init,
            initargs=(_SETUP,),
        )
        # start every worker now: each imports attsvm before its first task
        entry = _POOL[HELPERS] = (pool, [pool.submit(int) for _ in range(HELPERS)])
    return entry


def ordered_map(fn, items: list, *, progress: Progress = no_progress) -> list:
    """[fn(*item) for item in items], the items shared between this process and `HELPERS`
    helper processes (fn must be a module-level function): this process takes them from the
    front, the helpers from the back, so neither waits for the other, and the results come
    back in item order. For work that is Python-bound (numpy on small matrices holds the
    GIL between calls, so threads would not share it): svm-rank's cells,
    over-parameterization's SVM blocks. The results do not depend on where an item ran
    (each helper keeps one BLAS thread, as this process does inside `experiments.run`); if
    a helper dies, this process computes what it left. On a cluster (`attsvm.cluster.use`)
    every item is a task there instead (`Remote.map`)."""
    items = list(items)
    remote = CLUSTER.get()
    if remote is not None and items:
        return remote.map(fn, items, progress)
    if HELPERS == 0 or len(items) < 2:
        out = [None] * len(items)
        for k, item in enumerate(items):
            out[k] = fn(*item)
            progress((k + 1) / len(items), f"{k + 1}/{len(items)}")
        return out
    from concurrent.futures.process import BrokenProcessPool

    todo = _UNDONE
    out = [todo] * len(items)
    try:
        _share(fn, items, out, _helpers(), progress)
    except BrokenProcessPool:  # a helper died (killed, out of memory): go on here
        _POOL.pop(HELPERS, None)
        for k, item in enumerate(items):
            if out[k] is todo:
                out[k] = fn(*item)
    return out


_UNDONE = object()


def ordered_concat(fn, items: list, *, progress: Progress = no_progress) -> list:
    """`ordered_map` of a function returning lists, the lists joined in item order (the
    experiments' blocks: cells of rows, blocks of runs)."""
    return [x for part in ordered_map(fn, items, progress=progress) for x in part]


def _share(fn, items, out, helpers, progress) -> None:
    """`ordered_map`'s loop: this process from the front of `items`, the pool of `helpers`
    from the back (at most two items in flight per helper, and none before its workers are
    up: a command's first items never wait for the helpers' import), each result into `out`
    at its item's place."""
    pool, started = helpers
    lo, hi, done = 0, len(items), 0
    inflight: dict = {}
    while lo < hi or inflight:
        up = all(f.done() for f in started)
        while up and lo < hi and len(inflight) < 2 * HELPERS:  # the helpers: from the back
            hi -= 1
            inflight[pool.submit(fn, *items[hi])] = hi
        for fut in [f for f in inflight if f.done()]:
            out[inflight.pop(fut)] = fut.result()
            done += 1
        if lo < hi:  # this process: from the front
            out[lo] = fn(*items[lo])
            lo += 1
            done += 1
        elif inflight:
            fut = next(iter(inflight))
            out[inflight.pop(fut)] = fut.result()
            done += 1
        progress(done / len(items), f"{done}/{len(items)}")


def _slice(tr: Trajectory, n: int) -> Trajectory:
    """The first n runs of a batched Trajectory (drops chunk padding)."""
    return tr if len(tr) == n else tr[:n]


def stage(progress: Progress, lo: float, span: float, label: str) -> Progress:
    """`progress` for one stage of an experiment: its fractions mapped onto [lo, lo + span],
    its texts prefixed with `label`."""
    return lambda f, t: progress(lo + span * f, f"{label}: {t}")


def train_settings(
    probs,
    s,
    *,
    progress: Progress,
    at: tuple,
    param: str | None = None,
    record_every: int | None = None,
    rebuild=None,
    **gradient,
) -> dict:
    """`train_all` with the GD settings of the record `s`: param (unless given), steps, lr,
    record_every (unless given) and the initialization seed; `gradient`: centred/eps (e.g.
    `optimizers.AUTHORS_GRADIENT`); its progress is the stage `at` = (lo, span, label) of
    `progress` (`stage`); `rebuild`: as `sweep`'s."""
    return train_all(
        probs,
        param=param or s.param,
        steps=s.steps,
        lr=s.lr,
        record_every=record_every or s.record_every,
        seed=s.seed,
        progress=stage(progress, *at),
        rebuild=rebuild,
        **gradient,
    )


def train_all(probs, **kw) -> dict:
    """`sweep` gathered into arrays: W (B, k, d, d), probs (B, k, …), steps (k,),
    overflow_at (B,)."""
    parts = list(sweep(probs, **kw))
    return dict(
        W=np.concatenate([t.W for _, t in parts]),
        probs=np.concatenate([t.probs for _, t in parts]),
        steps=parts[0][1].steps,
        overflow_at=np.concatenate([t.overflow_at for _, t in parts]),
    )


# -- statistics ----------------------------------------------------------------------------
def mean_std(df: pd.DataFrame, by: list, value: str) -> pd.DataFrame:
    """Mean, std and count of `value` grouped by `by` (tidy)."""
    g = df.groupby(by, sort=True)[value]
    out = g.agg(["mean", "std", "count"]).reset_index()
    out["std"] = out["std"].fillna(0.0)
    return out


def jsonable(x):
    """Plain JSON values (NaN/inf become null, numpy scalars Python ones)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, (np.floating, float)):
        return None if not math.isfinite(float(x)) else float(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.bool_):
        return bool(x)
    return x


def fmt(x, digits: int = 3) -> str:
    """A number for a summary line."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "n/a"
    return f"{x:.{digits}g}"
