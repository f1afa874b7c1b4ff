"""Where the time of one head's audit goes (docs/pretrained.md): the forward pass, then per
head the selections and constraints, the span's coordinates, ‖P_S W_h‖, the Att-SVM, and the
baselines (the layer's other heads and random matrices against the same span; the shuffled
selections' own SVM and span). Prints seconds per phase; run by hand:

    python benchmarks/pretrained_audit.py --sentences 6 --heads 0,2 1,8 3,3
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from attsvm import audit, pretrained


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sentences", type=int, default=6)
    ap.add_argument("--heads", nargs="+", default=["0,2", "1,8", "3,3"])
    args = ap.parse_args()
    model = pretrained.load()
    sentences = pretrained.corpus(args.sentences)
    t = time.perf_counter()
    enc = model.encode(sentences)
    print(f"{args.sentences} sentences: forward pass {time.perf_counter() - t:.2f} s")
    for spec in args.heads:
        l, h = (int(x) for x in spec.split(","))
        keys = enc.inputs[l]
        qs = [pretrained.queries_of(x) for x in keys]
        W = model.head_matrix(l, h)
        clock = {}
        t = time.perf_counter()
        alpha, _ = audit.select([a[h] for a in enc.attention[l]])
        cons = audit.assemble(keys, qs, alpha)
        clock["constraints"] = time.perf_counter() - t
        t = time.perf_counter()
        span = audit.Span(cons, by_sequence=True)
        clock["span coordinates"] = time.perf_counter() - t
        t = time.perf_counter()
        span.norm(W)
        clock["‖P_S W_h‖"] = time.perf_counter() - t
        t = time.perf_counter()
        sol = audit.solve(cons)
        clock[f"Att-SVM ({sol.solver})"] = time.perf_counter() - t
        t = time.perf_counter()
        for g in range(model.config.heads):
            if g != h:
                span.norm(model.head_matrix(l, g))
        clock["11 other heads' spans"] = time.perf_counter() - t
        t = time.perf_counter()
        rng = np.random.default_rng(0)
        b = [a.copy() for a in alpha]
        for a in b:
            for q in np.flatnonzero(a >= 0):
                s = int(rng.integers(a.size - 1))
                a[q] = s + (s >= a[q])
        c2 = audit.assemble(keys, qs, b)
        audit.solve(c2)
        audit.Span(c2, by_sequence=True).norm(W)
        clock["shuffled: SVM + span"] = time.perf_counter() - t
        parts = ", ".join(f"{k} {v:.2f}" for k, v in clock.items())
        print(f"L{l}H{h}: {cons.m} constraints, span {span.N} coordinates: {parts} (s)", flush=True)


if __name__ == "__main__":
    main()
