"""A hierarchy of SVMs? (an open question: docs/hierarchy.md; arXiv 2308.16898 closes by
proposing to read a multi-layer transformer as "a hierarchy of SVMs that separate and
select the best tokens"; no theorem covers more than one layer or head.)

For each setting (heads per layer H, value matrices shared U = I/H or random orthogonal/H)
and each of `runs` random self-attention instances (query = the last token): per-head
normalized GD on L layers × H heads (`attsvm.train_stack`, one batched program per setting),
then `attsvm.audit_stack`: every head against the Att-SVM of its own final selection on its
own layer's final inputs. Reported per layer: the share of heads whose direction reaches
cos ≥ `threshold` with their own SVM, the share of rows (kept by both under τ) where two
heads of the layer select the same key, coverage, and for the last layer how often it
selects the optimal token of the one-layer picture.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from .. import limits
from ..problems import check_choice, check_float, random_problem
from ..stack import audit_stack, random_values, train_stack, values_default
from .core import Experiment, Progress, Result, check_settings, fmt, no_progress, settings_dict

NAME = "svm-hierarchy"
TITLE = "A hierarchy of SVMs? Each head of L layers against the Att-SVM of its own selection"
PAPER = (
    'Open: the paper proposes to read a multi-layer transformer as "a hierarchy of SVMs '
    'that separate and select the best tokens" (arXiv 2308.16898, closing section); no '
    "theorem covers several layers or heads (docs/hierarchy.md)"
)
NOTES = (
    "An empirical look, not a reproduction: no paper reports these numbers.",
    "Each head is compared with the Frobenius Att-SVM of the keys it selects at the end "
    "(argmax, kept at weight ≥ τ) on its own layer's final inputs; earlier layers at every "
    "token, the last layer at the query token (`attsvm.audit_stack`).",
)
VALUES = ("shared", "random")


@dataclass(frozen=True, kw_only=True)
class Settings:
    """n, T, d: instance size (self-attention, query = last token); layers: L; heads: the H
    values compared; values: "shared" (U = I/H) and/or "random" (orthogonal/H); runs:
    instances per setting (data seeds data_seed …); steps, lr: per-head normalized GD;
    residual: ρ = 1; threshold: the cos a head must reach; tau: the audit's selection
    threshold; seed: the heads' init seed."""

    n: int = 8
    T: int = 8
    d: int = 16
    layers: int = 2
    heads: tuple = (1, 2, 4)
    values: tuple = VALUES
    runs: int = 8
    steps: int = 4000
    lr: float = 0.1
    residual: bool = True
    threshold: float = 0.99
    tau: float = 0.5
    data_seed: int = 0
    seed: int = 0

    def __post_init__(self):
        check_settings(self, n=(1, 32), T=(2, 32), d=(1, 64), layers=(1, 3), runs=(1, 500))
        heads = tuple(sorted({int(h) for h in self.heads}))
        if not heads or heads[0] < 1 or heads[-1] > 4:
            raise ValueError(
                f"`heads` must be a non-empty set of integers in [1, 4]; got {self.heads!r}"
            )
        object.__setattr__(self, "heads", heads)
        vals = tuple(v for v in VALUES if v in self.values)
        for v in self.values:
            check_choice("values", v, VALUES)
        if not vals:
            raise ValueError(f"`values` must name some of {list(VALUES)}; got {self.values!r}")
        object.__setattr__(self, "values", vals)
        if not isinstance(self.residual, bool):
            raise ValueError(f"`residual` must be True or False; got {self.residual!r}")
        check_float("threshold", self.threshold, -1.0, 1.0)
        check_float("tau", self.tau, 0.0, 1.0)


def settings_grid(s: Settings) -> list[tuple[int, str]]:
    """(H, values) of every setting, in order."""
    return [(h, v) for h in s.heads for v in s.values]


def _train(s: Settings, probs, H: int, vals: str):
    """The stack of H heads per layer with shared (U = I / H) or random values, trained on
    `probs` (only the final state recorded)."""
    U = (
        values_default(s.layers, H, s.d)
        if vals == "shared"
        else random_values(s.layers, H, s.d, s.seed)
    )
    return train_stack(
        probs,
        layers=s.layers,
        heads=H,
        steps=s.steps,
        lr=s.lr,
        residual=s.residual,
        values=U,
        seed=s.seed,
        record_every=s.steps,
    )


def _by_layer(heads: pd.DataFrame) -> pd.DataFrame:
    """Per setting and layer: the share of heads reaching the SVM direction, median cosines,
    agreement, coverage, how often the last layer selects the optimal tokens, the loss."""
    return (
        heads.groupby(["setting", "heads", "values", "layer"], sort=False)
        .agg(
            reach=("reach", "mean"),
            median_cos=("cos", "median"),
            median_cos_span=("cos_span", "median"),
            agree=("agree", "mean"),
            coverage=("coverage", "mean"),
            selects_optimal=("selects_optimal", "mean"),
            loss=("loss", "median"),
        )
        .reset_index()
    )


