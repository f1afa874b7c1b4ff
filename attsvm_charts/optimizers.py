"""Charts of the Optimizer → norm page (pure: tidy frames in, Altair charts out)."""

from __future__ import annotations

import altair as alt
import pandas as pd


def norm_heatmap(heat: pd.DataFrame, *, measure: str, order: list, steps: int) -> alt.LayerChart:
    """Optimizer (rows) × Att-SVM norm (columns), coloured and labelled by `measure`."""
    base = alt.Chart(heat).encode(
        x=alt.X("norm:N", sort=order, title="Att-SVM norm", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("optimizer:N", title=None),
    )
    rect = base.mark_rect().encode(
        color=alt.Color(f"{measure}:Q", title=measure, scale=alt.Scale(scheme="viridis"))
    )
    text = base.mark_text().encode(text=alt.Text(f"{measure}:Q", format=".4f"))
    return (rect + text).properties(
        title=f"{measure} of W({steps:,}) with W^mm_α in each norm, α = its own final selection",
        height=45 * heat.optimizer.nunique() + 110,
    )


def norm_growth(grow: pd.DataFrame) -> alt.Chart:
    """‖W(k)‖_F of each optimizer, log scale."""
    return (
        alt.Chart(grow)
        .mark_line()
        .encode(x="step:Q", y=alt.Y("‖W‖_F:Q", scale=alt.Scale(type="log")), color="optimizer:N")
        .properties(title="‖W(k)‖_F growth", height=220)
    )


def steepest_heatmap(res) -> alt.LayerChart:
    """lp-mirror-descent's steepest-descent table: optimizer × Att-SVM norm, median margin
    ratio (1 = W/‖W‖ solves that norm's SVM); sign ↔ ℓ∞ and spectral ↔ spectral are open for
    attention (arXiv 2502.04664 proves them for linear models)."""
    t = res.frames["steepest_table"].assign(
        optimizer=lambda d: d.optimizer.map(
            {"sign": "signGD", "spectral": "spectral descent", "ngd": "NGD"}
        ),
        norm=lambda d: d.norm.map({"fro": "Frobenius", "max": "ℓ∞ (max)", "spectral": "spectral"}),
    )
    base = alt.Chart(t).encode(
        x=alt.X(
            "norm:N",
            sort=["Frobenius", "ℓ∞ (max)", "spectral"],
            title="Att-SVM norm",
            axis=alt.Axis(labelAngle=0),
        ),
        y=alt.Y("optimizer:N", sort=["signGD", "spectral descent", "NGD"], title=None),
    )
    rect = base.mark_rect().encode(
        color=alt.Color(
            "margin_ratio_median:Q", title="median margin ratio", scale=alt.Scale(scheme="viridis")
        ),
        tooltip=[
            "optimizer:N",
            "norm:N",
            alt.Tooltip("margin_ratio_median:Q", format=".4f"),
            alt.Tooltip("corr_median:Q", format=".4f"),
            "runs:Q",
        ],
    )
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("margin_ratio_median:Q", format=".4f"),
        color=alt.condition(
            "datum.margin_ratio_median > 0.9", alt.value("black"), alt.value("white")
        ),
    )
    return (rect + text).properties(
        title="steepest descent: margin ratio in each norm (sign, spectral: open for attention)",
        width=360,
        height=160,
    )
