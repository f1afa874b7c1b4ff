"""Nonlinear heads: several tokens selected; the generalized SVM W^fin + R·W^dir vs GD."""
import numpy as np
import pandas as pd
import streamlit as st

import attsvm
from attsvm_charts import explorer as charts, frames
from ui import cache, export_ui
from ui.sidebar import specs
from attsvm.config import ProblemSpec
from ui.widgets import BOUND, build, check_gd, explained

st.title("Nonlinear heads: selecting several tokens")
st.markdown(
    "With an MLP head the best output may mix tokens, so the softmax need not become "
    "one-hot: per sequence a set O_i keeps positive weight and the rest is masked. The paper "
    "proposes (and checks numerically; it is not a theorem) that GD then follows")
st.latex(r"W(k)\ \approx\ W^{fin}+R_k\,W^{dir},\qquad R_k\to\infty,")
st.markdown(
    "where **W^dir** separates O_i from the masked tokens with margin 1 (equal logits inside "
    "O_i) and **W^fin** is the min-norm W reproducing the finite log-ratios of the softmax "
    "inside O_i. The one-token SVM (α_i = argmax softmax) is the wrong model once some |O_i| "
    "> 1.")
st.info("This page uses its own small problem (defaults: the paper's n = 3, T = 4, d = 4, "
        "and a seed whose relu head keeps every token of one sequence while the others "
        "select one); step size, loss, "
        "normalization, parameterization and initialization come from the sidebar.",
        icon=":material/info:")

_, tspec_sb = specs()
c = st.columns(8)
head = c[0].selectbox("head", ["relu", "quadratic"], key="nl_head", **BOUND,
                      help="relu: f = 1ᵀrelu(VᵀXᵀs); quadratic: f = vᵀr − λ‖r‖²")
lam = c[1].number_input("λ", 0.0, 100.0, 1.0, step=0.1, key="nl_lam", **BOUND,
                        disabled=head != "quadratic")
n = c[2].number_input("n", 1, 16, 3, key="nl_n", **BOUND)
T = c[3].number_input("T", 1, 16, 4, key="nl_T", **BOUND)
d = c[4].number_input("d", 1, 32, 4, key="nl_d", **BOUND)
seed = c[5].number_input("seed", 0, 100_000, 8, key="nl_seed", **BOUND)
steps = c[6].number_input("steps", 100, 20_000, 2000, step=500, key="nl_steps", **BOUND)
thr = c[7].number_input("O_i threshold", 1e-9, 0.5, 1e-3, format="%.0e", key="nl_thr",
                        **BOUND, help="O_i = {t : s_it > threshold} at the last iterate "
                                      "(the paper: 1e-3)")
pspec = ProblemSpec(n=int(n), T=int(T), d=int(d), seed=int(seed), head=head, lam=float(lam))
tspec = tspec_sb.with_(steps=int(steps))
prob = build(pspec)
if prob.T == 1:
    st.info("T = 1: there is a single token per sequence, nothing to select or mask.")
    st.stop()
check_gd(prob, tspec)
with explained():
    res = cache.generalized(pspec, tspec, float(thr))
run, gen, one = res["run"], res["gen"], res["one"]
norm = "Frobenius" if tspec.param == "W" else "nuclear"

# -- diagnostics -------------------------------------------------------------------------
s = run.probs[-1]                                              # (n, T)
sizes = gen.selected.sum(1)
masked = ~gen.selected
if not masked.any():
    st.warning("**Nothing is masked yet**: every token keeps weight above the threshold, so "
               "GD is still near a finite solution and W^dir has no constraint (W^dir = 0). "
               "The paper rejects such runs; try more steps or another seed.")
elif np.all(sizes == 1):
    st.info("Every O_i is a single token here: the generalized SVM reduces to the one-token "
            "SVM (W^fin = 0, W^dir = W^mm_α). Try another seed or the quadratic head with a "
            "larger λ to see several tokens kept.")
amb = (s > 1e-6) & (s <= thr)
if amb.any():
    st.warning(f"**O_i is ambiguous**: {int(amb.sum())} softmax weight(s) lie in (1e-6, "
               f"{thr:g}] — neither clearly kept nor clearly masked (the paper's filter rejects "
               "such runs). Run longer or raise the threshold.")
if not gen.feasible:
    st.warning(f"The W^dir problem is infeasible (solver: `{gen.status}`): no W separates "
               "the kept tokens from the masked ones with equal logits inside O_i.")

# -- correlation curves ------------------------------------------------------------------
refs = frames.generalized_gaps(run, gen, one)
cols = st.columns(len(refs) or 1)
for col, (name, v) in zip(cols, refs.items(), strict=False):
    col.metric(f"1 − corr with {name}", f"{v[-1]:.2e}")
if refs:
    cdf = pd.concat([pd.DataFrame({"step": run.steps, "1 − corr": np.clip(v, 1e-12, None),
                                   "reference": name}) for name, v in refs.items()])
    st.altair_chart(charts.curves(
        cdf, y="1 − corr", color="reference", log_y=True, x_max=int(steps), fmt=".3g",
        title=f"1 − corr(W(k), ·) — {norm} SVMs, {head} head",
        y_title="1 − correlation",
        colors={"W^fin + R_k·W^dir (generalized SVM)": "#2e7d32", "W^dir alone": "#1f77b4",
                "one-token SVM W^mm_α": "#d62728"}))
    st.caption("R_k is fitted by least squares at every k. The paper's ordering (500 runs, "
               "d = 4): generalized SVM ≈ 0.035 < W^dir ≈ 0.07 < one-token ≈ 0.16 — a single "
               "run varies around that.")

# -- which tokens are kept ---------------------------------------------------------------
g = attsvm.token_scores(prob)
best = g.argmax(1)
seq, tok = np.meshgrid(np.arange(prob.n), np.arange(prob.T), indexing="ij")
pm = pd.DataFrame({"seq": seq.ravel(), "token": tok.ravel(), "prob": s.ravel(),
                   "selected": gen.selected.ravel(),
                   "optimal": (tok == best[:, None]).ravel()})
left, right = st.columns([3, 2])
left.altair_chart(charts.prob_map(pm, title="Final softmax: □ kept (O_i), ★ best single token"))
right.dataframe(pd.DataFrame({"sequence": np.arange(prob.n), "|O_i|": sizes,
                              "kept tokens": [", ".join(map(str, np.nonzero(r)[0]))
                                              for r in gen.selected],
                              "largest masked weight": [f"{s[i][masked[i]].max():.1e}"
                                                        if masked[i].any() else "—"
                                                        for i in range(prob.n)]}),
                hide_index=True, key="nl_sets")
right.caption(f"R at the last iterate = {gen.R:.3g}" if gen.R is not None else
              "No R: the generalized SVM is not available for this run.")
export_ui.export_button(
    key="nl_export", problem=prob, page="Nonlinear heads", specs=(pspec, tspec), run=run,
    solutions={"one_token": one}, init=tspec.init_for(prob), tables={"final_softmax": pm})
