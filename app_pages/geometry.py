"""Geometry in 2-D: tokens, queries, GD paths of W(k) z_i for W and K Qᵀ, and both SVMs."""

import streamlit as st

import attsvm
from attsvm.config import ProblemSpec
from ui import cache
from ui.sidebar import specs
from ui.views import geometry as view
from ui.widgets import BOUND, explained, train_both

view.intro()
pspec_sb, tspec_sb = specs()
c1, c2, c3, c4, c5 = st.columns([3, 1, 1, 1, 3])
source = c1.segmented_control(
    "Data",
    ["geometry-1", "geometry-2", "random"],
    key="geo_src",
    default="geometry-1",
    required=True,
    **BOUND,
    help="geometry-1: the early paper figure (n=2, T=3); "
    "geometry-2: the later one (n=2, T=5); random: d = 2 "
    "Gaussian data",
)
rnd = source == "random"
gn = c2.number_input("n", 1, 8, 2, key="geo_n", disabled=not rnd, **BOUND)
gT = c3.number_input("T", 1, 12, 4, key="geo_T", disabled=not rnd, **BOUND)
gseed = c4.number_input("seed", 0, 10_000, 0, key="geo_seed", disabled=not rnd, **BOUND)
init = c5.segmented_control(
    "Start",
    ["zero", "uniform"],
    key="geo_init",
    default="zero",
    required=True,
    **BOUND,
    help="**zero**: W = 0 (K = 0.1·N(0, I), Q = 0), as the paper's "
    "figures; **uniform**: U(±1/√d) entries",
)
base = (
    ProblemSpec(n=int(gn), T=int(gT), d=2, seed=int(gseed), attention="cross")
    if rnd
    else ProblemSpec(source=source)
)
with explained():
    prob0 = base.build()
tag = f"{source}_{gn}_{gT}_{gseed}" if rnd else source
pspec = view.edited_spec(prob0, base, tag=tag, attention=pspec_sb.attention)
with explained():
    prob = pspec.build()
    opt = attsvm.optimal_tokens(prob)

tspec = tspec_sb.with_(init=init, m=None)
runs = train_both(pspec, prob, tspec, labels=("W", "(K,Q)"))
with explained():
    fro, nuc = cache.svm(pspec, None, "fro"), cache.svm(pspec, None, "nuc")
sols = {"W^mm z_i": fro, "W^mm_* z_i": nuc}
if prob.T == 1:
    st.info(
        "T = 1: every sequence has a single token, so there is nothing to select and "
        "no SVM constraint; W stays where it starts."
    )
if not fro.feasible:
    st.warning(
        f"**Att-SVM is infeasible** for the optimal tokens (solver: `{fro.status}`): "
        "no W gives every optimal token a margin of 1 over the others. In d = 2 this "
        "is common once a sequence has more than a few tokens — the T − 1 differences "
        "x_opt − x_t must all lie on one side of a line through the origin after "
        "mapping by the query. GD still runs: its selection is reported below."
    )

view.numbers(runs, fro, nuc, opt)
view.pictures(prob, opt, runs, fro, nuc, sols, tspec, init)
