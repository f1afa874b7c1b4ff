"""The Basins page's panels: intro and the table of every selection's SVM status."""

from __future__ import annotations

import streamlit as st

from attsvm.config import selection_label
from attsvm_charts import explorer as charts


def intro():
    st.title("Local optima and basins")
    st.markdown(
        "A selection α (one token per sequence) is **locally optimal** when its SVM is feasible "
        "and every support token of sequence i scores below the selected one, "
        "γ_iα_i > γ_it. GD converges in direction to W^mm_α of such an α — the global one "
        "(α = opt) or a local one, depending on where it starts."
    )
    st.info(
        "This page lists all Tⁿ selections, so it uses its own small problem (below); the "
        "training settings (parameterization, loss, η, steps) come from the sidebar.",
        icon=":material/info:",
    )


def selections(table, total: int, norm: str) -> dict:
    """Counts per status, a warning when opt has no feasible SVM, the locally optimal
    selections; returns {α: status} (adds a "selection" label column to `table`)."""
    table["selection"] = table["alpha"].map(selection_label)
    status = dict(zip(table["alpha"], table["status"], strict=True))
    counts = table["status"].value_counts()
    st.subheader(f"1 · All {total:,} selections")
    m = st.columns(4)
    for col, key in zip(m, charts.CLASS_ORDER, strict=True):
        col.metric(charts.CLASS_LABELS[key], int(counts.get(key, 0)))
    if counts.get("global", 0) == 0:
        st.warning(
            "The optimal selection opt has **no feasible SVM** here (or opt is not unique), "
            "so there is no global max-margin direction: GD can only reach local ones."
        )
    good = table[table["status"].isin(["global", "local"])]
    st.dataframe(
        good[["selection", "status", "objective"]].rename(
            columns={"objective": f"‖W^mm_α‖ ({'Frobenius' if norm == 'fro' else 'nuclear'})"}
        ),
        hide_index=True,
        key="bas_table",
    )
    st.caption(
        "Token indices are 0-based, one per sequence. A locally optimal α with a larger "
        "‖W^mm_α‖ has a smaller margin 1/‖W^mm_α‖."
    )
    return status
