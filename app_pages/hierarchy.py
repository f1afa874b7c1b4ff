"""Deeper: a hierarchy of SVMs (open): L layers × H heads trained live, each head against
the Att-SVM of its own final selection on its own inputs (docs/hierarchy.md)."""

import pandas as pd
import streamlit as st

from attsvm import stack_live
from attsvm_charts import hierarchy as charts
from ui import about, cache
from ui.views import hierarchy as view
from ui.widgets import BOUND, explained

view.intro()
c = st.columns(6)
L = c[0].number_input("layers L", 1, stack_live.MAX_LAYERS, 2, key="hier_L", **BOUND)
H = c[1].number_input("heads H", 1, stack_live.MAX_HEADS, 2, key="hier_H", **BOUND)
n = c[2].number_input("sequences n", 1, 32, 8, key="hier_n", **BOUND)
T = c[3].number_input("tokens T", 2, 16, 8, key="hier_T", **BOUND)
d = c[4].number_input("dimension d", 1, 32, 16, key="hier_d", **BOUND)
seed = c[5].number_input("seed", 0, 10_000, 0, key="hier_seed", **BOUND)
c = st.columns(5)
steps = c[0].number_input("steps", 100, 20_000, 2000, step=100, key="hier_steps", **BOUND)
lr = c[1].number_input("lr (normalized GD)", 0.001, 1.0, 0.1, format="%.3f", key="hier_lr", **BOUND)
values = c[2].selectbox(
    "values U",
    stack_live.VALUES,
    key="hier_values",
    **BOUND,
    help="shared: U = I/H for every head; random: orthogonal / H",
)
residual = c[3].checkbox("residual stream (ρ = 1)", True, key="hier_res", **BOUND)
causal = c[4].checkbox("causal", False, key="hier_causal", **BOUND)
with explained():
    spec = stack_live.StackSpec(
        layers=int(L),
        heads=int(H),
        n=int(n),
        T=int(T),
        d=int(d),
        seed=int(seed),
        steps=int(steps),
        lr=float(lr),
        residual=bool(residual),
        causal=bool(causal),
        values=values,
    ).checked()
    view.check_budget(spec)
prob = spec.problem()
top = st.columns([1, 2])
slots = [top[0].empty(), top[1].empty()]
about.explain(top[1], "hierarchy-live")


def show(run):
    slots[0].altair_chart(charts.loss(pd.DataFrame(dict(step=run.steps, loss=run.loss))))
    slots[1].altair_chart(
        charts.grid(
            stack_live.live_frame(prob, run),
            y="top_weight",
            title="Top attention weight per head",
            domain=[0, 1],
            y_title="top weight",
        )
    )


runs = cache.stack_runs()  # shared by sessions: a default opens at once
run = runs.get(spec)
if run is None:
    show(stack_live.start(spec))  # step 0 at once, while the first chunk compiles
    bar = st.progress(0.0, text="Normalized GD on every head…")

    def live(r):
        bar.progress(r.steps[-1] / spec.steps, text=f"GD: step {r.steps[-1]:,}")
        show(r)

    with explained():
        run = view.live_run(spec, on_chunk=live)
    runs.put(spec, run)
    bar.empty()
show(run)
with explained():
    audit = cache.stack_audit(spec, run)
st.markdown(stack_live.summary(prob, run, audit))
cos = charts.grid(
    stack_live.cos_frame(run, audit),
    y="cos",
    y_title="cos",
    title="cos(W^{l,h}(k), the Att-SVM of its own final selection)",
)
about.chart(st, cos, "hierarchy-cos")
st.dataframe(stack_live.head_table(audit, prob), hide_index=True)
about.chart(st, charts.last_layer(stack_live.last_layer_frame(prob, run, audit)), "hierarchy-last")
for layer in range(spec.layers - 1):
    about.chart(
        st, charts.early_layer(stack_live.early_layer_frame(audit, layer)), "hierarchy-early"
    )
