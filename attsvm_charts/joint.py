"""Charts of joint (v, W) training (attsvm.joint; arXiv 2306.13596, 2410.14581): 2-D paths
of W z₁ and v against their SVM rays, correlation curves, and the experiment's scatter."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from .explorer import HEIGHT

TENSOR_COLORS = {"W z₁": "#d62728", "v": "#1f77b4"}
RAY_DASH = {"W^relax z₁": [6, 3], "W^tight z₁": [2, 2], "v^mm": [6, 3]}
MEASURE_COLORS = {
    "corr(W, W^relax)": "#d62728",
    "corr(W, W^tight)": "#7f7f7f",
    "corr(W, W^bal)": "#2e7d32",
    "corr(v, v^mm)": "#1f77b4",
}


def paths(study: dict, *, run: str | None = None) -> alt.LayerChart:
    """W z₁ and v over training (one run of `preset_study`), the SVM rays from the origin
    (scaled to the path), and the tokens, the non-support sequences' ringed.

    Long because the chart is four layers (paths, SVM rays, tokens, rings), each with its
    own encoding."""
    P = study["paths"]
    run = run or P.run.iloc[-1]
    P = P[P.run == run]
    R = study["rays"].copy()
    reach = float(np.nanmax(np.hypot(P.x, P.y))) if len(P) else 1.0
    ends = pd.concat([R.assign(x=0.0, y=0.0, end=0), R.assign(x=R.x * reach, y=R.y * reach, end=1)])
    color = alt.Color(
        "tensor:N",
        title=None,
        scale=alt.Scale(domain=list(TENSOR_COLORS), range=list(TENSOR_COLORS.values())),
        legend=alt.Legend(orient="bottom"),
    )
    line = (
        alt.Chart(P)
        .mark_line(point=alt.OverlayMarkDef(size=8))
        .encode(
            x=alt.X("x:Q", title="first coordinate"),
            y=alt.Y("y:Q", title="second coordinate"),
            color=color,
            order="step:Q",
            tooltip=[
                "tensor:N",
                "step:Q",
                alt.Tooltip("x:Q", format=".4f"),
                alt.Tooltip("y:Q", format=".4f"),
            ],
        )
    )
    rays = (
        alt.Chart(ends)
        .mark_line(strokeWidth=2)
        .encode(
            x="x:Q",
            y="y:Q",
            detail="svm:N",
            color=color,
            strokeDash=alt.StrokeDash(
                "svm:N",
                title="SVM ray",
                scale=alt.Scale(domain=list(RAY_DASH), range=list(RAY_DASH.values())),
                legend=alt.Legend(orient="bottom"),
            ),
            tooltip=["svm:N", alt.Tooltip("x:Q", format=".4f"), alt.Tooltip("y:Q", format=".4f")],
        )
    )
    tok = study["tokens"].assign(
        kind=lambda d: np.where(d.support, "support sequence", "non-support sequence")
    )
    pts = (
        alt.Chart(tok)
        .mark_point(filled=True, size=60, color="black")
        .encode(
            x="x:Q",
            y="y:Q",
            shape=alt.Shape("selected:N", title="selected token"),
            tooltip=["seq:Q", "token:Q", "label:Q", "selected:N", "kind:N"],
        )
    )
    ring = (
        alt.Chart(tok[~tok.support & tok.selected])
        .mark_point(size=400, strokeWidth=3, color="#ff7f0e")
        .encode(x="x:Q", y="y:Q", tooltip=["seq:Q", "kind:N"])
    )
    return (rays + line + pts + ring).properties(
        title=f"{run}: W z₁ and v, and their SVM rays", height=HEIGHT + 80, width=460
    )


def corr_curves(curves: pd.DataFrame) -> alt.Chart:
    """Median over instances of 1 − each correlation against the iteration (log axis)."""
    med = curves.groupby(["step", "measure"], as_index=False)["corr"].median()
    med = med.assign(gap=np.clip(1.0 - med["corr"], 1e-9, None)).query("step > 0")
    return (
        alt.Chart(med)
        .mark_line()
        .encode(
            x=alt.X("step:Q", title="iteration"),
            y=alt.Y("gap:Q", title="1 − median correlation", scale=alt.Scale(type="log")),
            color=alt.Color(
                "measure:N",
                title=None,
                scale=alt.Scale(domain=list(MEASURE_COLORS), range=list(MEASURE_COLORS.values())),
                legend=alt.Legend(orient="bottom", columns=2),
            ),
            tooltip=["measure:N", "step:Q", alt.Tooltip("corr:Q", format=".5f")],
        )
        .properties(
            title="random instances: which SVM does joint GD approach? (lower is closer)",
            height=HEIGHT,
            width=420,
        )
    )


def relaxed_vs_tight(
    final: pd.DataFrame, *, x: str = "corr_relaxed", y: str = "corr_tight", title: str = ""
) -> alt.LayerChart:
    """One point per instance: corr with the relaxed SVM against corr with the tight one
    (above the diagonal: the tight one explains GD better)."""
    lo = float(np.nanmin(final[[x, y]].to_numpy())) if len(final) else 0.0
    lo = min(lo, 0.99)
    diag = (
        alt.Chart(pd.DataFrame({"a": [lo, 1.0]}))
        .mark_line(color="gray", strokeDash=[4, 4])
        .encode(x="a:Q", y="a:Q")
    )
    pts = (
        alt.Chart(final)
        .mark_circle(size=70)
        .encode(
            x=alt.X(f"{x}:Q", title="corr(W, W^relax)", scale=alt.Scale(domain=[lo, 1.0])),
            y=alt.Y(f"{y}:Q", title="corr(W, W^tight)", scale=alt.Scale(domain=[lo, 1.0])),
            tooltip=list(final.columns),
        )
    )
    return (diag + pts).properties(
        title=title or "relaxed vs tight Att-SVM, per instance", height=HEIGHT, width=HEIGHT
    )


def joint_training(res) -> alt.HConcatChart:
    """The `joint-training` experiment: relaxed vs tight per instance, and the three SVMs'
    correlations side by side."""
    runs = res.frames["runs"]
    left = relaxed_vs_tight(runs, title="corr(W, W^relax) vs corr(W, W^tight)")
    long = runs.melt(
        id_vars=["instance"],
        value_vars=["corr_relaxed", "corr_tight", "corr_balanced", "corr_v"],
        var_name="svm",
        value_name="corr",
    )
    right = (
        alt.Chart(long)
        .mark_tick(thickness=2, size=18)
        .encode(
            x=alt.X(
                "corr:Q",
                scale=alt.Scale(zero=False),
                title="correlation at the end",
                axis=alt.Axis(format=".2f", tickCount=5, labelOverlap="greedy"),
            ),
            y=alt.Y(
                "svm:N", title=None, sort=["corr_v", "corr_balanced", "corr_relaxed", "corr_tight"]
            ),
            tooltip=["instance:Q", "svm:N", alt.Tooltip("corr:Q", format=".5f")],
        )
        .properties(title="every instance, every SVM", height=HEIGHT, width=360)
    )
    return alt.hconcat(left, right).properties(
        title="Joint (v, W) training: head SVM, relaxed / tight / balanced Att-SVM"
    )
