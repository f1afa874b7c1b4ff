"""Next-token prediction (arXiv 2403.08081): token-priority graphs, the Graph-SVM and
"hard retrieval, soft composition", live."""

import numpy as np
import streamlit as st

from attsvm import ntp
from attsvm.ntp import session
from attsvm_charts import ntp as ntp_charts
from ui import about, cache, export_ui
from ui.views import ntp as view
from ui.widgets import BOUND, explained

view.intro()
c = st.columns(6)
K = c[0].number_input("vocabulary K", 2, 16, 6, key="ntp_K", **BOUND)
d = c[1].number_input("dimension d", 1, 32, 8, key="ntp_d", **BOUND)
seed = c[2].number_input(
    "seed", 0, 10_000, 0, key="ntp_seed", **BOUND, help="vocabulary, W₀ and the random sequences"
)
steps = c[3].number_input("steps", 200, 20_000, 4000, step=200, key="ntp_steps", **BOUND)
lr = c[4].number_input("lr (normalized GD)", 0.001, 1.0, 0.01, format="%.3f", key="ntp_lr", **BOUND)
shape = c[5].text_input("random n × T", "6x4", key="ntp_shape", **BOUND)


def draw():
    with explained():
        st.session_state["ntp_seqs"] = session.random_text(shape, int(K), int(d), int(seed))


if "ntp_seqs" not in st.session_state and "ntp_seqs" not in st.query_params:
    draw()
left, right = st.columns([1, 2])
text = left.text_area(
    "Sequences: token ids, then ': label' (the last id is the query)",
    key="ntp_seqs",
    height=200,
    **BOUND,
)
left.button("Random sequences (with a cycle)", key="ntp_draw", on_click=draw)
with explained():
    tokens, labels = session.parse_sequences(text)
    prob = ntp.NTPProblem(
        E=session.vocabulary(int(K), int(d), int(seed)), tokens=tokens, labels=labels
    )
    view.check_budget(prob, int(steps))
g = ntp.priority_graphs(prob)
changes = session.scc_changes(st.session_state.get("ntp_prev_scc"), g.scc)
st.session_state["ntp_prev_scc"] = g.scc
with right:
    st.markdown(
        "**Token-priority graphs** (SCCs top first):  \n" + "  \n".join(session.describe(g))
    )
    if changes:
        st.info("**What changed:** " + "; ".join(changes), icon=":material/compare_arrows:")
    heat = ntp_charts.alt.concat(
        *[
            ntp_charts.priority_heatmap(
                ntp_charts.graph_frame(g.adj, g.scc, k), title=f"G^({k})", size=140
            )
            for k in np.flatnonzero(g.present)
        ],
        columns=3,
    )
    st.altair_chart(heat)
    about.explain(st, "ntp-graphs")

seqs = session.key_of(prob)  # the sequences, hashable: one cache key
svm = cache.graph_svm(int(K), int(d), int(seed), *seqs)
if svm.feasible:
    st.success(
        f"Graph-SVM: `{svm.status}`, ‖W^svm‖_F = {svm.objective:.5g}, "
        f"{len(svm.A_ineq)} margin and {len(svm.A_eq)} equality constraints; "
        f"KKT residual {max(ntp.kkt_residuals(svm).values()):.1e}."
    )
else:
    st.error(
        f"**The Graph-SVM is infeasible** (`{svm.status}`): no W enforces every "
        "priority with margin 1, so there is no W^svm direction to compare with. "
        "GD still runs below; choose d ≥ K for independent embeddings."
    )
W_svm = svm.W if svm.feasible else None
key = (*seqs, int(K), int(d), int(seed), int(steps), float(lr))
cols = st.columns([3, 2])
slots = [cols[0].empty(), cols[1].empty(), cols[1].empty()]
about.explain(st, "ntp-runs")


def show(res):
    df = session.frames(prob, res, W_svm)
    for slot, chart in zip(slots, ntp_charts.run_charts(df, int(steps)), strict=True):
        slot.altair_chart(chart)
    return df


W0 = ntp.default_init(prob, seed=int(seed))
runs = cache.ntp_runs()  # shared by sessions: a default opens at once
res = runs.get(key)
if res is None:
    bar = st.progress(0.0, text="Normalized GD on W and W^fin…")

    def live(res):
        bar.progress(res["tr"].steps[-1] / int(steps), text=f"GD: step {res['tr'].steps[-1]:,}")
        show(res)

    res = view.live_run(prob, W0, int(steps), float(lr), on_chunk=live)
    runs.put(key, res)
    bar.empty()
df = show(res)
st.markdown(session.summary(prob, df, int(steps)))
att = ntp_charts.attention_bars(
    session.attention_frame(prob, res["tr"].probs[-1]),
    title="Final attention per sequence (red: its top SCC)",
)
st.altair_chart(att)
about.explain(st, "ntp-attention")
export_ui.export_button(
    key="ntp_export",
    problem=None,
    page="Next-token prediction",
    charts={"graphs": heat, "attention": att},
    tables=session.tables(prob, df),
)
