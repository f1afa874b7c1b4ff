"""Geometry in 2-D: tokens, queries, GD paths of W(k) z_i for W and K Qᵀ, and both SVMs."""
import numpy as np
import pandas as pd
import streamlit as st

import attsvm
from attsvm_charts import explorer as charts, frames
from ui import cache, hosted, linkdata
from ui.sidebar import specs
from attsvm.config import ProblemSpec, custom_spec
from ui.widgets import BOUND, check_gd, explained

st.title("Geometry in 2-D")
st.markdown(
    "With d = 2 everything can be drawn. Each query z_i maps W to a vector W z_i in the token "
    "plane; token t gets the logit x_itᵀ(W z_i). GD on **W** drives W(k) z_i along the "
    "Frobenius SVM direction W^mm z_i, GD on **K Qᵀ** along the nuclear-norm direction "
    "W^mm_* z_i — the paper's two 2-D figures are the presets, and every token is editable.")

pspec_sb, tspec_sb = specs()
c1, c2, c3, c4, c5 = st.columns([3, 1, 1, 1, 3])
source = c1.segmented_control("Data", ["geometry-1", "geometry-2", "random"], key="geo_src",
                              default="geometry-1", required=True, **BOUND,
                              help="geometry-1: the early paper figure (n=2, T=3); "
                                   "geometry-2: the later one (n=2, T=5); random: d = 2 "
                                   "Gaussian data")
rnd = source == "random"
gn = c2.number_input("n", 1, 8, 2, key="geo_n", disabled=not rnd, **BOUND)
gT = c3.number_input("T", 1, 12, 4, key="geo_T", disabled=not rnd, **BOUND)
gseed = c4.number_input("seed", 0, 10_000, 0, key="geo_seed", disabled=not rnd, **BOUND)
init = c5.segmented_control("Start", ["zero", "uniform"], key="geo_init", default="zero",
                            required=True, **BOUND,
                            help="**zero**: W = 0 (K = 0.1·N(0, I), Q = 0), as the paper's "
                                 "figures; **uniform**: U(±1/√d) entries")
base = (ProblemSpec(n=int(gn), T=int(gT), d=2, seed=int(gseed), attention="cross")
        if rnd else ProblemSpec(source=source))
with explained():
    prob0 = base.build()

# -- editable data (edits travel in the link as `geo_data`, see ui/linkdata.py) ----------
n, T = prob0.n, prob0.T
tag = f"{source}_{gn}_{gT}_{gseed}" if rnd else source
arrays = (prob0.X, prob0.Y, prob0.Z, prob0.v)
link = st.query_params.get("geo_data")
if link is not None:
    try:
        ltag, *linked = linkdata.decode(link, max_n=8, max_T=12)
    except ValueError as exc:
        st.warning(f"Ignored the link's edited data: {hosted.escape_markdown(exc)}",
                   icon=":material/link_off:")
        hosted.drop_param("geo_data")
    else:
        if ltag == tag and linked[0].shape[:2] == (n, T):
            arrays = tuple(linked)
        else:                                 # edits of other data (the source changed)
            hosted.drop_param("geo_data")


def tables(X, Y, Z, v):
    return (pd.DataFrame({"sequence": np.repeat(np.arange(n), T),
                          "token": np.tile(np.arange(T), n),
                          "x₁": X[:, :, 0].ravel(), "x₂": X[:, :, 1].ravel()}),
            pd.DataFrame({"sequence": np.arange(n), "label Y": Y, "z₁": Z[:, 0],
                          "z₂": Z[:, 1]}),
            pd.DataFrame({"v₁": [v[0]], "v₂": [v[1]]}))


base_tables = tables(prob0.X, prob0.Y, prob0.Z, prob0.v)
tok, seq, vdf = tables(*arrays)
num = st.column_config.NumberColumn(format="%.4f")
with st.expander("Edit the tokens, queries, labels and v", expanded=link is not None,
                 key="geo_edit_box"):
    e1, e2, e3 = st.columns([3, 3, 2])
    tok_e = e1.data_editor(tok, key=f"geo_tok_{tag}", hide_index=True,
                           disabled=["sequence", "token"],
                           column_config={"x₁": num, "x₂": num})
    seq_e = e2.data_editor(seq, key=f"geo_seq_{tag}", hide_index=True, disabled=["sequence"],
                           column_config={"z₁": num, "z₂": num,
                                          "label Y": st.column_config.NumberColumn(
                                              help="+1 or −1", step=1)})
    v_e = e3.data_editor(vdf, key=f"geo_v_{tag}", hide_index=True,
                         column_config={"v₁": num, "v₂": num})
    st.caption("Token scores are γ_it = Y_i vᵀx_it; the optimal token (★) has the highest "
               "score in its sequence. Edits are kept in the page's URL: copy it to share "
               "them.")
