"""Benchmark: `python -m benchmarks.bench` (a script, not a test).

1. Gradient descent on the paper's local-convergence workload (docs/theory.md §4 E2): 100 runs ×
   2000 normalized-GD steps, n=6, T=8, d=10, linear head, logistic loss, η = 0.1, every
   step recorded (W, softmax, loss), for both parameterizations. `train_batch` is timed cold
   (first call in this process: tracing + XLA compilation + run) and warm (median of
   repeats), against a plain per-run, per-step numpy loop written below with manual
   gradients. The loop is timed run by run on a subset of runs (all their steps); the
   median run times the number of runs stands for the full workload (every run costs the
   same: same sizes, same step count). Times are wall clock and this process's CPU time.
   The default (exact, centred) gradient is timed against the authors' (plain autodiff,
   ‖∇L‖ + 2⁻⁵²) in interleaved pairs. Then where the engine's time goes: the same call
   recording every 10th step (the loop too), the GD arithmetic alone (two records), and
   `records_only`, a program that only writes records of the same shapes, the floor under
   any engine returning that history.
2. Recompilation: a new step size and a problem size in the same padding bucket must reuse
   the compiled program (`attsvm.engine.compile_count()` stays put).
3. SVM solves (Clarabel): Frobenius and nuclear Att-SVM at (n, T, d) = (6, 8, 10),
   (10, 10, 20), (20, 16, 32): the first solve of a shape (includes cvxpy's compilation)
   and the median over further instances of that shape.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from attsvm import problems, runtime
from attsvm.batching import bucket
from attsvm.engine import compile_count
from attsvm.optimizers import AUTHORS_GRADIENT, DEFAULT_EPS
from attsvm.svm import solve_att_svm
from attsvm.training import RIDGE_EPS, backend, default_init, train, train_batch


# -- the reference: a plain numpy loop, one run at a time, one step at a time ---------------------
def numpy_gd(
    prob,
    init,
    param: str,
    *,
    steps: int,
    lr: float,
    ridge: float = RIDGE_EPS,
    record_every: int = 1,
):
    """Normalized GD on one problem (linear head, logistic loss), recording after steps
    0, r, 2r, …, `steps` (r = `record_every`, which must divide `steps`).

    Manual gradients: with a_it = x_itᵀ W z_i, s_i = softmax(a_i), f_i = Σ_t s_it vᵀx_it,
        ∂L/∂a_it = ℓ'(Y_i f_i) Y_i s_it (vᵀx_it − f_i) / n,   ∂L/∂W = Σ_i X_iᵀ(∂L/∂a_i) z_iᵀ,
    and for W = K Qᵀ with the ridge ε(‖K‖² + ‖Q‖²): ∇K = ∇W·Q + 2εK, ∇Q = ∇Wᵀ·K + 2εQ.
    Returns W (k, d, d), s (k, n, T), loss (k,) with k = steps / r + 1 records.
    """
    X, Y, Z, v = prob.X, prob.Y, prob.Z, prob.v
    n, T, d = X.shape
    h = X @ v  # (n, T) vᵀ x_it
    k_rec = steps // record_every + 1
    Ws, S, L = np.empty((k_rec, d, d)), np.empty((k_rec, n, T)), np.empty(k_rec)
    if param == "W":
        W = np.array(init, dtype=float)
    else:
        K, Q = (np.array(a, dtype=float) for a in init)
    for k in range(steps + 1):
        if param == "KQ":
            W = K @ Q.T
        a = np.einsum("ntd,nd->nt", X, Z @ W.T)  # (n, T) logits
        a -= a.max(1, keepdims=True)
        s = np.exp(a)
        s /= s.sum(1, keepdims=True)
        f = (s * h).sum(1)
        u = Y * f
        if k % record_every == 0:
            j = k // record_every
            Ws[j], S[j], L[j] = W, s, np.logaddexp(0.0, -u).mean()
        if k == steps:
            break
        g = (-Y / (1.0 + np.exp(u)) / n)[:, None] * s * (h - f[:, None])  # ∂L/∂a
        G = np.einsum("nt,ntd->nd", g, X).T @ Z  # (d, d) ∂L/∂W
        if param == "W":
            W = W - lr * G / (np.linalg.norm(G) + DEFAULT_EPS["linear"])
        else:
            gK = G @ Q + 2 * ridge * K
            gQ = G.T @ K + 2 * ridge * Q
            K = K - lr * gK / (np.linalg.norm(gK) + DEFAULT_EPS["linear"])
            Q = Q - lr * gQ / (np.linalg.norm(gQ) + DEFAULT_EPS["linear"])
    return Ws, S, L


# -- timing helpers ------------------------------------------------------------------------------
def _timed(fn):
    """(wall seconds, CPU seconds of this process, result). On a shared machine the CPU time
    is the steadier measure; the numpy loop is single-threaded, so for it the two agree."""
    t, c = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t, time.process_time() - c, out


def _median_time(fn, repeats: int):
    walls, cpus = zip(*(_timed(fn)[:2] for _ in range(repeats)), strict=True)
    return statistics.median(walls), statistics.median(cpus), walls


_HUGEPAGE_HINT = (
    "; 4 KiB pages: XLA's buffers get no transparent huge pages here — "
    "GLIBC_TUNABLES=glibc.malloc.hugetlb=1 lets glibc ask for them"
)


def _minor_faults() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def records_only(B: int, k: int, d: int, n: int, T: int):
    """A jitted program that writes records of the engine's shapes and layout — W (d, d),
    softmax (n, T), loss, ‖∇‖ for B runs at k records — but does no GD: each record is the
    previous one plus 1. Its run time is what producing the output costs on this machine,
    a floor under any engine that returns the same history."""
    from attsvm.model import jax

    @jax.jit
    def write(W0, s0):
        def one(c, _):
            W, s = c
            return (W + 1.0, s + 1.0), (W, s, W[:, 0, 0], s[:, 0, 0])

        return jax.lax.scan(one, (W0, s0), None, length=k)[1]

    W0, s0 = np.zeros((B, d, d)), np.zeros((B, n, T))
    return lambda: [np.moveaxis(np.asarray(a), 1, 0) for a in write(W0, s0)]


def _loop_times(probs, inits, param, r, *, steps: int, loop_runs: int):
    """Each of the first `loop_runs` runs timed alone: (total wall, total CPU, and
    the full workload extrapolated from the median run, wall and CPU) — one slow
    moment of a shared machine then moves the estimate by one sample, not all."""
    t = [
        _timed(
            lambda b=b: numpy_gd(probs[b], inits[b], param, steps=steps, lr=0.1, record_every=r)
        )[:2]
        for b in range(loop_runs)
    ]
    walls, cpus = zip(*t, strict=True)
    return (
        sum(walls),
        sum(cpus),
        statistics.median(walls) * len(probs),
        statistics.median(cpus) * len(probs),
    )


def _bench_param(probs, param: str, *, steps: int, loop_runs: int, repeats: int, sparse: int):
    """`bench_gd`'s measurements for one parameterization: (the numbers by name, the
    authors' gradient's median CPU time)."""
    runs = len(probs)
    call = lambda r=1: train_batch(probs, param=param, steps=steps, lr=0.1, record_every=r)
    traces = compile_count()
    cold, cold_cpu, batch = _timed(call)
    # one program at most (none when this process compiled it already, e.g. under pytest)
    assert compile_count() - traces <= 1, f"one call compiled {compile_count() - traces}×"
    warm, warm_cpu, warm_all = _median_time(call, repeats)
    # the same call with the authors' gradient (plain autodiff softmax, ‖∇L‖ + 2⁻⁵²),
    # interleaved with the default so that a slow moment of the machine hits both
    authors = lambda: train_batch(probs, param=param, steps=steps, lr=0.1, **AUTHORS_GRADIENT)
    authors()
    pairs = [(_timed(call)[1], _timed(authors)[1]) for _ in range(repeats)]
    exact_cost = statistics.median(a / b for a, b in pairs)
    call(sparse), call(steps)  # compile the variants
    warm_sparse = _median_time(lambda: call(sparse), repeats)[0]
    warm_compute = _median_time(lambda: call(steps), repeats)[0]
    # the numpy loop on the first `loop_runs` runs, from the same initializations
    inits = [default_init(p, param, seed=0, index=b) for b, p in enumerate(probs)]
    loop = lambda r: _loop_times(probs, inits, param, r, steps=steps, loop_runs=loop_runs)
    loop_subset, loop_cpu, loop_full, loop_full_cpu = loop(1)
    loop_sparse = loop(sparse)[2]
    # same computation: the trajectories agree until the softmax tails reach rounding
    # level (about step 100 for K, Q and 800 for W on these data)
    n50 = min(50, steps)
    Ws, _, _ = numpy_gd(probs[0], inits[0], param, steps=n50, lr=0.1)
    agree = float(np.max(np.abs(Ws - batch.W[0, : n50 + 1])) / np.abs(Ws).max())
    write = records_only(runs, steps + 1, 10, 6, 8)
    write()
    faults = _minor_faults()
    floor = _median_time(write, repeats)[0]
    faults = (_minor_faults() - faults) / repeats
    result = dict(
        cold=cold,
        cold_cpu=cold_cpu,
        warm=warm,
        warm_cpu=warm_cpu,
        warm_all=warm_all,
        loop_subset=loop_subset,
        loop_full=loop_full,
        loop_full_cpu=loop_full_cpu,
        agree=agree,
        warm_sparse=warm_sparse,
        loop_sparse=loop_sparse,
        warm_compute=warm_compute,
        floor=floor,
        exact_cost=exact_cost,
        floor_faults=faults,
    )
    return result, statistics.median(b for _, b in pairs)


def _print_param(
    param: str, m: dict, authors_cpu: float, *, runs, steps, loop_runs, repeats, sparse
):
    """`bench_gd`'s lines for one parameterization, from its measurements `m`."""
    cold, cold_cpu, warm, warm_cpu, warm_all = (
        m[k] for k in ("cold", "cold_cpu", "warm", "warm_cpu", "warm_all")
    )
    loop_subset, loop_full, loop_full_cpu, loop_sparse = (
        m[k] for k in ("loop_subset", "loop_full", "loop_full_cpu", "loop_sparse")
    )
    agree, warm_sparse, warm_compute, floor, exact_cost, faults = (
        m[k]
        for k in ("agree", "warm_sparse", "warm_compute", "floor", "exact_cost", "floor_faults")
    )
    n50 = min(50, steps)
    print(
        f"  {param:2s}  train_batch cold (trace + compile + run): {cold:6.3f} s wall, "
        f"{cold_cpu:6.3f} s CPU"
    )
    print(
        f"      train_batch warm, median of {repeats}: {warm:6.3f} s wall "
        f"({', '.join(f'{x:.3f}' for x in warm_all)}), {warm_cpu:6.3f} s CPU"
    )
    print(
        f"      the exact default gradient costs {exact_cost:4.2f}× the authors' "
        f"(CPU, median of {repeats} interleaved pairs; "
        f"{authors_cpu:6.3f} s CPU with theirs)"
    )
    print(
        f"      numpy loop, {loop_runs} runs × {steps} steps timed: {loop_subset:6.3f} s "
        f"({loop_subset / (loop_runs * steps) * 1e6:5.1f} µs/step); median run × "
        f"{runs} runs: {loop_full:6.2f} s wall, {loop_full_cpu:6.2f} s CPU"
    )
    print(
        f"      speed-up over the loop: warm {loop_full / warm:5.1f}× wall, "
        f"{loop_full_cpu / warm_cpu:5.1f}× CPU; cold {loop_full / cold:4.1f}× wall   "
        f"(loop vs engine, steps 0-{n50} of run 0: max rel diff {agree:.1e})"
    )
    print(
        f"      where the time goes: recording every {sparse}th step {warm_sparse:6.3f} s "
        f"(loop {loop_sparse:5.2f} s, {loop_sparse / warm_sparse:5.1f}×); GD arithmetic "
        f"alone (2 records) {warm_compute:6.3f} s ({loop_full / warm_compute:5.1f}×)"
    )
    print(
        f"      floor: writing the same {runs}×{steps + 1} records with no GD at all "
        f"takes {floor:6.3f} s, so no engine returning this history beats "
        f"{loop_full / floor:5.1f}× here"
    )
    mb = runs * (steps + 1) * (100 + 48 + 2) * 8 / 2**20
    print(
        f"             ({mb:.0f} MB of float64 per call; {faults:,.0f} page faults per "
        f"call{_HUGEPAGE_HINT if faults > mb * 64 else ''})"
    )


