"""The Nonlinear heads page's panels: intro, diagnostics of O_i, the 1 − corr curves."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attsvm import studies
from attsvm_charts import explorer as charts
from attsvm_charts import frames
from ui import about

COLORS = {
    "W^fin + R_k·W^dir (generalized SVM)": "#2e7d32",
    "W^dir alone": "#1f77b4",
    "one-token SVM W^mm_α": "#d62728",
}


def intro():
    st.title("Nonlinear heads: selecting several tokens")
    st.markdown(
        "With an MLP head the best output may mix tokens, so the softmax need not become "
        "one-hot: per sequence a set O_i keeps positive weight and the rest is masked. The "
        "paper proposes (and checks numerically; it is not a theorem) that GD then follows"
    )
    st.latex(r"W(k)\ \approx\ W^{fin}+R_k\,W^{dir},\qquad R_k\to\infty,")
    st.markdown(
        "where **W^dir** separates O_i from the masked tokens with margin 1 (equal logits "
        "inside O_i) and **W^fin** is the min-norm W reproducing the finite log-ratios of the "
        "softmax inside O_i. The one-token SVM (α_i = argmax softmax) is the wrong model once "
        "some |O_i| > 1."
    )
    st.info(
        "This page uses its own small problem (defaults: the paper's n = 3, T = 4, d = 4, "
        "and a seed whose relu head keeps every token of one sequence while the others "
        "select one); step size, loss, "
        "normalization, parameterization and initialization come from the sidebar.",
        icon=":material/info:",
    )


def diagnostics(run, gen, thr: float):
    """Warnings about O_i: nothing masked, all single tokens, ambiguous weights, infeasible."""
    s = run.probs[-1]  # (n, T)
    sizes = gen.selected.sum(1)
    if not (~gen.selected).any():
        st.warning(
            "**Nothing is masked yet**: every token keeps weight above the threshold, "
            "so GD is still near a finite solution and W^dir has no constraint (W^dir "
            "= 0). The paper rejects such runs; try more steps or another seed."
        )
    elif np.all(sizes == 1):
        st.info(
            "Every O_i is a single token here: the generalized SVM reduces to the "
            "one-token SVM (W^fin = 0, W^dir = W^mm_α). Try another seed or the quadratic "
            "head with a larger λ to see several tokens kept."
        )
    amb = (s > 1e-6) & (s <= thr)
    if amb.any():
        st.warning(
            f"**O_i is ambiguous**: {int(amb.sum())} softmax weight(s) lie in (1e-6, "
            f"{thr:g}] — neither clearly kept nor clearly masked (the paper's filter "
            "rejects such runs). Run longer or raise the threshold."
        )
    if not gen.feasible:
        st.warning(
            f"The W^dir problem is infeasible (solver: `{gen.status}`): no W separates "
            "the kept tokens from the masked ones with equal logits inside O_i."
        )


def gaps(run, gen, one, *, steps: int, norm: str, head: str):
    """1 − corr of GD with each prediction: metrics at the end and curves over k."""
    refs = studies.generalized_gaps(run, gen, one)
    cols = st.columns(len(refs) or 1)
    for col, (name, v) in zip(cols, refs.items(), strict=False):
        col.metric(f"1 − corr with {name}", f"{v[-1]:.2e}")
    if not refs:
        return
    st.altair_chart(
        charts.curves(
            frames.gap_curves(run.steps, refs),
            y="1 − corr",
            color="reference",
            log_y=True,
            x_max=steps,
            fmt=".3g",
            title=f"1 − corr(W(k), ·) — {norm} SVMs, {head} head",
            y_title="1 − correlation",
            colors=COLORS,
        )
    )
    about.explain(st, "nonlinear-gaps")
    st.caption(
        "R_k is fitted by least squares at every k. The paper's ordering (500 runs, "
        "d = 4): generalized SVM ≈ 0.035 < W^dir ≈ 0.07 < one-token ≈ 0.16 — a single "
        "run varies around that."
    )


def kept_tokens(prob, run, gen):
    """The final softmax map (kept □, best single token ★) and the O_i table; returns the
    map's frame (for the export)."""
    pm = frames.kept_tokens(prob, run.probs[-1], gen.selected)
    left, right = st.columns([3, 2])
    left.altair_chart(charts.prob_map(pm, title="Final softmax: □ kept (O_i), ★ best single token"))
    about.explain(left, "nonlinear-probs")
    right.dataframe(frames.kept_sets(run.probs[-1], gen.selected), hide_index=True, key="nl_sets")
    right.caption(
        f"R at the last iterate = {gen.R:.3g}"
        if gen.R is not None
        else "No R: the generalized SVM is not available for this run."
    )
    return pm
