"""The Optimizer → norm page's panels: intro, the race's controls and the selected tokens."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from attsvm import studies
from ui.widgets import BOUND

THEORY = studies.OPTIMIZER_THEORY


def intro():
    """The page's title and claim."""
    st.title("Optimizer → norm")
    st.markdown(
        "Each optimizer has its own implicit bias: its W(k)/‖W(k)‖ approaches the "
        "attention SVM of *its* norm. All runs train the combined W from W = 0 on the "
        "sidebar's problem."
    )


def controls() -> tuple[list, float, int, float, float, str]:
    """(optimizers, p of ℓp-MD, steps, step-size multiplier, threshold, heat map measure);
    stops the page when no optimizer is picked."""
    # the picker has a row of its own: in a narrow column its chips cut the names short
    names = st.multiselect(
        "optimizers",
        list(THEORY),
        default=["ngd", "nmd", "sign", "spectral"],
        format_func=lambda o: THEORY[o][0],
        key="opt_names",
        **BOUND,
    )
    c = st.columns(4)
    p = c[0].number_input("p (ℓp-MD)", 1.1, 4.0, 1.5, 0.05, key="opt_p", **BOUND)
    steps = c[1].selectbox(
        "steps", [500, 1000, 2000, 5000, 10000], index=2, key="opt_steps", **BOUND
    )
    scale = c[2].number_input(
        "step-size × ",
        0.01,
        100.0,
        1.0,
        key="opt_scale",
        **BOUND,
        help="multiplies every optimizer's default step size",
    )
    thr = c[3].selectbox("threshold", [0.9, 0.99, 0.999], index=1, key="opt_thr", **BOUND)
    measure = st.radio(
        "heat map",
        ["correlation", "margin ratio"],
        horizontal=True,
        key="opt_measure",
        **BOUND,
        help="margin ratio = 1 iff W/‖W‖ solves that "
        "norm's SVM — fair also where the SVM is not unique (ℓ∞, spectral)",
    )
    if not names:
        st.info("Pick at least one optimizer.")
        st.stop()
    return names, float(p), steps, scale, thr, measure


def selected_tokens(sel: dict) -> None:
    """Each optimizer's selected tokens α (argmax of its final W) and whether they agree."""
    distinct = len(set(sel.values()))
    st.markdown(
        "**Selected tokens** α (argmax of each final W) — "
        + (
            "all optimizers select the same tokens."
            if distinct == 1
            else f"the optimizers **differ**: {distinct} distinct selections."
        )
    )
    st.dataframe(
        pd.DataFrame(list(sel.items()), columns=["optimizer", "α"]), hide_index=True, key="opt_sel"
    )