def bench_gd(*, runs: int, steps: int, loop_runs: int, repeats: int) -> dict:
    """Engine vs numpy loop at record_every = 1 (the headline), then where the time goes:
    the same call recording every 10th step, the GD arithmetic alone (two records), and
    `records_only` (the output alone). The loop is also timed recording every 10th step.
    """
    probs = [problems.random_problem(6, 8, 10, seed=s) for s in range(runs)]
    out = {}
    sparse = 10 if steps % 10 == 0 else 1
    for param in ("W", "KQ"):
        out[param], authors_cpu = _bench_param(
            probs, param, steps=steps, loop_runs=loop_runs, repeats=repeats, sparse=sparse
        )
        _print_param(
            param,
            out[param],
            authors_cpu,
            runs=runs,
            steps=steps,
            loop_runs=loop_runs,
            repeats=repeats,
            sparse=sparse,
        )
    return out


def bench_recompile() -> dict:
    p = problems.random_problem(6, 8, 10, seed=0)
    kw = dict(steps=200, record_every=10)
    train(p, param="W", lr=0.1, **kw)
    before = compile_count()
    train(p, param="W", lr=0.05, **kw)  # new step size
    after_lr = compile_count()
    train(problems.random_problem(6, 7, 9, seed=1), param="W", lr=0.1, **kw)  # same bucket
    after_size = compile_count()
    train(p, param="W", lr=0.1, steps=400, record_every=20)  # same #records
    after_steps = compile_count()
    buckets = tuple(bucket(x) for x in (6, 7, 9))
    print(
        f"  compiled programs {before} → new lr 0.05: {after_lr} → (n,T,d) = (6,7,9) in bucket "
        f"{buckets}: {after_size} → 400 steps, same number of records: {after_steps}"
    )
    return dict(before=before, after_lr=after_lr, after_size=after_size, after_steps=after_steps)


