"""A real transformer: every head of a pretrained model against the Att-SVM of its selections."""

import streamlit as st

from attsvm import pretrained
from ui.views import pretrained as view
from ui.widgets import BOUND, explained

view.intro()
try:
    pretrained.model_dir()
except pretrained.ModelMissing as exc:
    st.error(str(exc))
    st.stop()
table, n_sentences = view.heads_table()
if table is not None:
    st.altair_chart(view.charts.heads_grid(table))
    st.caption(
        f"cos_span per head on {n_sentences} built-in sentences "
        "(τ = 0.5; `python -m attsvm audit`); the tooltip gives the baselines' range."
    )
c = st.columns([1, 1, 1])
layer = c[0].selectbox("layer", list(range(6)), index=0, key="pt_layer", **BOUND)
head = c[1].selectbox("head", list(range(12)), index=2, key="pt_head", **BOUND)
tau = c[2].number_input(
    "τ (keep a selection when its weight ≥ τ)", 0.05, 1.0, 0.5, 0.05, key="pt_tau", **BOUND
)
typed = st.text_area(
    "Sentences, one a line (the default: clauses of Proverbs, KJV)",
    view.EXAMPLE,
    key="pt_text",
    height=120,
    max_chars=2_000,
    **BOUND,
)
with explained():
    sents = view.parse(typed)
    res = view.audit(tuple(sents), int(layer), int(head), float(tau))
view.metrics(res)
shown = st.selectbox(
    "sentence shown",
    list(range(len(sents))),
    key="pt_shown",
    format_func=lambda i: f"{i + 1}: {sents[i][:60]}",
    **BOUND,
)
view.panels(res, int(shown))
st.info(
    "**Reading it.** The head satisfies its own constraints by construction (each "
    "selection is its own argmax), so what matters is the *direction*: cos_span near 1 "
    "means W_h, seen through these constraints, points like the max-margin separator; "
    "near the baselines means no more aligned than chance. Diffuse heads (low coverage) "
    "and [CLS]/[SEP] sinks give few or trivial constraints.",
    icon=":material/info:",
)