def run(s: Settings = Settings(), *, progress: Progress = no_progress) -> Result:
    probs = [
        random_problem(s.n, s.T, s.d, s.data_seed + j, attention="self", query_index=s.T - 1)
        for j in range(s.runs)
    ]
    grid = settings_grid(s)
    rows = []
    for g, (H, vals) in enumerate(grid):
        label = f"H={H}, U {vals}"
        progress(g / len(grid), f"{label}: {s.runs} runs of {s.steps:,} steps")
        batch = _train(s, probs, H, vals)
        for b, prob in enumerate(probs):
            a = audit_stack(prob, batch[b], tau=s.tau)
            for l in range(s.layers):
                agree = [a.agree[l, i, j] for i, j in combinations(range(H), 2)]
                for h in range(H):
                    opt = np.nan
                    if l == s.layers - 1 and a.optimal is not None:
                        opt = float(np.mean(a.selections[l, h, :, prob.query_index] == a.optimal))
                    rows.append(
                        dict(
                            setting=label,
                            heads=H,
                            values=vals,
                            run=b,
                            data_seed=s.data_seed + b,
                            layer=l + 1,
                            head=h + 1,
                            cos=a.cos[l, h],
                            cos_span=a.cos_span[l, h],
                            coverage=a.coverage[l, h],
                            selects_optimal=opt,
                            agree=float(np.nanmean(agree))
                            if agree and np.isfinite(agree).any()
                            else np.nan,
                            loss=float(batch.loss[b, -1]),
                        )
                    )
    heads = pd.DataFrame(rows)
    heads["reach"] = heads.cos >= s.threshold
    layers = _by_layer(heads)
    return Result(
        name=NAME,
        frames={"layers": layers, "heads": heads},
        summary=_summary(s, layers),
        settings=settings_dict(s),
        notes=NOTES,
    )


def _summary(s: Settings, layers: pd.DataFrame) -> dict:
    parts = []
    for label, t in layers.groupby("setting", sort=False):
        per = []
        for r in t.to_dict("records"):
            agree = (
                "" if not np.isfinite(r["agree"]) else f", heads agree on {r['agree']:.0%} of rows"
            )
            opt = (
                ""
                if not np.isfinite(r["selects_optimal"])
                else f", one-layer optimal token {r['selects_optimal']:.0%}"
            )
            per.append(
                f"layer {r['layer']}: {r['reach']:.0%} of heads at cos ≥ "
                f"{s.threshold:g} (median {fmt(r['median_cos'], 3)}){agree}{opt}"
            )
        parts.append(f"{label}: " + "; ".join(per))
    last, first = layers[layers.layer == s.layers], layers[layers.layer < s.layers]
    found = (
        f"Found: last-layer heads reach cos ≥ {s.threshold:g} with their own SVM in "
        f"{last.reach.mean():.0%} of cases"
    )
    if len(first):
        found += f", earlier-layer heads in {first.reach.mean():.0%}"
    text = (
        f"{s.runs} instances (n={s.n} T={s.T} d={s.d}, query = last token), {s.layers} "
        f"layers, residual {'on' if s.residual else 'off'}, per-head NGD η={s.lr}, "
        f"{s.steps:,} steps. " + " | ".join(parts) + ". " + found + " (an open question: "
        "no theorem, docs/hierarchy.md)"
    )
    rows = [
        {
            k: (
                float(v)
                if isinstance(v, (float, np.floating))
                else int(v)
                if isinstance(v, np.integer)
                else v
            )
            for k, v in r.items()
        }
        for r in layers.to_dict("records")
    ]
    return {"paper": PAPER, "rows": rows, "text": text}


# -- the record: what the registry, CLI, store, budget and Reproduce page read --------
def price(s: Settings) -> tuple:
    """(items, floats, sizes) of a run with `s` (`budget.Price`), from `run`'s loop sizes:
    per (H, values) setting one batched stack run (`limits.stack_work`), then every head's
    Att-SVM (earlier layers: every token a query; the last layer: one query)."""
    items, solves, floats = [], 0, 0
    for H in s.heads:
        B = s.runs * len(s.values)
        items.append(
            (
                f"{B} stack runs, {s.layers} layers × {H} heads",
                limits.stack_work(
                    n=s.n, T=s.T, d=s.d, layers=s.layers, heads=H, steps=s.steps, runs=B
                ),
            )
        )
        early = B * H * (s.layers - 1)
        if early:
            items.append(
                (
                    f"{early} Att-SVMs at every token",
                    limits.svm_work(
                        n=s.n, T=s.T, d=s.d, queries="sequence", solves=early, solver="pairs"
                    ),
                )
            )
        items.append(
            (
                f"{B * H} Att-SVMs at the query",
                limits.svm_work(n=s.n, T=s.T, d=s.d, solves=B * H, solver="pairs"),
            )
        )
        solves += B * H * s.layers
        floats = max(
            floats,
            limits.stack_record_floats(
                n=s.n,
                T=s.T,
                d=s.d,
                layers=s.layers,
                heads=H,
                steps=s.steps,
                record_every=s.steps,
                runs=s.runs,
            ),
        )
    return items, floats, dict(n=s.n, T=s.T, d=s.d, steps=s.steps, runs=s.runs, solves=solves)


RECORD = Experiment(
    name=NAME,
    title=TITLE,
    paper=PAPER,
    Settings=Settings,
    run=run,
    price=price,
    chart="attsvm_charts.hierarchy:hierarchy_experiment",
    tiny=dict(n=4, T=4, d=4, runs=1, steps=200, heads=(1,), values=("shared",)),
    notes=NOTES,
    followup=True,
)