def bench_svm(*, repeats: int) -> dict:
    out = {}
    for shape in ((6, 8, 10), (10, 10, 20), (20, 16, 32)):
        row = {}
        for norm in ("fro", "nuc"):
            first, _, sol = _timed(
                lambda: solve_att_svm(problems.random_problem(*shape, seed=0), norm=norm)
            )
            times = []
            for seed in range(1, repeats + 1):
                p = problems.random_problem(*shape, seed=seed)
                dt, _, s = _timed(lambda: solve_att_svm(p, norm=norm))
                times.append(dt)
                assert s.feasible, (shape, norm, s.status)
            row[norm] = dict(first=first, median=statistics.median(times), status=sol.status)
        out[shape] = row
        print(
            f"  (n,T,d)={shape!s:13s} fro: first {row['fro']['first']:6.3f} s, median "
            f"{row['fro']['median']:6.3f} s | nuc: first {row['nuc']['first']:6.3f} s, "
            f"median {row['nuc']['median']:6.3f} s   ({repeats} instances each)"
        )
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.bench", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument(
        "--loop-runs",
        type=int,
        default=10,
        help="runs of the numpy loop actually timed (then extrapolated)",
    )
    ap.add_argument("--repeats", type=int, default=5, help="warm repeats (median)")
    ap.add_argument("--svm-repeats", type=int, default=5)
    ap.add_argument("--skip-svm", action="store_true")
    args = ap.parse_args(argv)
    runtime.configure(compile_cache=False)  # as the CLI; compiles are timed cold
    info = backend()
    print(
        f"benchmarks.bench — JAX backend {info['platform']} ({info['device_kind']}, "
        f"{info['devices']} device(s)), float64={info['x64']}"
    )
    print(f"\n[1] GD: {args.runs} runs × {args.steps} steps, n=6, T=8, d=10, record_every=1")
    bench_gd(
        runs=args.runs,
        steps=args.steps,
        loop_runs=min(args.loop_runs, args.runs),
        repeats=args.repeats,
    )
    print("\n[2] recompilation (must not grow after the first call)")
    bench_recompile()
    if not args.skip_svm:
        print("\n[3] SVM solves (Clarabel), α = opt")
        bench_svm(repeats=args.svm_repeats)


if __name__ == "__main__":
    main()
