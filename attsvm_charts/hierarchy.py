"""Altair charts of a stack of attention layers (docs/hierarchy.md): the layer × head grids
over time, each head's selections, the heads' agreement, and the `svm-hierarchy`
experiment. Pure: tidy DataFrames in, Altair charts out; no Streamlit."""

from __future__ import annotations

import altair as alt
import pandas as pd

CELL = dict(width=170, height=110)


def grid(df: pd.DataFrame, *, y: str, title: str, y_title: str, domain=None) -> alt.FacetChart:
    """A layer × head grid of `y` against the step (one small chart per head)."""
    scale = alt.Scale(domain=domain) if domain else alt.Scale(zero=False)
    base = (
        alt.Chart(df)
        .mark_line()
        .encode(
            x=alt.X("step:Q", title="step"),
            y=alt.Y(f"{y}:Q", title=y_title, scale=scale),
            tooltip=["layer:O", "head:O", "step:Q", alt.Tooltip(f"{y}:Q", format=".4f")],
        )
        .properties(**CELL)
    )
    return base.facet(
        row=alt.Row("layer:O", title="layer"), column=alt.Column("head:O", title="head")
    ).properties(title=title)


def loss(df: pd.DataFrame) -> alt.Chart:
    """The loss against the step (df: step, loss)."""
    return (
        alt.Chart(df)
        .mark_line()
        .encode(
            x=alt.X("step:Q"),
            y=alt.Y("loss:Q", scale=alt.Scale(zero=False)),
            tooltip=["step:Q", alt.Tooltip("loss:Q", format=".5f")],
        )
        .properties(width=260, height=180, title="Loss")
    )


def last_layer(df: pd.DataFrame) -> alt.LayerChart | alt.FacetChart:
    """Per last-layer head: sequences × keys, colored by the final attention at the query
    token; a ring on the head's selection, a cross on the one-layer optimal token."""
    base = alt.Chart(df).encode(
        x=alt.X("token:O", title="key token s"), y=alt.Y("seq:O", title="sequence i")
    )
    heat = base.mark_rect().encode(
        color=alt.Color("weight:Q", title="attention", scale=alt.Scale(domain=[0, 1])),
        tooltip=[
            "head:O",
            "seq:O",
            "token:O",
            alt.Tooltip("weight:Q", format=".4f"),
            "selected:N",
            "optimal:N",
        ],
    )
    ring = base.transform_filter("datum.selected").mark_point(
        shape="circle", size=140, color="black", filled=False
    )
    cross = base.transform_filter("datum.optimal").mark_point(
        shape="cross", size=60, color="#d62728", filled=True
    )
    return (
        alt.layer(heat, ring, cross, data=df)
        .properties(width=170, height=150)
        .facet(column=alt.Column("head:O", title="last-layer head"))
        .properties(
            title="Last layer at the query token: ring = the head's selection, "
            "red cross = optimal token of the one-layer picture"
        )
    )


def early_layer(df: pd.DataFrame) -> alt.FacetChart:
    """Per head of an earlier layer: query token × key token, colored by the share of
    sequences in which the query selects that key."""
    layer = int(df.layer.iloc[0])
    return (
        alt.Chart(df)
        .mark_rect()
        .encode(
            x=alt.X("key:O", title="key token s"),
            y=alt.Y("query:O", title="query token t"),
            color=alt.Color("share:Q", title="share of sequences", scale=alt.Scale(domain=[0, 1])),
            tooltip=["head:O", "query:O", "key:O", alt.Tooltip("share:Q", format=".2f")],
        )
        .properties(width=150, height=150)
        .facet(column=alt.Column("head:O", title="head"))
        .properties(title=f"Layer {layer}: which key each token selects (every token is a query)")
    )


def hierarchy_experiment(res) -> alt.HConcatChart:
    """The `svm-hierarchy` experiment: per layer, the share of heads at cos ≥ 0.99 with
    their own SVM and the share of rows where two heads of the layer select alike."""
    t = res.frames["layers"]
    long = t.melt(
        id_vars=["layer", "setting"],
        value_vars=["reach", "agree"],
        var_name="measure",
        value_name="share",
    )
    names = {
        "reach": "heads at cos ≥ 0.99 with their own SVM",
        "agree": "rows where two heads select the same key",
    }
    long["measure"] = long.measure.map(names)
    bars = (
        alt.Chart(long)
        .mark_bar()
        .encode(
            x=alt.X("layer:O"),
            y=alt.Y("share:Q", scale=alt.Scale(domain=[0, 1])),
            color=alt.Color("setting:N"),
            xOffset="setting:N",
            tooltip=["setting:N", "layer:O", "measure:N", alt.Tooltip("share:Q", format=".2f")],
        )
        .properties(width=220, height=200)
    )
    return alt.hconcat(
        *[bars.transform_filter(alt.datum.measure == m).properties(title=m) for m in names.values()]
    ).properties(title=f"A hierarchy of SVMs? {res.settings.get('seeds')} seeds per setting")
