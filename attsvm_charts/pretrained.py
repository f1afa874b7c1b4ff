"""Charts of the "A real transformer" page and `attsvm audit`: the heads grid coloured by
cos_span, a sentence's attention map with the head's selections, and the margins of W_h and
W^mm. Tokens are drawn as Vega text/data: whatever a visitor typed is data, never markup.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd


def heads_grid(df: pd.DataFrame) -> alt.LayerChart:
    """Layers × heads, coloured by cos_span (diverging around 0); the text is cos_span, the
    tooltip the coverage, constraints and the baselines' range (`attsvm.pretrained.
    audit_table`'s columns)."""
    d = df.copy()
    d["label"] = d["cos_span"].map(lambda v: "" if not np.isfinite(v) else f"{v:.2f}")
    tip = [
        "layer:O",
        "head:O",
        alt.Tooltip("coverage:Q", format=".2f"),
        "n_constraints:Q",
        alt.Tooltip("cos:Q", format=".3f"),
        alt.Tooltip("cos_span:Q", format=".3f"),
        alt.Tooltip("baseline_min:Q", format=".3f"),
        alt.Tooltip("baseline_max:Q", format=".3f"),
    ]
    base = alt.Chart(d).encode(x=alt.X("head:O", title="head"), y=alt.Y("layer:O", title="layer"))
    rect = base.mark_rect(stroke="white").encode(
        color=alt.Color(
            "cos_span:Q",
            title="cos_span",
            scale=alt.Scale(scheme="redblue", domain=[-1, 1], reverse=True),
        ),
        tooltip=tip,
    )
    text = base.mark_text(fontSize=11).encode(text="label:N", tooltip=tip)
    return (rect + text).properties(
        width=12 * 44, height=6 * 36, title="cos_span of each head with its own Att-SVM"
    )


def attention_map(tokens: list[str], A: np.ndarray, alpha: np.ndarray) -> alt.LayerChart:
    """The head's softmax weights A[t, s] (query rows, key columns) with its kept selections
    α_t outlined."""
    T = len(tokens)
    lab = [f"{i}:{w}" for i, w in enumerate(tokens)]
    rows = [
        dict(query=lab[t], key=lab[s], weight=float(A[t, s]), selected=bool(alpha[t] == s))
        for t in range(T)
        for s in range(T)
    ]
    d = pd.DataFrame(rows)
    enc = dict(
        x=alt.X("key:N", sort=lab, title="key s"), y=alt.Y("query:N", sort=lab, title="query t")
    )
    rect = (
        alt.Chart(d)
        .mark_rect()
        .encode(
            color=alt.Color("weight:Q", scale=alt.Scale(scheme="greys", domain=[0, 1])),
            tooltip=["query:N", "key:N", alt.Tooltip("weight:Q", format=".3f")],
            **enc,
        )
    )
    sel = (
        alt.Chart(d[d["selected"]])
        .mark_rect(fill=None, stroke="#d62728", strokeWidth=2)
        .encode(**enc)
    )
    return (rect + sel).properties(
        width=min(22 * T, 560),
        height=min(22 * T, 560),
        title="attention weights (red: kept selections α_t)",
    )


def margins_chart(head: np.ndarray, svm: np.ndarray) -> alt.Chart:
    """Histograms of the constraint margins of W_h (scaled to ‖W^mm‖) and of W^mm."""
    d = pd.concat(
        [
            pd.DataFrame(dict(margin=head, matrix="W_h (scaled)")),
            pd.DataFrame(dict(margin=svm, matrix="W^mm")),
        ]
    )
    return (
        alt.Chart(d)
        .mark_bar(opacity=0.6)
        .encode(
            x=alt.X("margin:Q", bin=alt.Bin(maxbins=40), title="margin ⟨A_j, W⟩"),
            y=alt.Y("count():Q", stack=None, title="constraints"),
            color="matrix:N",
        )
        .properties(width=420, height=200, title="margins (W^mm: all ≥ 1)")
    )


def heads_experiment(res) -> alt.LayerChart:
    """The `pretrained-heads` experiment: its heads table as the grid (`heads_grid`)."""
    return heads_grid(res.frames["heads"])
