"""Charts of the Real words page: sentences with their softmax weights and SVM margins, the
correlation with W^mm, the words along the SVM's direction, feasibility against d.

Words are drawn as Vega text marks: whatever a visitor typed is data, never markup.
"""

from __future__ import annotations

import altair as alt
import pandas as pd

from .bands import H, W

CELL = 78


def _grid(df: pd.DataFrame, color: alt.Color, title: str) -> alt.LayerChart:
    n = int(df["sentence"].nunique())
    base = alt.Chart(df).encode(
        x=alt.X("position:O", title=None, axis=None),
        y=alt.Y(
            "row:N",
            title=None,
            sort=None,
            axis=alt.Axis(labelLimit=60),
            scale=alt.Scale(paddingInner=0.1),
        ),
    )
    tip = [
        "word:N",
        alt.Tooltip("weight:Q", format=".4f"),
        alt.Tooltip("score:Q", format=".3f"),
        alt.Tooltip("margin:Q", format=".4f"),
        "support:N",
        "selected:N",
        "optimal:N",
        "key:N",
    ]
    rect = base.mark_rect(stroke="white").encode(color=color, tooltip=tip)
    ink = alt.condition("datum.key", alt.value("#b00020"), alt.value("black"))
    plain = base.transform_filter("!datum.selected").mark_text(fontSize=11, limit=CELL - 4)
    bold = base.transform_filter("datum.selected").mark_text(
        fontSize=12, fontWeight="bold", limit=CELL - 4
    )
    text = [m.encode(text="word:N", color=ink, tooltip=tip) for m in (plain, bold)]
    width = CELL * (int(df["position"].max()) + 1)
    return alt.layer(rect, *text).properties(
        title=title, width=width, height=alt.Step(22) if n else 22
    )


def _rows(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    df["row"] = [
        f"{i + 1} ({'+' if y > 0 else '−'})"
        for i, y in zip(df["sentence"], df["label"], strict=True)
    ]
    return df


def sentence_weights(df: pd.DataFrame, step: int) -> alt.LayerChart:
    """Each sentence as its words, shaded by softmax weight at `step`; GD's selected word in
    bold, the key word (when known) in red."""
    return _grid(
        _rows(df),
        alt.Color(
            "weight:Q",
            scale=alt.Scale(domain=[0, 1], range=["#f7fbff", "#6baed6"]),
            title="softmax",
        ),
        f"softmax weight of every word at iteration {step:,}",
    )


def sentence_margins(df: pd.DataFrame) -> alt.LayerChart:
    """Each word's Att-SVM margin (x_{iα_i} − x_it)ᵀ W^mm z_i (0 at the selected word,
    1 at support words)."""
    d = _rows(df)
    d["margin shown"] = d["margin"].clip(upper=4.0)
    return _grid(
        d,
        alt.Color(
            "margin shown:Q",
            scale=alt.Scale(domain=[0, 1, 4], range=["#fdae6b", "#fee6ce", "#ffffff"]),
            title="margin (≤ 4)",
        ),
        "SVM margin of every word (1 = support word, 0 = selected)",
    )


def corr_curve(steps, corr, title: str) -> alt.Chart:
    df = pd.DataFrame(dict(step=steps, corr=corr)).dropna()
    return (
        alt.Chart(df)
        .mark_line()
        .encode(
            x=alt.X("step:Q", title="iteration"),
            y=alt.Y("corr:Q", title="corr(W(k), W^mm_α)", scale=alt.Scale(zero=False)),
            tooltip=["step:Q", alt.Tooltip("corr:Q", format=".6f")],
        )
        .properties(title=title, width=W, height=H)
    )


def word_plane(df: pd.DataFrame) -> alt.LayerChart:
    """Distinct words in 2-D, x along the SVM's direction; selected words highlighted."""
    axis = str(df["axis"].iloc[0]) if len(df) else ""
    base = alt.Chart(df).encode(
        x=alt.X("x:Q", title=axis),
        y=alt.Y("y:Q", title="top principal direction ⟂ x"),
        tooltip=["word:N", alt.Tooltip("x:Q", format=".3f"), "selected:N"],
    )
    pts = base.mark_circle(size=50).encode(
        color=alt.Color(
            "selected:N",
            title="selected by GD",
            scale=alt.Scale(domain=[True, False], range=["#d62728", "#9e9e9e"]),
        )
    )
    txt = base.mark_text(dx=6, align="left", fontSize=10).encode(text="word:N")
    return alt.layer(pts, txt).properties(
        title="words along the SVM's direction", width=W, height=H + 60
    )


def feasibility(df: pd.DataFrame) -> alt.Chart:
    """Per PCA dimension d: bar height the share of sentences whose optimal word is the one
    at d = 50, colour whether Att-SVM at opt is feasible (grey: tied optimal words)."""
    d = df.assign(same=df["same_opt"].fillna(0.0))
    return (
        alt.Chart(d)
        .mark_bar()
        .encode(
            x=alt.X("d:O", title="d after PCA"),
            y=alt.Y(
                "same:Q",
                scale=alt.Scale(domain=[0, 1]),
                title="share of sentences with the same opt",
            ),
            color=alt.Color(
                "status:N",
                title="Att-SVM at opt",
                scale=alt.Scale(
                    domain=["feasible", "infeasible", "tie"],
                    range=["#2ca02c", "#d62728", "#9e9e9e"],
                ),
            ),
            tooltip=["d:O", "status:N", alt.Tooltip("same_opt:Q", format=".2f")],
        )
        .properties(title="after PCA to d: same optimal word? feasible SVM?", width=W, height=160)
    )
