"""The sidebar: the shared problem and training settings, bound to the URL.

Rendered once per run by app.py (before the page), so the same widgets — and values —
appear on every page. Each widget has a key and `bind="query-params"`: the key is the URL
parameter, a copied link restores the view, and a value the widget cannot take (out of
range, wrong type) is ignored by Streamlit instead of reaching the library.
"""

from __future__ import annotations

import streamlit as st

import attsvm
from attsvm import limits
from attsvm.config import INIT_LABELS, INITS, ProblemSpec, TrainSpec

from .upload_ui import upload_problem, upload_spec

# Widget ranges: the active mode's caps (attsvm.limits), never above what the UI can draw.
PRESET_OPTIONS = ("random", *attsvm.PRESETS, "upload")
PRESET_LABELS = {
    "random": "random (the paper's Gaussian instance)",
    **{k: f"{k}: {v[1]}" for k, v in attsvm.PRESETS.items()},
    "upload": "upload: your own tokens, labels, queries and head (CSV/NPZ)",
}
HEAD_LABELS = {
    "linear": "linear  f = vᵀXᵀs",
    "relu": "relu MLP  f = 1ᵀrelu(VᵀXᵀs)",
    "quadratic": "quadratic  f = vᵀr − λ‖r‖²",
}
LOSS_LABELS = {
    "logistic": "logistic log(1+e⁻ᵘ)",
    "exponential": "exponential e⁻ᵘ",
    "correlation": "correlation −u",
}
STATE_KEY = "_attsvm_specs"
# URL parameters of the sidebar's widgets (their keys): carried from page to page.
SHARED_KEYS = (
    "preset",
    "n",
    "T",
    "d",
    "seed",
    "attention",
    "head",
    "lam",
    "param",
    "m",
    "loss",
    "lr",
    "steps",
    "ngd",
    "init",
    "init_seed",
)
# URL paths of the pages with their own settings, which do not read the sidebar's problem or
# training settings. There the sidebar folds those controls away under a label saying so
# (still drawn, so their values, the URL and an upload are kept for the other pages).
# A page opts in with its URL path here.
OWN_SETTINGS = frozenset(
    {"next-token", "train-the-head", "real-words", "hierarchy-of-svms", "a-real-transformer"}
)
UNUSED_LABEL = "Problem and training: not used on this page (it has its own settings)"
# Pages that read the sidebar's problem but train with their own controls: only the training
# section is folded away there.
OWN_TRAINING = frozenset({"small-init-rank"})
UNUSED_TRAINING_LABEL = "Training: not used on this page (it has its own training controls)"


def caps() -> dict:
    """The sidebar's widget ranges: the active mode's caps (attsvm.limits), in one place."""
    L = limits.current()
    return dict(n=L.max_n, T=L.max_T, d=L.max_d, steps=L.max_steps)


def carried() -> dict:
    """The shared settings' URL parameters, for links to other pages (Streamlit's own
    navigation drops the query string on a page switch, so a link copied afterwards would
    not reproduce the view). Page-specific settings stay with their page."""
    return {k: v for k, v in st.query_params.to_dict().items() if k in SHARED_KEYS}


def _nav(pages):
    carry = carried()
    for p in pages:
        st.page_link(p, query_params=carry)
    st.divider()


def render(pages=(), *, page: str | None = None) -> tuple[ProblemSpec, TrainSpec]:
    """Draw the sidebar (page links, then the settings) and return the specs (also kept
    for `specs()`). `page`: the current page's URL path; on a page in OWN_SETTINGS the
    settings are folded away under UNUSED_LABEL, on one in OWN_TRAINING the training
    settings only, under UNUSED_TRAINING_LABEL."""
    with st.sidebar:
        if pages:
            nav = st.container()
        box = (
            st.expander(UNUSED_LABEL, expanded=False, icon=":material/visibility_off:")
            if page in OWN_SETTINGS
            else st.container()
        )
        with box:
            pspec = _problem_settings()
            train_box = (
                st.expander(UNUSED_TRAINING_LABEL, expanded=False, icon=":material/visibility_off:")
                if page in OWN_TRAINING
                else st.container()
            )
            with train_box:
                tspec = _training_settings()
        st.caption("Every setting is in the page URL: copy it to share this exact view.")
        if pages:
            with nav:  # after the widgets, so the links see this run's values
                _nav(pages)
    st.session_state[STATE_KEY] = (pspec, tspec)
    return pspec, tspec


