"""The "A real transformer" page's text and panels (Streamlit only; the numbers come from
`attsvm.pretrained` and `attsvm.audit`, the charts from `attsvm_charts.pretrained`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from attsvm import limits, pretrained
from attsvm_charts import pretrained as charts

from .. import hosted

# Typed sentences one audit may use, per mode (each also at most `pretrained.MAX_TOKENS`
# tokens): the audit's constraints grow like the squared sentence length.
CAPS = {"local": dict(sentences=12, tokens=64), "hosted": dict(sentences=4, tokens=32)}
EXAMPLE = "\n".join(pretrained.corpus(4))


def intro():
    st.title("A real transformer")
    st.markdown(
        "Every head of **all-MiniLM-L6-v2** (a pretrained BERT: 6 layers × 12 heads, run "
        "here in float64 without torch) scores key x_s against query x_t with the bilinear "
        "form W_h = W_Kᵀ[W_Q | b_Q]/√32. On a set of sentences, each query t *selects* the "
        "token its attention weight is largest on (kept when that weight ≥ τ). The Att-SVM "
        "W^mm of those selections (arXiv 2308.16898) is the smallest W separating each "
        "selected token from the others by margin 1. **cos_span** is the cosine between W_h "
        "and W^mm in the span of the constraints (the part of W_h those constraints can "
        "see). This measures **how max-margin-like a trained head is** on these sentences; "
        "it is **not a convergence test**: the model was trained with AdamW, weight decay "
        "and many layers, not by gradient descent on one head. Baselines on the same "
        "constraints (random matrices of the head's rank, the layer's other heads, shuffled "
        "selections) show what chance alignment looks like. See docs/pretrained.md."
    )


def heads_table() -> tuple[pd.DataFrame | None, int]:
    """The 72-head table and its sentence count: the results store's `pretrained-heads`
    entry when stored (ui.results), else the table shipped with attsvm."""
    from .. import results

    try:
        e = results.entry("pretrained-heads")
    except Exception:  # noqa: BLE001  (an unreadable store: the shipped table)
        e = None
    if e is not None and "heads" in e.result.frames:
        return e.result.frames["heads"], int(e.result.settings.get("sentences", 0))
    return pretrained.heads_table(), pretrained.HEADS_TABLE_SENTENCES


def parse(text: str) -> list[str]:
    """The typed sentences, one a line, within the mode's caps (ValueError otherwise)."""
    L = limits.current()
    limits.check_text(chars=len(text), words=len(text.split()))
    sents = [s.strip() for s in text.splitlines() if s.strip()]
    cap = CAPS.get(L.mode, CAPS["local"])
    if not sents:
        raise ValueError("type at least one sentence")
    if len(sents) > cap["sentences"]:
        raise ValueError(f"at most {cap['sentences']} sentences in {L.mode} mode; got {len(sents)}")
    model = pretrained.load()
    tokens, _ = model.tokenize(sents)
    for i, t in enumerate(tokens):
        if len(t) > cap["tokens"]:
            raise ValueError(
                f"sentence {i + 1} has {len(t)} tokens; at most {cap['tokens']} in {L.mode} mode"
            )
    return sents


@st.cache_data(max_entries=16, show_spinner="Auditing the head…")
def audit(sents: tuple[str, ...], layer: int, head: int, tau: float):
    hosted.check_session()
    model = pretrained.load()
    enc = model.encode(list(sents), layers=layer + 1)
    r = pretrained.audit_head(
        model, list(sents), layer=layer, head=head, tau=tau, encoding=enc, n_random=2, n_shuffled=1
    )
    from attsvm.audit import assemble

    keys = enc.inputs[layer]
    cons = assemble(keys, [pretrained.queries_of(x) for x in keys], r.alpha)
    W = model.head_matrix(layer, head)
    mh = mm = np.zeros(0)
    if r.svm is not None and r.svm.feasible:
        mh = cons.margins(W) * np.linalg.norm(r.svm.W) / np.linalg.norm(W)
        mm = cons.margins(r.svm.W)
    base = pd.DataFrame(
        [
            dict(
                kind=b.kind, baseline=b.label, cos=b.cos, cos_span=b.cos_span, satisfied=b.satisfied
            )
            for b in r.baselines or ()
        ]
    )
    return dict(
        audit=r,
        tokens=enc.tokens,
        attention=[A[head] for A in enc.attention[layer]],
        margins_head=mh,
        margins_svm=mm,
        baselines=base,
    )


def metrics(res):
    r = res["audit"]
    c = st.columns(5)
    c[0].metric("coverage", f"{r.coverage:.0%}", help="queries whose largest weight is ≥ τ")
    c[1].metric("constraints", f"{r.n_constraints:,}")
    fmt = lambda v: "n/a" if not np.isfinite(v) else f"{v:.3f}"
    c[2].metric("cos(W_h, W^mm)", fmt(r.cos))
    c[3].metric("cos_span", fmt(r.cos_span))
    rng = r.baseline_range()
    c[4].metric("baselines' cos_span", "n/a" if rng is None else f"{rng[0]:.2f} … {rng[1]:.2f}")
    if r.svm is not None and not r.svm.feasible:
        why = r.svm.reason or r.svm.status
        st.warning(f"The Att-SVM of these selections is infeasible ({why}).")
    elif r.n_constraints == 0:
        st.info("No query kept at this τ: the head is diffuse on these sentences.")


def panels(res, shown: int):
    tokens = [hosted.escape_markdown(t) for t in res["tokens"][shown]]
    st.altair_chart(
        charts.attention_map(tokens, res["attention"][shown], res["audit"].alpha[shown])
    )
    if res["margins_svm"].size:
        st.altair_chart(charts.margins_chart(res["margins_head"], res["margins_svm"]))
    if len(res["baselines"]):
        st.dataframe(res["baselines"], hide_index=True)
