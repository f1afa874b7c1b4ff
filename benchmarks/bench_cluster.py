"""Multi-token in this process against the same sweep on a Dask cluster:
`python -m benchmarks.bench_cluster [--cluster local:2 | tcp://host:8786] [--runs 100]`.

Runs `experiments.run("multi-token", ds=…, runs=…)` warm (a small run first compiles) in
this process and on the cluster, alternating `--repeats` times, and prints the median wall
times, their ratio, this process's CPU time on the cluster (it should stay small: the workers
train and judge), and whether the tables came out the same bits. Needs attsvm[cluster].
"""

from __future__ import annotations

import argparse
import statistics
import time

from attsvm import cluster, experiments


def _timed(settings: dict):
    t, c = time.perf_counter(), time.process_time()
    res = experiments.run("multi-token", **settings)
    return res, time.perf_counter() - t, time.process_time() - c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", default="local:2")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--ds", default="4,6")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    s = dict(ds=tuple(int(d) for d in args.ds.split(",")), runs=args.runs)
    warm = dict(s, runs=2)
    experiments.run("multi-token", **warm)
    here, there, cpu, same = [], [], [], True
    with cluster.use(args.cluster) as remote:
        for _ in range(args.repeats):
            token = cluster.CLUSTER.set(None)  # this process, with the cluster kept up
            a, t, _ = _timed(s)
            cluster.CLUSTER.reset(token)
            here.append(t)
            if not there:
                experiments.run("multi-token", **warm)  # the workers compile
            b, t, c = _timed(s)
            there.append(t)
            cpu.append(c)
            same &= all(a.frames[k].to_csv() == b.frames[k].to_csv() for k in a.frames)
        workers = len(remote.checked)
    h, r = statistics.median(here), statistics.median(there)
    print(
        f"multi-token {s}: in process {h:.2f} s, on {args.cluster} ({workers} workers) "
        f"{r:.2f} s (ratio {r / h:.2f}); this process's CPU on the cluster "
        f"{statistics.median(cpu):.2f} s; same bits: {same}"
    )


if __name__ == "__main__":
    main()
