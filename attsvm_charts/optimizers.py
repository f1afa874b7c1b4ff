"""Charts of the Optimizer → norm page (pure: tidy frames in, Altair charts out)."""
from __future__ import annotations

import altair as alt
import pandas as pd


def norm_heatmap(heat: pd.DataFrame, *, measure: str, order: list, steps: int) -> alt.LayerChart:
    """Optimizer (rows) × Att-SVM norm (columns), coloured and labelled by `measure`."""
    base = alt.Chart(heat).encode(
        x=alt.X("norm:N", sort=order, title="Att-SVM norm", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("optimizer:N", title=None))
    rect = base.mark_rect().encode(color=alt.Color(f"{measure}:Q", title=measure,
                                                   scale=alt.Scale(scheme="viridis")))
    text = base.mark_text().encode(text=alt.Text(f"{measure}:Q", format=".4f"))
    return (rect + text).properties(
        title=f"{measure} of W({steps:,}) with W^mm_α in each norm, α = its own final selection",
        height=45 * heat.optimizer.nunique() + 110)


def norm_growth(grow: pd.DataFrame) -> alt.Chart:
    """‖W(k)‖_F of each optimizer, log scale."""
    return alt.Chart(grow).mark_line().encode(
        x="step:Q", y=alt.Y("‖W‖_F:Q", scale=alt.Scale(type="log")),
        color="optimizer:N").properties(title="‖W(k)‖_F growth", height=220)
