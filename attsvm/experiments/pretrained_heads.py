"""A real transformer: every head of all-MiniLM-L6-v2 against the Att-SVM of the tokens it
selects (docs/pretrained.md; `attsvm.pretrained.audit_table`, `attsvm.audit`).

For each audited (layer, head), on the first `sentences` clauses of the built-in corpus
(Proverbs, KJV): the head's selections (argmax of its attention row, kept at weight ≥ τ),
the Frobenius Att-SVM W^mm of those selections (arXiv 2308.16898, eq. Att-SVM), and
cos_span = ⟨W_h, W^mm⟩ / (‖P_S W_h‖‖W^mm‖) against its baselines (random matrices of the
head's rank, the layer's other heads, shuffled selections). This measures how
max-margin-like a trained head is; it is not a convergence test.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..problems import check_float
from .core import (
    Experiment,
    Progress,
    Result,
    check_grid,
    check_settings,
    fmt,
    no_progress,
    ordered_map,
    settings_dict,
)

NAME = "pretrained-heads"
TITLE = "A real transformer: each head of all-MiniLM-L6-v2 against its own Att-SVM"
PAPER = (
    "Open: no paper compares a pretrained head with the Att-SVM of its own selections; "
    "the theory (arXiv 2308.16898, Theorems 2–4) covers gradient descent on one layer, "
    "and Clark et al. (arXiv 1906.04341) describe what BERT's heads attend to "
    "(docs/pretrained.md)"
)
NOTES = (
    "An empirical look, not a reproduction: it measures how max-margin-like a trained head "
    "is, not a convergence test (the model was trained with AdamW, weight decay and six "
    "layers).",
    "The head satisfies its own constraints by construction (each selection is its own "
    "argmax): directions are compared, not feasibility.",
)
LAYERS, HEADS = 6, 12  # all-MiniLM-L6-v2 (attsvm.pretrained)
# `price`'s work units per head, fitted to one-process runs of all 72 heads with the default
# baselines (6, 20 and 100 sentences: M = 910, 2,904 and 14,714), docs/pretrained.md
HEAD_WORK = 2.5e8  # selections, assembly, the baselines' products
SOLVE_WORK = 40.0  # × M² per head, for its two Att-SVMs (its own and one shuffled)
SPAN_WORK = 8.2e-4  # × M³ per head: the span's Cholesky factor


@dataclass(frozen=True, kw_only=True)
class Settings:
    """sentences: the first N clauses of the built-in corpus; layers, heads: the audited
    (layer, head) grid; tau: the selection threshold; n_random, n_shuffled: baselines per
    head (the layer's other heads are always compared); seed: the baselines' draws."""

    sentences: int = 100
    layers: tuple = tuple(range(LAYERS))
    heads: tuple = tuple(range(HEADS))
    tau: float = 0.5
    n_random: int = 2
    n_shuffled: int = 1
    seed: int = 0

    def __post_init__(self):
        check_settings(self, sentences=(1, 300), n_random=(0, 16), n_shuffled=(0, 4))
        object.__setattr__(self, "layers", check_grid("layers", self.layers, 0, LAYERS - 1))
        object.__setattr__(self, "heads", check_grid("heads", self.heads, 0, HEADS - 1))
        check_float("tau", self.tau, 0.0, 1.0, lo_open=True)


def run(s: Settings = Settings(), *, progress: Progress = no_progress) -> Result:
    from .. import pretrained

    model = pretrained.load()
    sentences = pretrained.corpus(s.sentences)
    grid = [(l, h) for l in s.layers for h in s.heads]
    progress(0.0, f"{len(grid)} heads on {len(sentences)} sentences")
    df = pretrained.audit_table(
        model,
        sentences,
        heads=grid,
        tau=s.tau,
        n_random=s.n_random,
        n_shuffled=s.n_shuffled,
        seed=s.seed,
        progress=lambda k, n: progress(k / n, f"{k} of {n} heads"),
        map_heads=ordered_map,
    )
    return Result(
        name=NAME,
        frames={"heads": df},
        summary=_summary(s, df),
        settings=settings_dict(s),
        notes=NOTES,
    )


def _summary(s: Settings, df: pd.DataFrame) -> dict:
    kept = df[np.isfinite(df.cos_span)]
    beat = int((kept.cos_span > kept.baseline_max).sum())
    gap = float(np.nanmax(df.gap)) if np.isfinite(df.gap).any() else float("nan")
    text = (
        f"{len(df)} heads of all-MiniLM-L6-v2 on {s.sentences} built-in sentences "
        f"(τ = {s.tau:g}): {len(kept)} keep a selection; cos_span with their own "
        f"Att-SVM has median {fmt(float(kept.cos_span.median()), 3)} (range "
        f"{fmt(float(kept.cos_span.min()), 2)} to {fmt(float(kept.cos_span.max()), 2)}); "
        f"{beat} of {len(kept)} lie above every one of their baselines; median coverage "
        f"{fmt(float(df.coverage.median()), 2)}; largest relative duality gap "
        f"{fmt(gap, 2)} (how max-margin-like a trained head is, not a convergence test)"
    )
    return {
        "paper": PAPER,
        "text": text,
        "median_cos_span": float(kept.cos_span.median()),
        "beat_every_baseline": beat,
        "heads_with_selections": int(len(kept)),
        "max_gap": gap,
    }


# -- the record: what the registry, CLI, store, budget and Reproduce page read --------
def _lengths(n: int) -> list[int]:
    """Tokens of the first n corpus sentences ([CLS] and [SEP] included); without the model
    package, an estimate from the words (1.3 word pieces a word)."""
    from .. import pretrained

    sentences = pretrained.corpus(n)
    try:
        tokens, _ = pretrained.load().tokenize(sentences)
        return [len(t) for t in tokens]
    except pretrained.ModelMissing:
        return [int(1.3 * len(x.split())) + 2 for x in sentences]


def price(s: Settings) -> tuple:
    """(items, floats, sizes) of a run with `s` (`budget.Price`), from `run`'s loop sizes:
    per head, with M = Σ_i T_i (T_i − 1) the constraints of a head that keeps every query,
    HEAD_WORK + SOLVE_WORK · M² per pair of Att-SVMs (its own and each shuffled baseline's) +
    SPAN_WORK · M³ (the span's factor, N³/3 flops with N ≤ M coordinates), plus the forward
    pass. The constants are fitted to whole tables, so they carry the corpus's typical
    coverage (median 0.57 at 100 sentences): a grid of only full-coverage heads costs more."""
    T = _lengths(s.sentences)
    M = float(sum(t * (t - 1) for t in T))
    n_heads = len(s.layers) * len(s.heads)
    solves = n_heads * (1 + s.n_shuffled)
    per_head = HEAD_WORK + SOLVE_WORK * M * M * (1 + s.n_shuffled) / 2 + SPAN_WORK * M**3
    items = [
        (f"the forward pass of {s.sentences} sentences", 2e7 * s.sentences),
        (
            f"{n_heads} heads: {solves} Att-SVMs and spans of ≤ {int(M):,} constraints",
            n_heads * per_head,
        ),
    ]
    return items, 0, dict(sentences=s.sentences, T=max(T), solves=solves)


RECORD = Experiment(
    name=NAME,
    title=TITLE,
    paper=PAPER,
    Settings=Settings,
    run=run,
    price=price,
    chart="attsvm_charts.pretrained:heads_experiment",
    tiny=dict(sentences=2, layers=(0,), heads=(2, 5), n_random=1),
    notes=NOTES,
    followup=True,
    helped=True,  # its heads are Python-bound numpy (`core.ordered_map`)
)
