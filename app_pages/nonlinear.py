"""Nonlinear heads: several tokens selected; the generalized SVM W^fin + R·W^dir vs GD."""

import streamlit as st

from attsvm.config import ProblemSpec
from ui import cache, export_ui
from ui.sidebar import specs
from ui.views import nonlinear as view
from ui.widgets import BOUND, build, check_gd, explained, stop_if_one_token

view.intro()
_, tspec_sb = specs()
c = st.columns(8)
head = c[0].selectbox(
    "head",
    ["relu", "quadratic"],
    key="nl_head",
    **BOUND,
    help="relu: f = 1ᵀrelu(VᵀXᵀs); quadratic: f = vᵀr − λ‖r‖²",
)
lam = c[1].number_input(
    "λ", 0.0, 100.0, 1.0, step=0.1, key="nl_lam", **BOUND, disabled=head != "quadratic"
)
n = c[2].number_input("n", 1, 16, 3, key="nl_n", **BOUND)
T = c[3].number_input("T", 1, 16, 4, key="nl_T", **BOUND)
d = c[4].number_input("d", 1, 32, 4, key="nl_d", **BOUND)
seed = c[5].number_input("seed", 0, 100_000, 8, key="nl_seed", **BOUND)
steps = c[6].number_input("steps", 100, 20_000, 2000, step=500, key="nl_steps", **BOUND)
thr = c[7].number_input(
    "O_i threshold",
    1e-9,
    0.5,
    1e-3,
    format="%.0e",
    key="nl_thr",
    **BOUND,
    help="O_i = {t : s_it > threshold} at the last iterate (the paper: 1e-3)",
)
pspec = ProblemSpec(n=int(n), T=int(T), d=int(d), seed=int(seed), head=head, lam=float(lam))
tspec = tspec_sb.with_(steps=int(steps))
prob = build(pspec)
stop_if_one_token(prob, "T = 1: there is a single token per sequence, nothing to select or mask.")
check_gd(prob, tspec)
with explained():
    res = cache.generalized(pspec, tspec, float(thr))
run, gen, one = res["run"], res["gen"], res["one"]

view.diagnostics(run, gen, float(thr))
view.gaps(
    run,
    gen,
    one,
    steps=int(steps),
    head=head,
    norm="Frobenius" if tspec.param == "W" else "nuclear",
)
pm = view.kept_tokens(prob, run, gen)
export_ui.export_button(
    key="nl_export",
    problem=prob,
    page="Nonlinear heads",
    specs=(pspec, tspec),
    run=run,
    solutions={"one_token": one},
    init=tspec.init_for(prob),
    tables={"final_softmax": pm},
)
