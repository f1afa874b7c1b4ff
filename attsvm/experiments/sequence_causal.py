"""Sequence-to-sequence and causal attention (paper §7; docs/theory.md §2.9; no experiment of the
authors' repository covers it).

Every token of a sequence is a query (self-attention: z_ik = x_ik) with its own label; query
k attends to all tokens ("sequence") or to tokens t ≤ k ("causal"). GD on the summed
loss; α_ik = argmax_t of the final softmax of query k; the per-query Att-SVM keeps one
constraint block per (i, k):
    min ‖W‖  s.t.  (x_{i α_ik} − x_it)ᵀ W z_ik ≥ 1   for every allowed t ≠ α_ik.
We report corr(W(k), W^mm_α) over iterations (mean ± std over runs) and how often α = opt.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import fastsvm, limits
from ..config import norm_for
from ..metrics import correlation
from ..optimizers import AUTHORS_GRADIENT
from ..problems import (
    check_choice,
    check_subset,
    optimal_tokens,
    random_problem,
)
from .core import (
    NORM_OF,
    Experiment,
    Progress,
    Result,
    check_settings,
    fmt,
    gd_price,
    mean_std,
    no_progress,
    settings_dict,
    train_settings,
)

NAME = "sequence-causal"
TITLE = "Sequence-to-sequence and causal attention: GD against the per-query SVM"
PAPER = (
    "paper §7: the regularization path converges to the per-(sequence, query) Att-SVM "
    "in both the sequence-to-sequence and the causal setting (no experiment published)"
)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """n, T, d: problem size (n·T queries; d ≥ n·T keeps every selection feasible);
    modes: "sequence" and/or "causal"; attention: "self" or "cross"; param: "W" or "KQ";
    runs, steps, lr, record_every: GD; data_seed, seed: seeds."""

    n: int = 2
    T: int = 5
    d: int = 10
    modes: tuple = ("sequence", "causal")
    attention: str = "self"
    param: str = "W"
    runs: int = 50
    steps: int = 2000
    lr: float = 0.1
    record_every: int = 20
    data_seed: int = 0
    seed: int = 0

    def __post_init__(self):
        check_settings(self, n=(1, 16), T=(2, 16), d=(1, 64), runs=(1, 2000))
        object.__setattr__(self, "modes", check_subset("modes", self.modes, ("sequence", "causal")))
        check_choice("attention", self.attention, ("self", "cross"))
        check_choice("param", self.param, ("W", "KQ"))


def run(s: Settings = Settings(), *, progress: Progress = no_progress) -> Result:
    """The experiment for each query mode in order (data, GD, per-query SVMs, correlation
    curves); long because it reads in that order."""
    norm = norm_for(s.param)
    curves, runs_rows = [], []
    for j, mode in enumerate(s.modes):
        base, share = j / len(s.modes), 1 / len(s.modes)
        probs = [
            random_problem(s.n, s.T, s.d, seed=s.data_seed + r, attention=s.attention, queries=mode)
            for r in range(s.runs)
        ]
        tr = train_settings(
            probs, s, progress=progress, at=(base, 0.85 * share, mode), **AUTHORS_GRADIENT
        )  # the official code's loop: the reference
        alphas = list(tr["probs"][:, -1].argmax(-1))  # (n, T) per run
        progress(base + 0.9 * share, f"{mode}: per-query SVMs")
        sols = fastsvm.solve_many(probs, alphas, norm)
        for r, p in enumerate(probs):
            try:
                opt = optimal_tokens(p)
            except ValueError:
                opt = None
            Wm = sols["W"][r]
            c = correlation(tr["W"][r], Wm) if Wm is not None else np.full(len(tr["steps"]), np.nan)
            curves.append(pd.DataFrame(dict(mode=mode, run=r, step=tr["steps"], corr=c)))
            runs_rows.append(
                dict(
                    mode=mode,
                    run=r,
                    feasible=Wm is not None,
                    is_global=opt is not None and bool(np.array_equal(alphas[r], opt)),
                    share_opt=float(np.mean(alphas[r] == opt)) if opt is not None else np.nan,
                    final_corr=float(c[-1]),
                    final_softmax=float(tr["probs"][r, -1].max(-1).mean()),
                )
            )
    long = pd.concat(curves, ignore_index=True)
    curve = mean_std(long.dropna(subset=["corr"]), ["mode", "step"], "corr")
    runs_df = pd.DataFrame(runs_rows)
    parts = []
    for mode in s.modes:
        g = runs_df[runs_df["mode"] == mode]
        parts.append(
            f"{mode}: final corr(W, W^mm_α) mean {fmt(g.final_corr.mean(), 4)} "
            f"(min {fmt(g.final_corr.min(), 3)}), α = opt for {fmt(100 * g.is_global.mean(), 3)} % "
            f"of runs ({fmt(100 * g.share_opt.mean(), 3)} % of queries), feasible "
            f"{int(g.feasible.sum())}/{len(g)}"
        )
    summary = {
        "paper": PAPER,
        "text": "; ".join(parts),
        "rows": [
            dict(mode=m, ours_final_corr=float(runs_df[runs_df["mode"] == m].final_corr.mean()))
            for m in s.modes
        ],
    }
    return Result(
        name=NAME,
        frames={"curves": curve, "runs": runs_df},
        summary=summary,
        settings=settings_dict(s),
    )


# -- the record: what the registry, CLI, store, budget and Reproduce page read --------
def price(s: Settings) -> tuple:
    """(items, floats, sizes) of a run with `s` (`budget.Price`), from `run`'s loop sizes."""
    items, floats = [], 0
    for mode in s.modes:
        (what, w), f = gd_price(
            f"{mode}: GD",
            n=s.n,
            T=s.T,
            d=s.d,
            steps=s.steps,
            runs=s.runs,
            param=s.param,
            queries=mode,
            record_every=s.record_every,
        )
        items.append((what, w))
        floats = max(floats, f)
        items.append(
            (
                f"{mode}: {s.runs} per-query SVMs",
                limits.bulk_svm_work(
                    n=s.n, T=s.T, d=s.d, norm=NORM_OF[s.param], queries=mode, solves=s.runs
                ),
            )
        )
    return (
        items,
        floats,
        dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=s.runs, solves=s.runs * len(s.modes)),
    )


RECORD = Experiment(
    name=NAME,
    title=TITLE,
    paper=PAPER,
    Settings=Settings,
    run=run,
    price=price,
    chart="attsvm_charts.experiments:sequence_causal",
    tiny=dict(runs=3, steps=200),
)