def _problem_settings() -> ProblemSpec:
    """The Problem section's widgets, top to bottom; returns their ProblemSpec.

    Long because it lays out the section's eight widgets in order, each with its key and
    help."""
    c = caps()
    q = dict(bind="query-params")
    st.subheader("Problem")
    preset = st.selectbox(
        "Data",
        PRESET_OPTIONS,
        key="preset",
        **q,
        help="\n".join(f"- **{k}**: {v}" for k, v in PRESET_LABELS.items()),
    )
    fixed = preset != "random"
    uploaded = upload_problem(key="upload") if preset == "upload" else None
    c1, c2, c3 = st.columns(3)
    n = c1.number_input("n", 1, c["n"], 6, key="n", disabled=fixed, **q, help="number of sequences")
    T = c2.number_input("T", 1, c["T"], 8, key="T", disabled=fixed, **q, help="tokens per sequence")
    d = c3.number_input(
        "d", 1, c["d"], 10, key="d", disabled=fixed, **q, help="embedding dimension"
    )
    seed = st.number_input("Data seed", 0, 2**31 - 1, 0, key="seed", disabled=fixed, **q)
    attention = st.segmented_control(
        "Attention",
        ["cross", "self"],
        key="attention",
        default="cross",
        required=True,
        **q,
        help="cross: own query z_i; self: z_i = x_i1",
    )
    head = st.selectbox(
        "Head",
        list(HEAD_LABELS),
        key="head",
        disabled=fixed,
        **q,
        help="\n".join(f"- **{k}**: {v}" for k, v in HEAD_LABELS.items()),
    )
    lam = st.number_input(
        "λ (quadratic head)",
        0.0,
        100.0,
        0.5,
        step=0.1,
        key="lam",
        disabled=fixed or head != "quadratic",
        **q,
    )
    if preset == "upload" and uploaded is None:
        st.caption(
            "Until a file is uploaded, the pages show the default random problem. "
            "Uploads stay in this session (not in the URL)."
        )
    elif fixed:
        st.caption("The preset fixes the data (n, T, d, seed, linear head).")
    if preset == "upload":
        return ProblemSpec() if uploaded is None else upload_spec(uploaded, attention)
    if fixed:
        return ProblemSpec(source=preset, attention=attention)
    return ProblemSpec(
        source="random",
        n=int(n),
        T=int(T),
        d=int(d),
        seed=int(seed),
        attention=attention,
        head=head,
        lam=float(lam),
    )


def _training_settings() -> TrainSpec:
    """The Training section's widgets, top to bottom; returns their TrainSpec."""
    c = caps()
    q = dict(bind="query-params")
    st.subheader("Training")
    param = st.segmented_control(
        "Parameterization",
        ["W", "KQ"],
        key="param",
        default="W",
        required=True,
        **q,
        help="**W**: train W directly (→ Frobenius SVM); "
        "**KQ**: train K, Q with W = K Qᵀ (→ nuclear-norm "
        "SVM)",
    )
    m = st.number_input(
        "rank m of K, Q (0 = d)", 0, c["d"], 0, key="m", disabled=param != "KQ", **q
    )
    loss = st.selectbox(
        "Loss",
        list(LOSS_LABELS),
        key="loss",
        **q,
        help="\n".join(f"- **{k}**: {v}" for k, v in LOSS_LABELS.items()),
    )
    c1, c2 = st.columns(2)
    lr = c1.number_input("step size η", 1e-4, 100.0, 0.1, step=0.05, format="%.4g", key="lr", **q)
    steps = c2.number_input("steps", 1, c["steps"], 500, step=100, key="steps", **q)
    normalized = st.toggle("normalized GD (the paper's)", True, key="ngd", **q)
    init = st.selectbox(
        "Initialization",
        INITS,
        key="init",
        **q,
        help="\n".join(f"- **{k}**: {v}" for k, v in INIT_LABELS.items()),
    )
    init_seed = st.number_input("Init seed", 0, 2**31 - 1, 0, key="init_seed", **q)
    return TrainSpec(
        param=param,
        m=int(m) or None,
        loss=loss,
        lr=float(lr),
        normalized=bool(normalized),
        steps=int(steps),
        init=init,
        init_seed=int(init_seed),
    )


def specs() -> tuple[ProblemSpec, TrainSpec]:
    """The sidebar's specs of this run (defaults if a page runs without app.py)."""
    return st.session_state.get(STATE_KEY, (ProblemSpec(), TrainSpec()))
