"""The Next-token prediction page's Streamlit side: intro, controls, the sequences' editor,
the priority graphs, the Graph-SVM's verdict, the session's budget check and the metered live
run (the computations are `attsvm.ntp.session`)."""

from __future__ import annotations

import numpy as np
import streamlit as st

from attsvm import ntp
from attsvm.ntp import session
from attsvm_charts import ntp as ntp_charts

from .. import about, hosted
from ..widgets import BOUND, explained

# One chunk of the live run, metered: holds a compute slot and charges the session.
chunk = hosted.metered(session.chunk)


def check_budget(prob, steps: int) -> None:
    """Refuse a run over this session's allowance or the mode's budget."""
    hosted.check_session()
    session.check_budget(prob, steps)


def live_run(prob, W0, steps: int, lr: float, on_chunk=None) -> dict:
    """`attsvm.ntp.session.live_run` with metered chunks."""
    return session.live_run(prob, W0, steps, lr, on_chunk, chunk=chunk)


def intro():
    """The page's title and claim."""
    st.title("Next-token prediction")
    st.markdown(
        "One self-attention layer whose query is the **last token**, trained on next-token "
        "data (Li, Huang, Ildiz, Rawat, Oymak, arXiv 2403.08081). Per last token k the data "
        "define a **token-priority graph** G^(k): the label beats every other token of its "
        "sequence. GD retrieves the tokens of the highest-priority SCC of the context and "
        "composes them softly:"
    )
    st.latex(
        r"W(\tau)\approx W^{fin}+R(\tau)\,W^{svm},\quad W^{svm}=\arg\min\|W\|_F\ "
        r"\text{s.t.}\ (e_y-e_j)^\top W e_k \begin{cases}=0 & \text{same SCC of } "
        r"G^{(k)}\\ \ge 1 & \text{otherwise}\end{cases}"
    )
    st.caption("This page has its own settings (below); the sidebar's problem does not apply.")


def controls() -> tuple[int, int, int, int, float, str]:
    """(vocabulary K, dimension d, seed, steps, lr, random n × T) from the page's inputs."""
    c = st.columns(6)
    K = c[0].number_input("vocabulary K", 2, 16, 6, key="ntp_K", **BOUND)
    d = c[1].number_input("dimension d", 1, 32, 8, key="ntp_d", **BOUND)
    seed = c[2].number_input(
        "seed",
        0,
        10_000,
        0,
        key="ntp_seed",
        **BOUND,
        help="vocabulary, W₀ and the random sequences",
    )
    steps = c[3].number_input("steps", 200, 20_000, 4000, step=200, key="ntp_steps", **BOUND)
    lr = c[4].number_input(
        "lr (normalized GD)", 0.001, 1.0, 0.01, format="%.3f", key="ntp_lr", **BOUND
    )
    shape = c[5].text_input("random n × T", "6x4", key="ntp_shape", **BOUND)
    return int(K), int(d), int(seed), int(steps), float(lr), shape


def sequences(col, shape: str, K: int, d: int, seed: int) -> str:
    """The sequences' text area in `col` (random ones drawn on first visit and by its button);
    returns its text."""

    def draw():
        with explained():
            st.session_state["ntp_seqs"] = session.random_text(shape, K, d, seed)

    if "ntp_seqs" not in st.session_state and "ntp_seqs" not in st.query_params:
        draw()
    text = col.text_area(
        "Sequences: token ids, then ': label' (the last id is the query)",
        key="ntp_seqs",
        height=200,
        **BOUND,
    )
    col.button("Random sequences (with a cycle)", key="ntp_draw", on_click=draw)
    return text


def graphs(g, changes: list):
    """The token-priority graphs: their SCCs, what changed since the last run, one heatmap
    per present G^(k); returns the heatmaps' chart."""
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
    return heat


def svm_verdict(svm) -> None:
    """The Graph-SVM's status, norm, constraints and KKT residual, or why it is infeasible."""
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
