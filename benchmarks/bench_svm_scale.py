"""Benchmark of the certified large-scale attention SVMs: `python -m benchmarks.bench_svm_scale`.

For each size (n, T, d), query mode and norm: a random problem (`random_problem`, seed 0,
α = opt), solved by `attsvm.pairsvm.solve_pairs` (the method "auto" picks, with the token form
of the constraints as `solve_att_svm` passes it), with its certificate (relative duality gap,
smallest margin); and by Clarabel (`solver="CLARABEL"`,
the reference) in the same run where its price (`limits.clarabel_work`) is under
`--clarabel-seconds`; `--products jax` runs the solvers' products on JAX's device (a GPU's
figures). Prints wall times (medians of `--repeats`), the ratio, both gaps and
the largest relative difference of W (Frobenius) or objective (nuclear). Numbers are of this
machine at the time of the run: on a shared machine read the ratios, measured in one run.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import numpy as np

from attsvm import limits, pairjax, pairsvm
from attsvm.problems import optimal_tokens, random_problem
from attsvm.svm import problem_pairs, problem_tokens

# (n, T, d, queries, norm): the acceptance sizes
SIZES = [
    (64, 64, 128, "single", "fro"),
    (256, 128, 256, "single", "fro"),
    (512, 256, 512, "single", "fro"),
    (32, 64, 128, "sequence", "fro"),
    (32, 32, 32, "single", "nuc"),
    (64, 64, 128, "single", "nuc"),
    (128, 64, 256, "single", "nuc"),
    (32, 32, 384, "single", "fro"),
    (32, 32, 384, "single", "nuc"),
]


def _timed(fn, repeats: int):
    times, out = [], None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), out


def bench_one(n, T, d, queries, norm, *, repeats=1, clarabel_seconds=120.0, products="auto"):
    prob = random_problem(n, T, d, seed=0, queries=queries)
    alpha = optimal_tokens(prob)
    D, Z, query, idx = problem_pairs(prob, alpha)
    tokens = problem_tokens(prob, alpha, idx)  # as `solve_att_svm` passes them
    t, sol = _timed(
        lambda: pairsvm.solve_pairs(D, Z, query, norm, tokens=tokens, products=products), repeats
    )
    where = pairjax.pick(products, m=len(D), d=d, d2=d, q=len(Z))
    row = dict(
        size=f"({n}, {T}, {d})",
        queries=queries,
        norm=norm,
        m=len(D),
        method=sol.solver if where == "numpy" else f"{sol.solver} (jax)",
        seconds=t,
        gap=sol.gap,
        min_margin=sol.min_margin,
        status=sol.status,
        clarabel=None,
        ratio=None,
        clarabel_gap=None,
        diff=None,
    )
    price = limits.seconds(limits.clarabel_work(n=n, T=T, d=d, norm=norm, queries=queries))
    if price <= clarabel_seconds:
        tc, ref = _timed(lambda: pairsvm.solve_pairs(D, Z, query, norm, solver="CLARABEL"), 1)
        row.update(clarabel=tc, ratio=tc / t, clarabel_gap=ref.gap)
        if ref.feasible and sol.feasible:
            row["diff"] = (
                np.linalg.norm(sol.W - ref.W) / np.linalg.norm(ref.W)
                if norm == "fro"
                else abs(sol.objective - ref.objective) / ref.objective
            )
    return row


def low_rank_pairs(T: int = 135, d: int = 384, rank: int = 103, seed: int = 0):
    """Constraints shaped like a layer-0 transformer head (docs/svm-solvers.md, Limits): T
    tokens of rank `rank` in R^d, queries [x_t; 1], each query selecting its previous token.
    Returns (D, Z, query)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, rank)) @ rng.standard_normal((rank, d)) / np.sqrt(rank)
    Z = np.concatenate([X, np.ones((T, 1))], axis=1)
    Ds, qs = [], []
    for t in range(1, T):
        s = np.delete(np.arange(T), t - 1)
        Ds.append(X[t - 1] - X[s])
        qs.append(np.full(s.size, t))
    return np.concatenate(Ds), Z, np.concatenate(qs)


