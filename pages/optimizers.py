"""Optimizer → norm: race several update rules from W = 0 and see which Att-SVM each one's
direction approaches (docs/followups.md §5: which cells are theorems, which are open)."""
import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from attsvm import limits
from attsvm.experiments.lp_mirror_descent import default_lr
from attsvm.metrics import correlation
from attsvm.svm import constraint_rows, matrix_norm
from ui import about, cache
from ui.sidebar import specs
from ui.widgets import BOUND, build, check_gd, check_svm, explained

st.title("Optimizer → norm")
st.markdown("Each optimizer has its own implicit bias: its W(k)/‖W(k)‖ approaches the "
            "attention SVM of *its* norm. All runs train the combined W from W = 0 on the "
            "sidebar's problem.")
# optimizer: (label, the norm theory names, status, citation)
THEORY = {
    "gd": ("GD", "fro", "proved (local)", "arXiv 2308.16898 §3"),
    "ngd": ("NGD", "fro", "proved (global tokens, data settings)", "arXiv 2402.05738"),
    "polyak": ("Polyak", "fro", "proved (global tokens, data settings)", "arXiv 2402.05738"),
    "md": ("ℓp-MD", "lp", "proved (local)", "arXiv 2410.14581"),
    "nmd": ("normalized ℓp-MD", "lp", "proved for MD (local); normalized: the authors' code",
            "arXiv 2410.14581"),
    "sign": ("signGD", "max", "open for attention (linear models: 2502.04664, 1802.08246)", "—"),
    "spectral": ("spectral descent", "spectral", "open for attention (linear: 2502.04664)", "—"),
}
c = st.columns(5)
names = c[0].multiselect("optimizers", list(THEORY), default=["ngd", "nmd", "sign", "spectral"],
                         format_func=lambda o: THEORY[o][0], key="opt_names", **BOUND)
p = c[1].number_input("p (ℓp-MD)", 1.1, 4.0, 1.5, 0.05, key="opt_p", **BOUND)
steps = c[2].selectbox("steps", [500, 1000, 2000, 5000, 10000], index=2, key="opt_steps",
                       **BOUND)
scale = c[3].number_input("step-size × ", 0.01, 100.0, 1.0, key="opt_scale", **BOUND,
                          help="multiplies every optimizer's default step size")
thr = c[4].selectbox("threshold", [0.9, 0.99, 0.999], index=1, key="opt_thr", **BOUND)
measure = st.radio("heat map", ["correlation", "margin ratio"], horizontal=True,
                   key="opt_measure", **BOUND, help="margin ratio = 1 iff W/‖W‖ solves that "
                   "norm's SVM — fair also where the SVM is not unique (ℓ∞, spectral)")
if not names:
    st.info("Pick at least one optimizer.")
    st.stop()
pspec, tspec = specs()
prob = build(pspec)
if prob.head != "linear" and "polyak" in names:   # L* = (1/n) Σ ℓ(γ*) needs the linear head
    st.warning("Polyak needs L* in closed form (linear head): left out for this head.")
    names = [o for o in names if o != "polyak"] or st.stop()
# default step sizes: ‖W‖ of order 10²–10³ after `steps` (normalized rules move ≈ η per step)
LR = dict(gd=1.0, ngd=300 / steps, polyak=0.5, md=1.0, nmd=default_lr(p) * 15000 / steps,
          sign=30 / steps, spectral=100 / steps)
runs = tuple((o, o, LR[o] * scale, float(p) if o in ("md", "nmd") else None) for o in names)
NORMS = [("fro", None, "Frobenius"), ("nuc", None, "nuclear"), ("lp", float(p), f"ℓ{p:g}"),
         ("max", None, "ℓ∞ (max)"), ("spectral", None, "spectral")]
check_gd(prob, tspec.with_(param="W"), runs=len(names), steps=steps, svms=())
check_svm(len(names) * len(NORMS), prob, norm="nuc")
with explained():
    race = cache.optimizer_race(pspec, runs, steps)
Qv, _, mask = prob.query_view()
rows, sel, grow, reach = [], {}, [], []
for o in names:
    k, W = race[o]
    a = np.where(mask[None], np.einsum("ntd,de,nke->nkt", prob.X, W[-1], Qv), -np.inf)
    alpha = a.argmax(-1) if Qv.shape[1] > 1 else a.argmax(-1)[:, 0]
    sel[THEORY[o][0]] = " ".join(map(str, np.ravel(alpha)))
    grow.append(pd.DataFrame({"step": k[1:], "‖W‖_F": np.linalg.norm(W[1:], axis=(1, 2)),
                              "optimizer": THEORY[o][0]}))
    A, _ = constraint_rows(prob, alpha)
    key = tuple(tuple(r) for r in alpha.tolist()) if alpha.ndim == 2 else tuple(alpha.tolist())
    for norm, q, label in NORMS:
        with explained():
            sol = cache.svm_norm(pspec, key, norm, q)
        if not sol.feasible:
            rows.append(dict(optimizer=THEORY[o][0], norm=label, value=np.nan))
            continue
        cor = correlation(W[1:], sol.W)                          # (k,)
        ratio = (A @ W[-1].ravel()).min() / matrix_norm(W[-1], norm, q) * sol.objective
        rows.append(dict(optimizer=THEORY[o][0], norm=label,
                         value=cor[-1] if measure == "correlation" else ratio))
        if norm == THEORY[o][1]:
            hit = np.nonzero(cor >= thr)[0]
            reach.append(dict(optimizer=THEORY[o][0], target=label,
                              steps=f"{k[1:][hit[0]]:,}" if len(hit) else f"> {steps:,}",
                              status=THEORY[o][2], citation=THEORY[o][3]))
heat = pd.DataFrame(rows)
base = alt.Chart(heat).encode(x=alt.X("norm:N", sort=[n[2] for n in NORMS], title="Att-SVM norm",
                                      axis=alt.Axis(labelAngle=0)),
                              y=alt.Y("optimizer:N", title=None))
st.altair_chart((base.mark_rect().encode(color=alt.Color("value:Q", title=measure,
                                                         scale=alt.Scale(scheme="viridis")))
                 + base.mark_text().encode(text=alt.Text("value:Q", format=".4f")))
                .properties(title=f"{measure} of W({steps:,}) with W^mm_α in each norm, α = its "
                            "own final selection", height=45 * heat.optimizer.nunique() + 110))
about.explain(st, "optimizers-heat")
st.markdown(f"**Steps to corr ≥ {thr:g} with the SVM theory names** "
            "(status per docs/followups.md §5)")
st.dataframe(pd.DataFrame(reach), hide_index=True, key="opt_reach")
distinct = len(set(sel.values()))
st.markdown("**Selected tokens** α (argmax of each final W) — "
            + ("all optimizers select the same tokens." if distinct == 1 else
               f"the optimizers **differ**: {distinct} distinct selections."))
st.dataframe(pd.DataFrame(list(sel.items()), columns=["optimizer", "α"]), hide_index=True,
             key="opt_sel")
st.altair_chart(alt.Chart(pd.concat(grow)).mark_line().encode(
    x="step:Q", y=alt.Y("‖W‖_F:Q", scale=alt.Scale(type="log")), color="optimizer:N")
    .properties(title="‖W(k)‖_F growth", height=220))
about.explain(st, "optimizers-growth")
st.caption("Step sizes: " + ", ".join(f"{THEORY[o][0]} {lr:.3g}" for o, _, lr, _ in runs)
           + f". Budget mode: {limits.mode()}. Sign and spectral on attention are open "
           "questions: their cells report what is measured here, not a theorem.")
