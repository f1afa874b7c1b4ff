"""Rank from small initialization: the init scale α decides the rank of ΔW = K Qᵀ − K₀Q₀ᵀ
and which tokens GD selects (arXiv 2306.07042; docs/staircase.md §2).

For each α and each random instance (random_problem(n, T, d, seed), seeds data_seed, …),
plain GD (step η) on K, Q ∈ R^{d×d} from K₀, Q₀ = α·N(0, 1) (`training.scaled_init`):
the singular values of ΔW(k), the take-off step of each σ_j (`staircase.takeoff_steps`),
σ₂/σ₁ at `ratio_step`, ΔW's final numerical rank (σ_j > 1e-2·σ₁), and what the final
selection is (`studies.classify_runs`, nuclear-norm Att-SVM: global / local / neither).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import limits
from .. import staircase as sc
from ..problems import check_choice, check_int, random_problem
from .core import (
    Experiment,
    Progress,
    Result,
    check_float_grid,
    check_settings,
    fmt,
    no_progress,
    settings_dict,
)

NAME = "rank-staircase"
TITLE = "Rank from small init: ΔW = KQᵀ − K₀Q₀ᵀ gains rank one step at a time"
PAPER = (
    "From small initialization the difference between trained and initial weights gains rank "
    "step by step; proved for diagonal weights and α → 0 under gradient flow, with loss curves "
    "that collapse against t / log(1/α) (arXiv 2306.07042, abstract; no numbers for this model)"
)
NOTES = (
    "Plain GD on full (non-diagonal) K, Q with the logistic loss and a fixed linear head: the "
    "theorem's assumptions (diagonal weights, gradient flow, α → 0) do not hold here, so the "
    "staircase is observed, not implied.",
)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """n, T, d: instance size; alphas: init scales α; runs: instances per α; steps, lr,
    record_every: each GD run; init_kind: `training.INIT_KINDS`; ratio_step: where σ₂/σ₁ is
    reported; data_seed: first data seed; seed: the init seed."""

    n: int = 6
    T: int = 8
    d: int = 10
    alphas: tuple = (1e-6, 1e-4, 1e-2, 0.3, 1.0)
    runs: int = 12
    steps: int = 20_000
    lr: float = 0.5
    record_every: int = 50
    init_kind: str = "gaussian"
    ratio_step: int = 1000
    data_seed: int = 1000
    seed: int = 0

    def __post_init__(self):
        check_settings(self, n=(1, 32), T=(2, 32), d=(1, 32), runs=(1, 500))
        check_choice("init_kind", self.init_kind, ("gaussian", "diagonal", "aligned"))
        check_int("ratio_step", self.ratio_step, 0, 1_000_000)  # the last record at or before it
        object.__setattr__(
            self, "alphas", check_float_grid("alphas", self.alphas, 0.0, 10.0, lo_open=True)
        )


def _takeoffs(a: float, r, d: int) -> list[dict]:
    """Per singular value k ≤ 4 at init scale `a`: the share of runs whose σ_k took off and
    their median take-off step."""
    take = []
    for j in range(min(d, 4)):
        t = r.takeoff[:, j]
        take.append(
            dict(
                alpha=a,
                k=j + 1,
                taken_off=float(np.mean(~np.isnan(t))),
                median_step=float(np.nanmedian(t)) if (~np.isnan(t)).any() else np.nan,
            )
        )
    return take


def _by_alpha(runs_df: pd.DataFrame) -> pd.DataFrame:
    """Per init scale α: the share of runs reaching the global selection, the ratio σ₂/σ₁ at
    the ratio step (median, shares under `STAIR_RTOL` and above 0.3), median ranks and loss."""
    return (
        runs_df.groupby("alpha")
        .agg(
            share_global=("is_global", "mean"),
            median_ratio_at=("ratio_at", "median"),
            share_rank1_at=("ratio_at", lambda x: float(np.mean(x < sc.STAIR_RTOL))),
            share_above_03_at=("ratio_at", lambda x: float(np.mean(x > 0.3))),
            median_delta_rank=("delta_rank", "median"),
            median_svm_rank=("svm_rank", lambda x: float(pd.to_numeric(x).median())),
            median_loss=("loss", "median"),
        )
        .reset_index()
    )


def run(s: Settings = Settings(), *, progress: Progress = no_progress) -> Result:
    probs = [random_problem(s.n, s.T, s.d, seed=s.data_seed + j) for j in range(s.runs)]
    rows, curves, take = [], [], []
    for i, a in enumerate(s.alphas):
        progress(0.9 * i / len(s.alphas), f"α = {a:g}: {s.runs} runs of {s.steps:,} steps")
        r = sc.run_staircase(
            probs,
            init_scale=a,
            init_kind=s.init_kind,
            steps=s.steps,
            lr=s.lr,
            seed=s.seed,
            record_every=s.record_every,
        )
        at = r.ratio_at(s.ratio_step)
        for b, v in enumerate(sc.verdicts(probs, r)):
            rows.append(
                dict(
                    alpha=a,
                    instance=b,
                    data_seed=s.data_seed + b,
                    ratio_at=float(at[b]),
                    final_ratio=float(r.ratio()[b, -1]),
                    delta_rank=v["delta_rank"],
                    stable_rank=v["stable_rank"],
                    rank=v["rank"],
                    svm_rank=v["svm_rank"],
                    kind=v["kind"],
                    is_global=v["is_global"],
                    loss=v["loss"],
                )
            )
        take += _takeoffs(a, r, s.d)
        rel = r.sv[..., :4] / np.maximum(r.sv[..., :1], 1e-300)
        curves.append(
            pd.DataFrame(
                dict(
                    alpha=a,
                    step=r.steps,
                    rescaled=r.rescaled,
                    loss=np.median(r.loss, 0),
                    sigma1=np.median(r.sv[..., 0], 0),
                    **{f"ratio{j + 1}": np.median(rel[..., j], 0) for j in range(1, min(s.d, 4))},
                )
            )
        )
    runs_df, take_df = pd.DataFrame(rows), pd.DataFrame(take)
    by = _by_alpha(runs_df)
    return Result(
        name=NAME,
        frames={
            "by_alpha": by,
            "runs": runs_df,
            "takeoff": take_df,
            "curves": pd.concat(curves, ignore_index=True),
        },
        summary=_summary(s, by, take_df),
        settings=settings_dict(s),
        notes=NOTES,
    )


def _summary(s, by, take) -> dict:
    parts = []
    for t in by.to_dict("records"):
        k2 = take[(take.alpha == t["alpha"]) & (take.k == 2)]
        up = int(round(k2.taken_off.iloc[0] * s.runs)) if len(k2) else 0
        k2s = (
            f"σ₂ takes off in {up}/{s.runs} runs, at step "
            f"{fmt(k2.median_step.iloc[0], 3)} (median of those)"
            if up
            else f"σ₂ takes off in 0/{s.runs} runs"
        )
        parts.append(
            f"α={t['alpha']:g}: σ₂/σ₁ {fmt(t['median_ratio_at'], 2)} at step "
            f"{s.ratio_step}, final rank {fmt(t['median_delta_rank'], 2)}, {k2s}, "
            f"{fmt(100 * t['share_global'], 3)}% global"
        )
    text = (
        f"{s.runs} instances (n={s.n} T={s.T} d={s.d}), plain GD η={s.lr} on (K, Q), "
        f"{s.steps:,} steps, medians: "
        + "; ".join(parts)
        + " (staircase from small init: arXiv 2306.07042)"
    )
    rows = [
        {k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in r.items()}
        for r in by.to_dict("records")
    ]
    return {"paper": PAPER, "rows": rows, "text": text}


# -- the record: what the registry, CLI, store, budget and Reproduce page read --------
def price(s: Settings) -> tuple:
    """(K, Q)-GD from each init scale α (arXiv 2306.07042), then the selections' nuclear
    Att-SVMs (classification and rank), bulk."""
    B = s.runs * len(s.alphas)
    solves = 3 * B  # classify_runs (at α and at opt) and the rank's nuclear SVM
    items = [
        (
            f"{B} (K, Q) runs",
            limits.gd_work(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=B, param="KQ"),
        ),
        (
            f"{solves} Att-SVMs (nuclear), bulk",
            limits.bulk_svm_work(n=s.n, T=s.T, d=s.d, solves=solves, norm="nuc"),
        ),
    ]
    floats = limits.record_floats(
        n=s.n, T=s.T, d=s.d, steps=s.steps, record_every=s.record_every, runs=s.runs
    )
    return items, floats, dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=B, solves=solves)


RECORD = Experiment(
    name=NAME,
    title=TITLE,
    paper=PAPER,
    Settings=Settings,
    run=run,
    price=price,
    chart="attsvm_charts.staircase:rank_staircase",
    tiny=dict(runs=8, steps=1000, record_every=50, alphas=(1e-4, 1.0), ratio_step=1000),
    notes=NOTES,
    followup=True,
)
