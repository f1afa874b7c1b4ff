"""The Rank page's intro: the claim and how ranks are measured here."""

from __future__ import annotations

import streamlit as st

from attsvm.metrics import RANK_RTOL


def intro():
    st.title("Rank collapse")
    st.markdown(
        "Both SVM solutions see W only through W z_i, so their row space lies in span{z_i} and "
        "rank ≤ min(n, d). The nuclear-norm solution W^mm_*, the limit of K Qᵀ, is much lower "
        "rank still — and during training the small singular values of K(k)Q(k)ᵀ die off, "
        "while those of W(k) do not."
    )
    st.info(
        "**How ranks are measured here:** accurate solves (Clarabel, tolerances 1e-10, "
        "for the training run's SVMs; for the sweep, the exact least-distance program "
        "(W^mm) and a certified interior-point method (W^mm_*) of `attsvm.fastsvm`) and "
        f"the relative threshold σ_k > {RANK_RTOL:g}·σ_1; infeasible "
        "instances are excluded and counted separately. The authors' notebook differs on both "
        "counts: it counted an infeasible SVM as rank 1 (`matrix_rank(None) = 1`) and measured "
        "SCS output with an absolute 1e-7 threshold, which inflates nuclear-norm ranks (even "
        "above the bound n). The low-rank bias of K Qᵀ is stronger than the paper's plot "
        "suggests.",
        icon=":material/info:",
    )
