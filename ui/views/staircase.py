"""The "Rank from small init" page's panels: the intro, the controls, the claims (proved or
observed here), the spectrum charts and the end-of-run panel (ranks next to the nuclear-norm
SVM's, the selection's verdict)."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from attsvm.metrics import RANK_RTOL
from attsvm.staircase import STAIR_RTOL, TAKEOFF_FRAC, StudySettings
from attsvm.training import INIT_KINDS
from attsvm_charts import staircase as charts
from ui.widgets import BOUND, explained

ALPHAS = sorted({10.0**e for e in range(-8, 1)} | {0.3})
LAMBDAS = [0.0, 1e-4, 1e-3, 3e-3, 1e-2, 3e-2]

PROVED = ":green-badge[proved]"
OBSERVED = ":orange-badge[observed here]"
VERDICT = {
    "global": "the **global** selection (α = opt, locally optimal)",
    "local": "a **locally optimal** selection that is not the global one",
    "feasible": "**neither**: its Att-SVM is feasible but α is not locally optimal",
    "infeasible": "**neither**: no Att-SVM separates this selection",
}


def intro():
    st.title("Rank from small init")
    st.markdown(
        "Train the factors K, Q ∈ R^{d×d} (W = K Qᵀ) from K₀, Q₀ at scale α and watch the "
        "rank of what GD has learnt, **ΔW = K Qᵀ − K₀Q₀ᵀ**, grow one step at a time. Weight "
        "decay λ/2 (‖K‖² + ‖Q‖²) is added to the loss (λ = 0: none); it turns into the "
        "nuclear norm λ‖K Qᵀ‖_* once the factors balance."
    )


def claims(steps: int):
    """The statements the page shows, each marked proved (citation, assumptions) or
    observed here."""
    with st.expander(
        "What is proved and what is only observed here", expanded=False, icon=":material/gavel:"
    ):
        st.markdown(
            f"- {PROVED} From small initialization, training raises the rank of ΔW one step "
            "at a time, with plateaus that line up against t / log(1/α): Boix-Adserà et al., "
            "arXiv 2306.07042 — for **diagonal** weights, **gradient flow** and **α → 0**.\n"
            f"- {PROVED} Gradient flow on separate K, Q with the exponential loss, once it "
            "reaches its minimal loss, minimizes ‖K Qᵀ‖_* (an SVM on the attention weights): "
            "Sheen et al., arXiv 2403.08699 — for **diagonal** K, Q, or K, Q whose singular "
            "spaces are **aligned with the data** at the start.\n"
            f"- {PROVED} Every local minimum of L(K Qᵀ) + λ/2 (‖K‖² + ‖Q‖²) minimizes "
            "L(K Qᵀ) + λ‖K Qᵀ‖_*, and the two become equal exponentially fast: Kobayashi et "
            "al., arXiv 2410.23819. The rate 2ηλ per step drawn here is derived for "
            "**gradient flow** (d/dt (KᵀK − QᵀQ) = −2λ (KᵀK − QᵀQ)), docs/staircase.md §3.\n"
            f"- {OBSERVED} Plain GD on full K, Q with the logistic loss: none of the theorems' "
            f"assumptions hold, so the staircase, the rank after {steps:,} steps, the measured "
            "gap rate and which tokens win are measurements of this run, not consequences of "
            "a theorem. Small-init GD is not the nuclear-norm SVM on a practical horizon: "
            "compare the ranks below."
        )
        st.caption(
            f"Take-off of σ_j: the first recorded step with σ_j(ΔW) ≥ {TAKEOFF_FRAC:g}·σ₁(ΔW) "
            f"at the end. Ranks: ΔW's numerical rank counts σ_j > {STAIR_RTOL:g}·σ₁, K Qᵀ's and "
            f"the SVM's σ_j > {RANK_RTOL:g}·σ₁. Diagonal init: K₀ = Q₀ = α·I (GD then trains "
            "full matrices); aligned: K₀ = α·U, Q₀ = α·V from −∇L(0) = U S Vᵀ."
        )


def verdict_panel(out: dict, alpha: float, lr: float):
    """Ranks at the end next to the nuclear-norm SVM of the selection reached, take-off
    steps, and which selection won."""
    v, take, gap = out["verdict"], out["takeoff"], out["gap"]
    rows = [
        ("stable rank ‖ΔW‖_F²/‖ΔW‖₂²", f"{v['stable_rank']:.3f}"),
        (f"numerical rank of ΔW (σ > {STAIR_RTOL:g}·σ₁)", str(v["delta_rank"])),
        (f"rank of K Qᵀ (σ > {RANK_RTOL:g}·σ₁)", str(v["rank"])),
        (
            "rank of W^mm_*,α (nuclear SVM, selection reached)",
            "infeasible" if v["svm_rank"] is None else str(v["svm_rank"]),
        ),
    ]
    st.dataframe(
        pd.DataFrame(rows, columns=["quantity", "at the end"]), hide_index=True, key="stair_ranks"
    )
    t = ", ".join(
        f"σ{int(j)}: " + ("—" if math.isnan(s) else f"step {int(s):,}")
        for j, s in zip(take["j"], take["step"], strict=True)
    )
    st.markdown(f"**Take-off steps** {OBSERVED}: {t}")
    if alpha < 1:
        st.caption(
            f"t / log(1/α) at the last step: {out['loss']['rescaled'].iloc[-1]:.3g} (η = {lr:g})."
        )
    st.markdown(
        f"**Selection reached** {OBSERVED}: {VERDICT[v['kind']]}; loss "
        f"{v['loss']:.4f}. Relative gap at the end: {gap['rel_gap'].iloc[-1]:.1e}."
    )


def controls() -> StudySettings:
    """The run the page's inputs ask for (init scale α, init kind, weight decay λ, rule,
    steps, step size η; λ = 0: no ridge at all)."""
    c = st.columns(6)
    alpha = c[0].select_slider(
        "init scale α",
        ALPHAS,
        value=1e-4,
        format_func="{:g}".format,
        key="stair_alpha",
        **BOUND,
        help="K₀, Q₀ at scale α (log slider)",
    )
    kind = c[1].selectbox(
        "init kind",
        INIT_KINDS,
        key="stair_kind",
        **BOUND,
        help="gaussian: α·N(0, 1) entries; diagonal: α·I; aligned: α times the "
        "singular vectors of −∇L(0)",
    )
    lam = c[2].select_slider(
        "weight decay λ",
        LAMBDAS,
        value=0.0,
        format_func="{:g}".format,
        key="stair_lambda",
        **BOUND,
        help="λ/2 (‖K‖² + ‖Q‖²) added to the loss",
    )
    rule = c[3].radio(
        "GD",
        ["gd", "ngd"],
        format_func={"gd": "plain", "ngd": "normalized"}.get,
        key="stair_rule",
        horizontal=True,
        **BOUND,
    )
    steps = c[4].selectbox(
        "steps", [1000, 2000, 5000, 10000, 20000], index=2, key="stair_steps", **BOUND
    )
    lr = c[5].number_input(
        "step size η",
        0.001,
        2.0,
        0.5,
        0.05,
        key="stair_lr",
        **BOUND,
        format="%.3f",
        help="normalized GD moves each factor by η per step: "
        "it needs η ≈ 0.01 or less to settle; plain GD is stable at 0.5 here",
    )
    with explained():
        return StudySettings(
            init_scale=alpha, init_kind=kind, weight_decay=lam, optimizer=rule, steps=steps, lr=lr
        )


def spectrum(out: dict, alpha: float):
    """The spectrum of ΔW against the step and, for α < 1, against rescaled time t / log(1/α)
    (the staircase); returns the first chart."""
    spec_step = charts.spectrum(out["spectrum"], x="step")
    c1, c2 = st.columns(2)
    c1.altair_chart(spec_step)
    if alpha < 1:
        c2.altair_chart(
            charts.spectrum(
                out["spectrum"], x="rescaled", title="… against rescaled time (the staircase)"
            )
        )
    else:
        c2.info("t / log(1/α) needs α < 1.")
    return spec_step
