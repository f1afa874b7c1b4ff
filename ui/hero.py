"""The Overview's hero: the paper's 2-D instance (arXiv 2308.16898, Figure 1), GD on W and on
K Qᵀ drawing their paths W(k) z_i toward the two SVMs' rays, played once on arrival and
replayable. One cached library call (`experiments.run("geometry-1")`, shared by every
session), then a dozen small chart frames."""

from __future__ import annotations

import time

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from attsvm import experiments

from . import about, hosted

FRAMES = (0, 25, 100, 275, 600, 1300, 2000)
# Each frame replaces the chart and the browser embeds it anew; frames that come faster
# than it draws them only delay the first picture. Returning visitor, the Overview's first
# chart (benchmarks/first_look.py, medians of 7, two runs each): 3.8 s with twelve frames
# 0.12 s apart, 2.8-3.1 s with these seven, the first left 0.6 s to draw.
FIRST_PAUSE_S, TICK_S = 0.6, 0.2
PLAYED = "_hero_played"
LABEL = {"W": "GD on W", "KQ": "GD on K Qᵀ"}
SVM = {"fro": "W^mm (Frobenius)", "nuc": "W^mm_* (nuclear)"}


@st.cache_data(max_entries=1, ttl=24 * 3600, show_spinner="Running GD on the paper's 2-D data…")
@hosted.metered
def hero_data() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict]:
    """(paths every 25th step, SVM rays, tokens, final correlations) of geometry-1."""
    res = experiments.run("geometry-1")
    paths = res.frames["paths"]
    paths = paths[(paths.step % 25 == 0) | paths.step.isin(FRAMES)]
    corr = res.frames["correlation"]
    last = corr[corr.step == corr.step.max()].set_index(["param", "svm"])["corr"]
    return (
        paths.reset_index(drop=True),
        res.frames["rays"],
        res.frames["tokens"],
        {k: float(v) for k, v in last.items()},
    )


def chart(paths: pd.DataFrame, rays: pd.DataFrame, tokens: pd.DataFrame, step: int):
    """Paths up to `step` on fixed axes (the whole run's extent), rays dashed."""
    lim = float(np.abs(paths[["x", "y"]].to_numpy()).max()) * 1.05
    scale = alt.Scale(domain=[-lim, lim])
    now = paths[paths.step <= step].assign(GD=lambda d: d["param"].map(LABEL))
    ray = (
        alt.Chart(rays.assign(SVM=rays["svm"].map(SVM)))
        .mark_rule(strokeDash=[6, 3], strokeWidth=2, opacity=0.8)
        .encode(
            x=alt.X("x0:Q", scale=scale, title="(W(k) z_i)₁"),
            y=alt.Y("y0:Q", scale=scale, title="(W(k) z_i)₂"),
            x2="x:Q",
            y2="y:Q",
            color=alt.Color(
                "SVM:N", title="SVM ray (dashed)", scale=alt.Scale(range=["#1f77b4", "#d62728"])
            ),
        )
    )
    path = (
        alt.Chart(now)
        .mark_line(strokeWidth=2.5)
        .encode(
            x=alt.X("x:Q", scale=scale),
            y=alt.Y("y:Q", scale=scale),
            detail="query:N",
            order="step:Q",
            color=alt.Color(
                "GD:N", title="path (solid)", scale=alt.Scale(range=["#d62728", "#1f77b4"])
            ),
        )
    )
    tok = tokens.assign(
        x=tokens.x * lim / 2,
        y=tokens.y * lim / 2,
        kind=np.where(tokens.optimal, "optimal token", "token"),
    )
    pts = (
        alt.Chart(tok)
        .mark_point(filled=True, size=60, color="#666")
        .encode(
            x=alt.X("x:Q", scale=scale),
            y=alt.Y("y:Q", scale=scale),
            shape=alt.Shape("kind:N", title=None),
        )
    )
    return (
        (ray + path + pts)
        .resolve_scale(color="independent")
        .properties(
            width=430, height=400, title=f"step {step:,}: GD paths W(k) z_i against the SVM rays"
        )
    )


@st.cache_data(max_entries=1, ttl=24 * 3600, show_spinner=False)
def frames() -> list[dict]:
    """The Vega-Lite spec of every frame of `FRAMES`, built once per server: building and
    serializing the twelve Altair charts took ≈ 1.1 s of server CPU per visit, spent while
    the visitor's browser was drawing the first frames."""
    paths, rays, tokens, _ = hero_data()
    return [chart(paths, rays, tokens, step).to_dict() for step in FRAMES]


def render() -> None:
    """Draw the hero; play it once per session, then on "Replay"."""
    corr = hero_data()[3]
    specs = frames()
    left, right = st.columns([3, 2], vertical_alignment="center")
    box = left.empty()
    with right:
        st.markdown(
            "**Watch it happen.** Two sequences of three 2-D tokens, one query each (the "
            "paper's Figure 1). As gradient descent runs, W(k) z_i grows without bound, and "
            "its *direction* settles on a max-margin SVM ray (dashed):"
        )
        st.markdown(
            f"- GD on **W** → the Frobenius-norm SVM W^mm (corr {corr[('W', 'fro')]:.4f} at "
            f"step 2,000)\n- GD on **K Qᵀ** → the nuclear-norm SVM W^mm_* (corr "
            f"{corr[('KQ', 'nuc')]:.4f})"
        )
        st.caption(
            "Same data, two parameterizations, two limits. Grey marks are the tokens "
            "(scaled), ● the optimal token of each sequence. The Geometry page lets "
            "you edit this data."
        )
        replay = st.button("Replay", key="hero_replay", icon=":material/replay:")
        about.explain(st, "hero")
    play = replay or not st.session_state.get(PLAYED)
    st.session_state[PLAYED] = True
    for j in range(len(FRAMES)) if play else [len(FRAMES) - 1]:
        box.vega_lite_chart(spec=specs[j])
        if play and j < len(FRAMES) - 1:
            time.sleep(FIRST_PAUSE_S if j == 0 else TICK_S)