edited = not all(a.equals(b) for a, b in zip((tok_e, seq_e, v_e), base_tables, strict=True))
if edited:
    mine = (tok_e[["x₁", "x₂"]].to_numpy(dtype=float).reshape(n, T, 2),
            seq_e["label Y"].to_numpy(dtype=float),
            seq_e[["z₁", "z₂"]].to_numpy(dtype=float),
            v_e[["v₁", "v₂"]].to_numpy(dtype=float)[0])
    if all(np.all(np.isfinite(a)) for a in mine):     # (a blank cell is reported below)
        st.query_params["geo_data"] = linkdata.encode(tag, *mine)
    pspec = custom_spec(*mine, attention=pspec_sb.attention)
    st.info("Showing your edited data.", icon=":material/edit:")
else:
    hosted.drop_param("geo_data")            # no edits (any more): nothing to carry
    pspec = base.with_(attention=pspec_sb.attention)
with explained():
    prob = pspec.build()
    opt = attsvm.optimal_tokens(prob)

tspec = tspec_sb.with_(init=init, m=None)
runs = {}
for param, label in (("W", "W"), ("KQ", "(K,Q)")):
    t = tspec.with_(param=param)
    check_gd(prob, t)
    with explained():
        runs[label] = cache.train(pspec, t)
with explained():
    fro, nuc = cache.svm(pspec, None, "fro"), cache.svm(pspec, None, "nuc")
sols = {"W^mm z_i": fro, "W^mm_* z_i": nuc}
if prob.T == 1:
    st.info("T = 1: every sequence has a single token, so there is nothing to select and "
            "no SVM constraint; W stays where it starts.")
if not fro.feasible:
    st.warning(f"**Att-SVM is infeasible** for the optimal tokens (solver: `{fro.status}`): "
               "no W gives every optimal token a margin of 1 over the others. In d = 2 this "
               "is common once a sequence has more than a few tokens — the T − 1 differences "
               "x_opt − x_t must all lie on one side of a line through the origin after "
               "mapping by the query. GD still runs: its selection is reported below.")

# -- numbers -----------------------------------------------------------------------------
cols = st.columns(4)
for col, (label, run) in zip(cols[:2], runs.items(), strict=True):
    sel = run.alpha
    same = np.array_equal(sel, opt)
    col.metric(f"GD on {label}: selection", "·".join(map(str, sel)),
               "= opt" if same else "≠ opt", delta_color="normal" if same else "inverse")
if fro.feasible:
    for col, (label, run) in zip(cols[2:], runs.items(), strict=True):
        c_f = attsvm.correlation(run.W[-1], fro.W) if np.any(run.W[-1]) else float("nan")
        c_n = attsvm.correlation(run.W[-1], nuc.W) if np.any(run.W[-1]) else float("nan")
        col.metric(f"{label}-GD: corr with W^mm / W^mm_*", f"{c_f:.4f} / {c_n:.4f}",
                   help="Each parameterization prefers its own norm: W-GD correlates best "
                        "with the Frobenius solution, K Qᵀ-GD with the nuclear one.")

# -- charts ------------------------------------------------------------------------------
show = st.segmented_control("Separating lines of", ["Frobenius", "nuclear"], key="geo_lines",
                            default="Frobenius", required=True, **BOUND,
                            help="the SVM whose lines and support tokens are drawn: "
                                 "W^mm (Frobenius) or W^mm_* (nuclear)")
sol = fro if show == "Frobenius" else nuc
tokens, lines, arrows = frames.geometry_tokens(prob, opt, sol, sols)
scale = st.segmented_control(
    "GD paths", ["raw", "direction"], key="geo_scale", default="raw", required=True, **BOUND,
    help="**raw**: W(k) z_i, as the paper draws them; **direction**: W(k) z_i / ‖W(k)‖_F, "
         "which converges to W^mm z_i / ‖W^mm‖_F (resp. the nuclear solution)")
paths, rays = frames.geometry_paths(prob, runs, sols, direction=scale == "direction")
left, right = st.columns(2)
left.altair_chart(charts.geometry_tokens(
    tokens, lines, arrows, title=f"Tokens, optimal ★, support ○, separating lines of "
          f"{'W^mm' if show == 'Frobenius' else 'W^mm_*'}"))
left.caption("Dotted: for each query, the line {x : xᵀ(W z_i) = x_optᵀ(W z_i) − ½}, halfway "
             "between the optimal token and the margin-1 level of its support tokens. "
             "Solid/dashed arrows: the directions W^mm z_i and W^mm_* z_i.")
right.altair_chart(charts.geometry_paths(
    paths, rays, axis="W z_i" if scale == "raw" else "W z_i/‖W‖",
    title="GD paths W(k) z_i (solid W, dashed K Qᵀ)"))
start = "W = 0 (K = 0.1·N(0, I), Q = 0)" if init == "zero" else "U(±1/√d)"
right.caption(f"{tspec.steps} steps of {'normalized' if tspec.normalized else 'plain'} GD, "
              f"η = {tspec.lr:g}, from {start}"
              ". Scroll to zoom, drag to pan. Thin lines: the SVM rays"
              + (" (in the direction view they end where W(k) z_i/‖W(k)‖ converges)."
                 if scale == "direction" else "."))
st.caption("Separating lines go through each sequence's own optimal token (the authors' "
           "second 2-D notebook assumes it is token 0, true only for its data). The "
           "geometry-2 preset uses the 4-decimal values printed from that notebook, whose "
           "draw order could not be recovered.")