def pretrained_pairs(layer: int = 0, head: int = 2, n_sentences: int = 100):
    """The audit's constraints for one head of the built-in pretrained model
    (`attsvm.pretrained`, all-MiniLM-L6-v2) on the first `n_sentences` of its corpus: keys
    x_s, queries [x_t; 1] (d = 384, d2 = 385), each kept query's selected token (τ = 0.5).
    Returns (D, Z, query)."""
    from attsvm import pretrained
    from attsvm.audit import assemble, select

    model = pretrained.load()
    enc = model.encode(pretrained.corpus(n_sentences), layers=layer + 1)
    keys = enc.inputs[layer]
    alpha, _ = select([A[head] for A in enc.attention[layer]], tau=0.5)
    c = assemble(keys, [pretrained.queries_of(x) for x in keys], alpha)
    return c.D, c.Z, c.query


def bench_pretrained(layer, head, n_sentences, solvers, *, repeats=1):
    """Rows (solver, m, seconds, gap, min margin) of one real head's Frobenius SVM."""
    D, Z, query = pretrained_pairs(layer, head, n_sentences)
    rows = []
    for solver in solvers:
        t, sol = _timed(lambda s=solver: pairsvm.solve_pairs(D, Z, query, "fro", solver=s), repeats)
        rows.append(
            dict(
                solver=solver,
                method=sol.solver,
                m=len(D),
                seconds=t,
                gap=sol.gap,
                min_margin=sol.min_margin,
                status=sol.status,
            )
        )
    return rows


def _fmt(x, spec):
    return "—" if x is None else format(x, spec)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument(
        "--clarabel-seconds",
        type=float,
        default=120.0,
        help="run Clarabel where its price is at most this many seconds",
    )
    ap.add_argument("--only", default="", help="norm ('fro' or 'nuc') to run alone")
    ap.add_argument(
        "--products",
        default="auto",
        choices=pairjax.PRODUCTS,
        help="where the solvers' products run (attsvm.pairjax; 'jax' on a GPU)",
    )
    ap.add_argument("--max-m", type=int, default=10**9, help="skip sizes with more constraints")
    ap.add_argument("--sizes", default="", help="only these sizes, e.g. '32x32x32,64x64x128'")
    ap.add_argument(
        "--pretrained",
        default="",
        help="instead: real heads 'L0H2,L1H8' of the pretrained model (audit)",
    )
    ap.add_argument("--sentences", type=int, default=100, help="sentences for --pretrained")
    ap.add_argument("--solvers", default="auto", help="solvers for --pretrained, '+'-joined")
    args = ap.parse_args(argv)
    if args.pretrained:
        _main_pretrained(args)
        return
    print(f"products: {args.products}; JAX's default backend: {jax.default_backend()}\n")
    print(
        "| size | queries | norm | m | method | time (s) | Clarabel (s) | ratio | gap | "
        "min margin − 1 | Clarabel gap | W / value diff |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for n, T, d, queries, norm in SIZES:
        if args.only and norm != args.only:
            continue
        if limits._constraints(n, T, queries) > args.max_m:
            continue
        if args.sizes and f"{n}x{T}x{d}" not in args.sizes.split(","):
            continue
        r = bench_one(
            n,
            T,
            d,
            queries,
            norm,
            repeats=args.repeats,
            clarabel_seconds=args.clarabel_seconds,
            products=args.products,
        )
        mm = None if r["min_margin"] is None else r["min_margin"] - 1
        print(
            f"| {r['size']} | {queries} | {norm} | {r['m']} | {r['method']} | "
            f"{r['seconds']:.3g} | {_fmt(r['clarabel'], '.3g')} | {_fmt(r['ratio'], '.0f')} | "
            f"{_fmt(r['gap'], '.1e')} | {_fmt(mm, '.1e')} | {_fmt(r['clarabel_gap'], '.1e')} | "
            f"{_fmt(r['diff'], '.1e')} |",
            flush=True,
        )


def _main_pretrained(args):
    print("| head | sentences | m | solver | method | time (s) | gap | min margin − 1 | status |")
    print("|---|---|---|---|---|---|---|---|---|")
    for tag in args.pretrained.split(","):
        layer, head = (int(v) for v in tag.strip().upper().lstrip("L").split("H"))
        for r in bench_pretrained(
            layer, head, args.sentences, args.solvers.split("+"), repeats=args.repeats
        ):
            mm = None if r["min_margin"] is None else r["min_margin"] - 1
            print(
                f"| {tag} | {args.sentences} | {r['m']} | {r['solver']} | {r['method']} | "
                f"{r['seconds']:.3g} | {_fmt(r['gap'], '.1e')} | {_fmt(mm, '.1e')} | "
                f"{r['status']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
