"""Token selection, live: GD on the sidebar's problem, watched as it becomes an SVM."""

import numpy as np
import streamlit as st

from attsvm import live
from ui import cache, export_ui
from ui.sidebar import specs
from ui.views import playground as view
from ui.widgets import (
    build,
    check_gd,
    explained,
    optimal_or_warn,
    settings_caption,
    stop_if_one_token,
)

TICK_S = 0.35  # seconds between live frames while playing

view.intro()
pspec, tspec = specs()
settings_caption(pspec, tspec)
prob = build(pspec)
if prob.queries != "single":  # the sidebar never sets this; the Sequences page does
    st.info("This page shows single-query problems; see *Sequences and causal attention*.")
    st.stop()
stop_if_one_token(
    prob,
    "**T = 1: nothing to select.** Each sequence has one token, so its "
    "softmax weight is always 1, the loss gradient is exactly 0 and W "
    "never moves; every SVM constraint set is empty (W^mm = 0). Choose "
    "T ≥ 2 in the sidebar.",
)
check_gd(prob, tspec)

view.start(pspec, tspec, prob)
playing = view.controls(pspec, tspec, prob)


@st.fragment(run_every=TICK_S if playing else None)
def live_view():
    run = view.tick(prob, tspec, playing)
    k_shown = view.timeline(run, playing)
    last = int(run["steps"][-1])
    j = int(np.searchsorted(run["steps"], k_shown))
    traj = live.as_trajectory(run)
    alpha = run["probs"][-1].argmax(-1)  # GD's selection now
    norm = tspec.norm
    opt = optimal_or_warn(prob, "No unique optimal token, so no global SVM")
    with explained():
        sol = {nm: cache.svm(pspec, tuple(int(a) for a in alpha), nm) for nm in ("fro", "nuc")}
        kind = cache.classify(pspec, tuple(int(a) for a in alpha), norm)

    right = view.verdict(run, traj, alpha, opt, sol, kind, norm, last)
    shown = view.panels(right, prob, tspec, run, traj, alpha, opt, sol, norm, j, k_shown)
    export_ui.export_button(
        key="pg_export",
        problem=prob,
        page="Token selection",
        specs=(pspec, tspec),
        charts=shown,
        solutions=sol,
        run=traj if last > 0 else None,
        train=tspec.train_kwargs(prob),
        init=tspec.init_for(prob),
    )


live_view()

view.notes(prob)
