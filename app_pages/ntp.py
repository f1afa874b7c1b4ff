"""Next-token prediction (arXiv 2403.08081): token-priority graphs, the Graph-SVM and
"hard retrieval, soft composition", live."""

import streamlit as st

from attsvm import ntp
from attsvm.ntp import session
from attsvm_charts import ntp as ntp_charts
from ui import about, cache, export_ui
from ui.views import ntp as view
from ui.widgets import explained

view.intro()
K, d, seed, steps, lr, shape = view.controls()
left, right = st.columns([1, 2])
text = view.sequences(left, shape, K, d, seed)
with explained():
    data = session.Sequences.parse(text, K=K, d=d, seed=seed)
    prob = data.problem()
    view.check_budget(prob, steps)
g = ntp.priority_graphs(prob)
changes = session.scc_changes(st.session_state.get("ntp_prev_scc"), g.scc)
st.session_state["ntp_prev_scc"] = g.scc
with right:
    heat = view.graphs(g, changes)

svm = cache.graph_svm(data)
view.svm_verdict(svm)
W_svm = svm.W if svm.feasible else None
key = (data, steps, lr)
cols = st.columns([3, 2])
slots = [cols[0].empty(), cols[1].empty(), cols[1].empty()]
about.explain(st, "ntp-runs")


def show(res):
    df = session.frames(prob, res, W_svm)
    for slot, chart in zip(slots, ntp_charts.run_charts(df, steps), strict=True):
        slot.altair_chart(chart)
    return df


W0 = ntp.default_init(prob, seed=seed)
runs = cache.ntp_runs()  # shared by sessions: a default opens at once
res = runs.get(key)
if res is None:
    bar = st.progress(0.0, text="Normalized GD on W and W^fin…")

    def live(res):
        bar.progress(res["tr"].steps[-1] / steps, text=f"GD: step {res['tr'].steps[-1]:,}")
        show(res)

    res = view.live_run(prob, W0, steps, lr, on_chunk=live)
    runs.put(key, res)
    bar.empty()
df = show(res)
st.markdown(session.summary(prob, df, steps))
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
