"""Benchmark: the engine against a per-run PyTorch loop written the way the authors' code
works (`python -m benchmarks.bench_torch`; a script, not a test; needs `pip install torch`).

The workload is `benchmarks.bench`'s: the paper's local-convergence setting (docs/theory.md
§4 E2; arXiv 2308.16898 §6), 100 runs × 2000 normalized-GD steps, n=6, T=8, d=10, linear
head, logistic loss, η = 0.1, every step recorded (W, softmax, loss), for W and for K Qᵀ
(m = d). The loop follows docs/theory.md §4 ("Common to all"): float64, W an
`nn.Linear(d, d, bias=False)` (W = weight.T), or K and Q two of them (W = K Qᵀ, with the
engine's vanishing ridge ε(‖K‖² + ‖Q‖²), ε = 2⁻⁵², so that both minimize one objective),
the loss averaged over n, `torch.optim.SGD` stepping on each parameter's gradient divided
by its ‖·‖_F + 2⁻⁵², one run at a time, each step's state copied out. It is timed run by
run on a few runs and the median run stands for each of the 100 (every run costs the
same). The engine is timed cold (its first call in this process for that
parameterization: tracing, compilation and the run) and warm (median of repeats), with
its exact default gradient and with the authors' gradient, from the same data and
initializations; the loop's first 50 steps are checked against the engine's (authors'
gradient) to rounding. docs/performance.md says how to read the numbers.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from attsvm import problems, runtime
from attsvm.engine import compile_count
from attsvm.optimizers import AUTHORS_GRADIENT
from attsvm.training import RIDGE_EPS, default_init, train_batch


def torch_run(prob, init, *, steps: int, lr: float = 0.1, param: str = "W"):
    """One run of normalized GD in the authors' style; returns W (k, d, d), s (k, n, T), L (k,)."""
    import torch

    dt = torch.float64
    X, Z = torch.tensor(prob.X, dtype=dt), torch.tensor(prob.Z, dtype=dt)
    Y, v = torch.tensor(prob.Y, dtype=dt), torch.tensor(prob.v, dtype=dt)
    d = prob.X.shape[2]
    parts = (init,) if param == "W" else tuple(init)
    lins = [torch.nn.Linear(d, np.asarray(a).shape[1], bias=False, dtype=dt) for a in parts]
    with torch.no_grad():
        for lin, a in zip(lins, parts, strict=True):
            lin.weight.copy_(torch.tensor(np.asarray(a).T, dtype=dt))
    opt = torch.optim.SGD([w for lin in lins for w in lin.parameters()], lr=lr)
    h = X @ v
    Ws, S, L = [], [], []
    for k in range(steps + 1):
        W = lins[0].weight.T if param == "W" else lins[0].weight.T @ lins[1].weight
        s = torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, Z), dim=1)
        loss = torch.nn.functional.softplus(-Y * (s * h).sum(1)).mean()
        Ws.append(W.detach().clone())
        S.append(s.detach().clone())
        L.append(loss.item())
        if k == steps:
            break
        opt.zero_grad()
        if param == "KQ":
            loss = loss + RIDGE_EPS * sum((lin.weight**2).sum() for lin in lins)
        loss.backward()
        with torch.no_grad():
            for lin in lins:
                g = lin.weight.grad
                g /= g.norm() + 2.0**-52
        opt.step()
    return torch.stack(Ws).numpy(), torch.stack(S).numpy(), np.array(L)


def _loop_time(probs, inits, param, *, steps, timed_runs):
    """The torch loop's time for the whole workload: the median of `timed_runs` runs, each
    timed alone, times the number of runs; and the runs' times."""
    torch_run(probs[0], inits[0], steps=20, param=param)  # warm torch up
    times = []
    for b in range(min(timed_runs, len(probs))):
        t = time.perf_counter()
        torch_run(probs[b], inits[b], steps=steps, param=param)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * len(probs), times


def _engine(probs, inits, param, *, steps, repeats, loop):
    """Cold and warm engine calls, against the loop's time `loop`; prints one line each."""
    for label, kw in (("exact default gradient", {}), ("authors' gradient", AUTHORS_GRADIENT)):

        def call(kw=kw):
            return train_batch(probs, param=param, steps=steps, lr=0.1, init=inits, **kw)

        traces = compile_count()
        t = time.perf_counter()
        call()  # cold: trace + compile
        cold = time.perf_counter() - t
        warm = []
        for _ in range(repeats):
            t = time.perf_counter()
            call()
            warm.append(time.perf_counter() - t)
        w = statistics.median(warm)
        print(
            f"  engine {param:2s}, {label}: cold {cold:.2f} s → {loop / cold:4.0f}×; warm "
            f"{w:.3f} s (median of {repeats}: {', '.join(f'{x:.3f}' for x in warm)}) → "
            f"{loop / w:4.0f}× the torch loop; programs compiled {compile_count() - traces}"
        )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_torch", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--torch-runs", type=int, default=5, help="loop runs actually timed")
    ap.add_argument("--repeats", type=int, default=5, help="warm engine repeats (median)")
    args = ap.parse_args(argv)
    runtime.configure(compile_cache=False)  # as the CLI; compiles are timed cold
    try:
        import torch
    except ImportError:
        raise SystemExit("needs PyTorch: pip install torch") from None
    torch.set_num_threads(1)  # tiny tensors: threads only add overhead
    probs = [problems.random_problem(6, 8, 10, seed=s) for s in range(args.runs)]
    print(
        f"benchmarks.bench_torch — torch {torch.__version__}; {args.runs} runs × "
        f"{args.steps} steps, n=6, T=8, d=10, every step recorded"
    )
    inits, loops, times = {}, {}, {}
    # the loops first: once JAX has run, its CPU threads would compete with torch
    for param in ("W", "KQ"):
        inits[param] = [default_init(p, param, seed=0, index=b) for b, p in enumerate(probs)]
        loops[param], times[param] = _loop_time(
            probs, inits[param], param, steps=args.steps, timed_runs=args.torch_runs
        )
    for param in ("W", "KQ"):
        W, _, _ = torch_run(probs[0], inits[param][0], steps=50, param=param)
        ref = train_batch(
            probs[:1], param=param, steps=50, lr=0.1, init=inits[param][:1], **AUTHORS_GRADIENT
        )
        agree = float(np.max(np.abs(W - ref.W[0])) / np.abs(W).max())
        print(
            f"  torch loop {param:2s}: median run {statistics.median(times[param]):.3f} s "
            f"({', '.join(f'{x:.3f}' for x in times[param])}); × {args.runs} runs: "
            f"{loops[param]:.1f} s   (vs the engine, steps 0-50 of run 0: max rel diff "
            f"{agree:.1e})"
        )
    for param in ("W", "KQ"):
        _engine(
            probs, inits[param], param, steps=args.steps, repeats=args.repeats, loop=loops[param]
        )


if __name__ == "__main__":
    main()
