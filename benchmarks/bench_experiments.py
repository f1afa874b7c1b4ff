"""Benchmark of the paper's experiments: `python -m benchmarks.bench_experiments` (a script).

Each experiment runs at its default (the paper's) settings: once cold (tracing and XLA
compilation included) and `--repeats` times warm; the median warm wall time (and the CPU
time of the process, which shows the work when the machine is shared) is printed with the
time of the same workload done the slow way, as the authors' code does it: the per-step numpy
loop of `benchmarks.bench` (`numpy_gd`, one run at a time, manual gradients) for every GD run-step,
plus one Clarabel solve (`solve_att_svm`) per SVM. That baseline is measured on a few runs /
solves of each shape and extrapolated linearly (every run of a shape costs the same).
"""

from __future__ import annotations

import argparse
import statistics
import time

from attsvm import experiments, problems
from attsvm.__main__ import add_cpu_devices_option, use_cpu_cores
from attsvm.svm import solve_att_svm
from attsvm.training import backend, default_init

try:  # the core benchmark's per-step loop, when present
    from .bench import numpy_gd
except ImportError:  # pragma: no cover
    numpy_gd = None


def workload(res) -> dict:
    """GD run-steps per (n, T, d) and SVM solves per (n, T, d, norm) of a result."""
    s, f, name = res.settings, res.frames, res.name
    gd, svm = {}, {}

    def add(table, key, value):
        table[key] = table.get(key, 0) + value

    if name.startswith("geometry"):
        add(gd, (2, 3 if name == "geometry-1" else 5, 2), 2 * s["steps"])
        for norm in ("fro", "nuc"):
            add(svm, (2, 3 if name == "geometry-1" else 5, 2, norm), 1)
    elif name == "local-convergence":
        shape = (s["n"], s["T"], s["d"])
        add(gd, shape, s["runs"] * len(s["params"]) * s["steps"])
        for norm in ("fro", "nuc"):
            add(svm, shape + (norm,), s["runs"] * len(s["params"]))
    elif name == "multi-token":
        for r in f["counts"].itertuples():
            add(gd, (s["n"], s["T"], r.d), (r.seeds_tried - r.all_plus) * s["steps"])
            add(svm, (s["n"], s["T"], r.d, "fro"), 3 * r.accepted)  # W^dir, W^fin, one-token
    elif name == "svm-rank":
        for r in f["cells"].itertuples():
            add(svm, (r.n, r.T, r.d, r.norm), r.drawn if r.norm == "fro" else r.instances)
    elif name == "overparameterization":
        for d in s["ds"]:
            add(gd, (s["n"], s["T"], d), s["runs"] * s["steps"])
            add(svm, (s["n"], s["T"], d, "fro"), 2 * s["runs"])
    return dict(gd=gd, svm=svm)


def _per_step(shape, steps: int = 200) -> float:
    """Seconds per GD step of the numpy loop at (n, T, d) (linear head; a proxy for others)."""
    n, T, d = shape
    p = problems.random_problem(n, T, d, seed=0)
    t = time.perf_counter()
    numpy_gd(p, default_init(p, "W"), "W", steps=steps, lr=0.1)
    return (time.perf_counter() - t) / steps


def _per_solve(key, count: int = 3) -> float:
    n, T, d, norm = key
    ts = []
    for seed in range(count + 1):
        p = problems.random_problem(n, T, d, seed=seed)
        t = time.perf_counter()
        solve_att_svm(p, problems.token_scores(p).argmax(-1), norm)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts[1:])  # the first includes cvxpy's compilation


def baseline(load: dict) -> float | None:
    if numpy_gd is None:
        return None
    gd = sum(steps * _per_step(shape) for shape, steps in load["gd"].items())
    return gd + sum(k * _per_solve(key) for key, k in load["svm"].items())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.bench_experiments")
    ap.add_argument("names", nargs="*", default=list(experiments.EXPERIMENTS))
    ap.add_argument("--repeats", type=int, default=3, help="warm runs per experiment")
    ap.add_argument("--no-baseline", action="store_true")
    add_cpu_devices_option(ap)
    args = ap.parse_args(argv)
    use_cpu_cores(args.cpu_devices)
    print(f"backend: {backend()}")
    print(
        f"{'experiment':<22} {'cold s':>8} {'warm median s':>14} {'cpu s':>7} {'warm runs':>10} "
        f"{'loop baseline s':>16} {'speed-up':>9}"
    )
    for name in args.names:
        t = time.perf_counter()
        res = experiments.run(name)
        cold = time.perf_counter() - t
        warm, cpu = [], []
        for _ in range(args.repeats):
            t, c = time.perf_counter(), time.process_time()
            res = experiments.run(name)
            warm.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        med = statistics.median(warm) if warm else cold
        med_cpu = statistics.median(cpu) if cpu else float("nan")
        base = None if args.no_baseline else baseline(workload(res))
        ratio = f"{base / med:8.0f}x" if base else "      n/a"
        base_s = f"{base:16.1f}" if base else f"{'n/a':>16}"
        print(
            f"{name:<22} {cold:8.2f} {med:14.2f} {med_cpu:7.1f} {len(warm):10d} {base_s} {ratio}",
            flush=True,
        )
        print(f"    {res.summary['text'][:160]}", flush=True)


if __name__ == "__main__":
    main()
