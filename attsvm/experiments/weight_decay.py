"""Weight decay on (K, Q) is a nuclear-norm penalty on K Qᵀ, and training balances the
factors exponentially fast (arXiv 2410.23819; docs/staircase.md §3).

For each λ and each random instance, plain GD (step η) on L(K Qᵀ) + λ/2 (‖K‖² + ‖Q‖²) from
K₀, Q₀ = α·N(0, 1): K Qᵀ's final rank, ‖K Qᵀ‖_* against (‖K‖² + ‖Q‖²)/2, and the measured
decay rates of the relative balancedness gap and of the imbalance ‖KᵀK − QᵀQ‖_F
(`staircase.decay_rate`, least squares on log values) against the predicted 2ηλ per step
(`staircase.predicted_rates`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import limits
from .. import staircase as sc
from ..problems import check_float, check_int, random_problem
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

NAME = "weight-decay"
TITLE = "Weight decay = nuclear norm: (‖K‖² + ‖Q‖²)/2 → ‖KQᵀ‖_* at rate 2ηλ"
PAPER = (
    "Every local minimum of L(ABᵀ) + λ/2 (‖A‖² + ‖B‖²) minimizes L(ABᵀ) + λ‖ABᵀ‖_*, and the "
    "two objectives become equal exponentially fast in training (arXiv 2410.23819, abstract; "
    "the rate 2ηλ per step is derived in docs/staircase.md §3)"
)
NOTES = (
    "The predicted rate is ours, derived for gradient flow: d/dt(KᵀK − QᵀQ) = −2λ(KᵀK − QᵀQ); "
    "where K Qᵀ has lower rank than the factors, the gap is first order in that imbalance, so "
    "it decays at 2λ (not 4λ, which would hold if the gap were only second order).",
    "Rates are fitted where the relative gap lies in [1e-13, 1e-4] and the imbalance "
    "(relative to its start) in [1e-11, 1e-1]: above, the loss is still moving W; below, "
    "rounding.",
)


@dataclass(frozen=True, kw_only=True)
class Settings:
    """n, T, d: instance size; lambdas: weight decays λ; init_scale: α of K₀, Q₀ = α·N(0, 1);
    runs: instances; steps, lr: each plain-GD run; segments: checkpoints of the factor norms;
    data_seed: first data seed; seed: init seed."""

    n: int = 6
    T: int = 8
    d: int = 10
    lambdas: tuple = (0.0, 1e-3, 3e-3, 1e-2, 2e-2)
    init_scale: float = 1.0
    runs: int = 6
    steps: int = 20_000
    lr: float = 0.5
    segments: int = 100
    data_seed: int = 1000
    seed: int = 0

    def __post_init__(self):
        check_settings(self, n=(1, 32), T=(2, 32), d=(1, 32), runs=(1, 500), segments=(1, 1000))
        check_float("init_scale", self.init_scale, 0.0, 10.0, lo_open=True)
        if self.steps % self.segments:
            raise ValueError(f"`segments` must divide `steps` ({self.steps}); got {self.segments}")
        object.__setattr__(self, "lambdas", check_float_grid("lambdas", self.lambdas, 0.0, 0.5))
        check_int("seed", self.seed, 0, 2**31)


def _by_lambda(runs_df: pd.DataFrame) -> pd.DataFrame:
    """Per weight decay λ: median rank, norms, gap and imbalance decay rates, the predicted
    rate and the median loss."""
    return (
        runs_df.groupby("weight_decay")
        .agg(
            median_rank=("rank", "median"),
            median_nuclear=("nuclear", "median"),
            median_half_sq=("half_sq_norm", "median"),
            max_rel_gap=("rel_gap", lambda x: float(np.max(np.abs(x)))),
            gap_rate=("gap_rate", "median"),
            imbalance_rate=("imbalance_rate", "median"),
            predicted_rate=("predicted_rate", "first"),
            median_loss=("loss", "median"),
        )
        .reset_index()
    )


def run(s: Settings = Settings(), *, progress: Progress = no_progress) -> Result:
    probs = [random_problem(s.n, s.T, s.d, seed=s.data_seed + j) for j in range(s.runs)]
    rows, curves = [], []
    seg = s.steps // s.segments
    for i, lam in enumerate(s.lambdas):
        progress(0.9 * i / len(s.lambdas), f"λ = {lam:g}: {s.runs} runs of {s.steps:,} steps")
        r = sc.run_staircase(
            probs,
            init_scale=s.init_scale,
            weight_decay=lam,
            steps=s.steps,
            lr=s.lr,
            seed=s.seed,
            record_every=seg,
            segments=s.segments,
        )
        pred = sc.predicted_rates(s.lr, lam)
        imb = r.imbalance / np.maximum(r.imbalance[:, :1], 1e-300)
        for b, v in enumerate(sc.verdicts(probs, r)):
            rows.append(
                dict(
                    weight_decay=lam,
                    instance=b,
                    data_seed=s.data_seed + b,
                    rank=v["rank"],
                    nuclear=float(r.nuclear[b, -1]),
                    half_sq_norm=float(r.sq_norm[b, -1] / 2),
                    rel_gap=float(r.rel_gap[b, -1]),
                    gap_rate=sc.decay_rate(r.checkpoints, r.rel_gap[b], 1e-13, 1e-4),
                    imbalance_rate=sc.decay_rate(r.checkpoints, imb[b], 1e-11, 1e-1),
                    predicted_rate=pred["gap"],
                    kind=v["kind"],
                    loss=v["loss"],
                )
            )
        curves.append(
            pd.DataFrame(
                dict(
                    weight_decay=lam,
                    step=r.checkpoints,
                    rel_gap=np.median(np.abs(r.rel_gap), 0),
                    imbalance=np.median(imb, 0),
                )
            )
        )
    runs_df = pd.DataFrame(rows)
    by = _by_lambda(runs_df)
    return Result(
        name=NAME,
        frames={"by_lambda": by, "runs": runs_df, "curves": pd.concat(curves, ignore_index=True)},
        summary=_summary(s, by),
        settings=settings_dict(s),
        notes=NOTES,
    )


def _summary(s, by) -> dict:
    parts = []
    for t in by.to_dict("records"):
        rate = (
            "no decay predicted"
            if t["weight_decay"] == 0
            else f"gap rate {fmt(t['gap_rate'], 3)}/step (imbalance {fmt(t['imbalance_rate'], 3)}) "
            f"vs predicted {fmt(t['predicted_rate'], 3)}"
        )
        parts.append(
            f"λ={t['weight_decay']:g}: rank {fmt(t['median_rank'], 2)}, "
            f"‖KQᵀ‖_* {fmt(t['median_nuclear'], 4)} vs (‖K‖²+‖Q‖²)/2 "
            f"{fmt(t['median_half_sq'], 4)} (max rel. gap {t['max_rel_gap']:.1e}), {rate}"
        )
    text = (
        f"{s.runs} instances (n={s.n} T={s.T} d={s.d}), plain GD η={s.lr} from α="
        f"{s.init_scale:g}, {s.steps:,} steps, medians: "
        + "; ".join(parts)
        + " (weight decay = nuclear norm: arXiv 2410.23819)"
    )
    rows = [
        {k: (float(v) if isinstance(v, (float, np.floating)) else v) for k, v in r.items()}
        for r in by.to_dict("records")
    ]
    return {"paper": PAPER, "rows": rows, "text": text}


# -- the record: what the registry, CLI, store, budget and Reproduce page read --------
def price(s: Settings) -> tuple:
    """(K, Q)-GD with weight decay λ (arXiv 2410.23819) in `segments` pieces, then the
    selections' nuclear Att-SVMs."""
    B = s.runs * len(s.lambdas)
    solves = 3 * B
    items = [
        (
            f"{B} (K, Q) runs",
            limits.gd_work(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=B, param="KQ"),
        ),
        (
            f"{solves} Att-SVMs (nuclear), bulk",
            limits.bulk_svm_work(n=s.n, T=s.T, d=s.d, solves=solves, norm="nuc"),
        ),
        (
            f"{s.segments * len(s.lambdas)} GD calls (≈ 5 ms each)",
            5e6 * s.segments * len(s.lambdas),
        ),
    ]
    floats = limits.record_floats(
        n=s.n,
        T=s.T,
        d=s.d,
        steps=s.steps // s.segments,
        record_every=s.steps // s.segments,
        runs=s.runs,
    )
    return items, floats, dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=B, solves=solves)


RECORD = Experiment(
    name=NAME,
    title=TITLE,
    paper=PAPER,
    Settings=Settings,
    run=run,
    price=price,
    chart="attsvm_charts.staircase:weight_decay",
    tiny=dict(runs=4, steps=2000, segments=20, lambdas=(0.0, 0.02)),
    notes=NOTES,
    followup=True,
)
