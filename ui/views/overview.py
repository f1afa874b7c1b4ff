"""The Overview page's panels: the paper's claims, one formula and one page link each, and
what runs underneath (backend, precision, solver, mode)."""

from __future__ import annotations

import streamlit as st

import attsvm
from attsvm import limits
from ui.sidebar import carried

# (claim, formula in LaTeX, one sentence, the page that shows it, the link's label)
CLAIMS = [
    (
        "Attention selects tokens by max margin",
        r"\frac{W(k)}{\|W(k)\|_F}\ \to\ \frac{W^{mm}}{\|W^{mm}\|_F},\quad "
        r"W^{mm}=\arg\min_W\|W\|_F\ \text{s.t.}\ (x_{i,\mathrm{opt}_i}-x_{it})^\top W z_i\ge 1",
        "The softmax of every sequence collapses onto its highest-score token "
        "γ_it = Y_i vᵀx_it while ‖W‖ grows without bound; the direction locks onto the SVM.",
        "app_pages/playground.py",
        "Token selection (live)",
    ),
    (
        "The parameterization chooses the norm",
        r"W=KQ^\top:\quad \frac{K(k)Q(k)^\top}{\|\cdot\|}\to\frac{W^{mm}_\star}{\|W^{mm}_\star\|},"
        r"\quad W^{mm}_\star=\arg\min_W\|W\|_\star\ \text{s.t. the same constraints}",
        "Training K and Q separately minimizes the nuclear norm instead of the Frobenius norm: "
        "different limit directions from the same data.",
        "app_pages/geometry.py",
        "Geometry in 2-D",
    ),
    (
        "Convergence can be local",
        r"\alpha\ \text{locally optimal:}\ \ \gamma_{i\alpha_i}>\gamma_{it}\ \ \forall t\in"
        r"\mathcal{T}_i(\alpha)\ \Rightarrow\ W(k)/\|W(k)\|\to W^{mm}_\alpha/\|W^{mm}_\alpha\|",
        "GD may settle on a selection α ≠ opt whose SVM-neighbours (support tokens) all score "
        "lower; which one depends on the initialization.",
        "app_pages/basins.py",
        "Local optima and basins",
    ),
    (
        "Over-parameterization helps",
        r"d\ \ge\ \max(n,\,T-1)\ \Rightarrow\ \text{Att-SVM}_\alpha\ "
        r"\text{feasible for every}\ \alpha",
        "A larger embedding dimension makes the SVM feasible and makes GD reach the global "
        "selection more often.",
        "app_pages/overparam.py",
        "Over-parameterization",
    ),
    (
        "K Qᵀ collapses in rank",
        r"\operatorname{rank}(W^{mm})\le\min(n,d),\qquad "
        r"\operatorname{rank}(W^{mm}_\star)\ \ll\ \operatorname{rank}(W^{mm})",
        "Both SVM solutions live in the span of the queries; the nuclear-norm one is much lower "
        "rank, and the singular values of K(k)Q(k)ᵀ die off during training.",
        "app_pages/rank.py",
        "Rank collapse",
    ),
    (
        "Nonlinear heads select several tokens",
        r"W(k)\ \approx\ W^{fin}+R_k\,W^{dir},\quad R_k\to\infty",
        "With an MLP head the softmax keeps a set O_i of tokens: a directional SVM part masks "
        "the rest, a finite part mixes the kept ones (proposed and checked numerically, not "
        "proved).",
        "app_pages/nonlinear.py",
        "Nonlinear heads",
    ),
    (
        "Every token can be a query",
        r"(x_{i\alpha_{ik}}-x_{it})^\top W z_{ik}\ge 1\quad\forall i,k,\ t\ne\alpha_{ik}"
        r"\ \ (t\le k\ \text{if causal})",
        "Sequence-to-sequence and causal attention lead to one SVM block per query.",
        "app_pages/sequences.py",
        "Sequences and causal attention",
    ),
]


def claims():
    """Each claim in a bordered box: its formula, its sentence and a link to its page."""
    for title, formula, text, page, label in CLAIMS:
        with st.container(border=True):
            st.markdown(f"#### {title}")
            st.latex(formula)
            st.markdown(text)
            st.page_link(
                page,
                label=f"Show me: {label}",
                icon=":material/arrow_forward:",
                query_params=carried(),
            )


def underneath():
    """What runs underneath: JAX backend, float64, the SVM solver and the budget mode."""
    st.subheader("What runs underneath")
    info = attsvm.backend()
    c1, c2, c3, c4 = st.columns(4)
    c1.metric(
        "JAX backend",
        info["platform"].upper(),
        help=f"{info['devices']} device(s): {info['device_kind']}",
    )
    c2.metric(
        "float64",
        "on" if info["x64"] else "off",
        help="Softmax tails reach 1e-16: everything compared with the SVM is float64.",
    )
    c3.metric("SVM solver", "Clarabel", help="interior point, tolerances 1e-10 (cvxpy)")
    c4.metric("Mode", limits.mode(), help="ATTSVM_MODE=hosted caps each action's work")
    st.caption(
        f"attsvm {attsvm.__version__}. GD is jitted JAX (a loop over steps, `vmap` over runs) "
        "and runs on a GPU when JAX sees one. The sidebar's problem and training settings are "
        "shared by every page and kept in the URL, so a copied link reproduces the view. Scores "
        "and token indices are 0-based."
    )
