"""Benchmark: the engine against a per-run PyTorch loop written the way the authors' code
works (`python -m benchmarks.bench_torch`; a script, not a test; needs `pip install torch`).

The workload is `benchmarks.bench`'s: the paper's local-convergence setting (docs/theory.md
§4 E2), 100 runs × 2000 normalized-GD steps, n=6, T=8, d=10, linear head, logistic loss,
η = 0.1, every step recorded (W, softmax, loss). The loop follows ../shared/PAPER.md §4
("Common to all"): float64, W an `nn.Linear(d, d, bias=False)` (W = weight.T), the loss
averaged over n, `torch.optim.SGD` stepping on the gradient divided by ‖∇L‖ + 2⁻⁵², one run
at a time, each step's state copied out. It is timed run by run on a few runs and the median
run stands for each of the 100 (every run costs the same). The engine is timed warm (median
of repeats) with its exact default gradient and with the authors' gradient; both from the
same data and initializations, and the loop's first 50 steps are checked against the
engine's (authors' gradient) to rounding.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from attsvm import problems
from attsvm.optimizers import AUTHORS_GRADIENT
from attsvm.training import default_init, train_batch


def torch_run(prob, W0, *, steps: int, lr: float = 0.1):
    """One run of normalized GD in the authors' style; returns W (k, d, d), s (k, n, T), L (k,)."""
    import torch

    dt = torch.float64
    X, Z = torch.tensor(prob.X, dtype=dt), torch.tensor(prob.Z, dtype=dt)
    Y, v = torch.tensor(prob.Y, dtype=dt), torch.tensor(prob.v, dtype=dt)
    d = prob.X.shape[2]
    lin = torch.nn.Linear(d, d, bias=False, dtype=dt)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(np.asarray(W0).T, dtype=dt))
    opt = torch.optim.SGD(lin.parameters(), lr=lr)
    h = X @ v
    Ws, S, L = [], [], []
    for k in range(steps + 1):
        W = lin.weight.T
        s = torch.softmax(torch.einsum("ntd,de,ne->nt", X, W, Z), dim=1)
        loss = torch.nn.functional.softplus(-Y * (s * h).sum(1)).mean()
        Ws.append(W.detach().clone())
        S.append(s.detach().clone())
        L.append(loss.item())
        if k == steps:
            break
        opt.zero_grad()
        loss.backward()
        with torch.no_grad():
            g = lin.weight.grad
            g /= g.norm() + 2.0 ** -52
        opt.step()
    return torch.stack(Ws).numpy(), torch.stack(S).numpy(), np.array(L)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_torch",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--torch-runs", type=int, default=5, help="loop runs actually timed")
    ap.add_argument("--repeats", type=int, default=5, help="warm engine repeats (median)")
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        raise SystemExit("needs PyTorch: pip install torch") from None
    torch.set_num_threads(1)            # tiny tensors: threads only add overhead
    probs = [problems.random_problem(6, 8, 10, seed=s) for s in range(args.runs)]
    inits = [default_init(p, "W", seed=0, index=b) for b, p in enumerate(probs)]
    print(f"benchmarks.bench_torch — torch {torch.__version__}; {args.runs} runs × "
          f"{args.steps} steps, n=6, T=8, d=10, every step recorded")

    # the loop first: once JAX has run, its CPU thread pool would compete with torch
    torch_run(probs[0], inits[0], steps=20)                          # warm torch up
    times = []
    for b in range(min(args.torch_runs, args.runs)):
        t = time.perf_counter()
        torch_run(probs[b], inits[b], steps=args.steps)
        times.append(time.perf_counter() - t)
    loop = statistics.median(times) * args.runs
    W, _, _ = torch_run(probs[0], inits[0], steps=50)
    ref = train_batch(probs[:1], steps=50, lr=0.1, init=inits[:1], **AUTHORS_GRADIENT)
    agree = float(np.max(np.abs(W - ref.W[0])) / np.abs(W).max())
    print(f"  torch loop: median run {statistics.median(times):.3f} s "
          f"({', '.join(f'{x:.3f}' for x in times)}); × {args.runs} runs: {loop:.1f} s   "
          f"(vs the engine, steps 0-50 of run 0: max rel diff {agree:.1e})")

    for label, kw in (("exact default gradient", {}), ("authors' gradient", AUTHORS_GRADIENT)):
        def call(kw=kw):
            return train_batch(probs, steps=args.steps, lr=0.1, init=inits, **kw)
        call()                                                       # compile
        warm = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            call()
            warm.append(time.perf_counter() - t)
        w = statistics.median(warm)
        print(f"  engine, {label}: warm {w:.3f} s (median of {args.repeats}) → "
              f"{loop / w:5.0f}× the torch loop")


if __name__ == "__main__":
    main()
