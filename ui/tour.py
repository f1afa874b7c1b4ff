"""The guided tour ("Start here"): a few steps, each one claim of arXiv 2308.16898 shown on a
page opened with prepared settings (the settings travel in the link, like every view).

Each step says what to look at and what to try next; while a page is opened from the tour
(`?tour=k` in its link) a banner above it shows the step with Previous / Next links. Every
step's statement is checked on the view it opens by tests/app/test_tour.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import streamlit as st

from . import hosted

PARAM = "tour"


@dataclass(frozen=True)
class Step:
    title: str
    page: str  # file under app_pages/
    claim: str  # one sentence: what the view shows
    look: str  # where to look
    then: str  # what to try next
    query: dict = field(default_factory=dict)


STEPS = (
    Step(
        "Attention selects the max-margin token",
        "playground.py",
        "Trained by normalized GD, the softmax of every sequence collapses onto one token, "
        "and here that token is the optimal one of each sequence (α = opt).",
        "the verdict under the charts: GD's selection α equals opt; the correlation curve of "
        "W(k) with W^mm climbs toward 1.",
        "press Play to watch the attention maps sharpen, then change the data seed.",
        {"steps": 2000},
    ),
    Step(
        "The parameterization picks the norm",
        "geometry.py",
        "From the same 2-D data, GD on W follows the Frobenius SVM's rays and GD on K Qᵀ the "
        "nuclear-norm SVM's rays: two different limits.",
        "the two metrics: W-GD correlates best with W^mm, (K,Q)-GD with W^mm_* (both > 0.99); "
        "in the chart, solid paths run along their dashed rays.",
        "switch the preset to geometry-2, or edit a token under *Edit the tokens* and watch "
        "the rays move.",
    ),
    Step(
        "Convergence can be local",
        "basins.py",
        "Besides the global selection α = opt, this problem has other locally optimal "
        "selections, and some random starts of GD end in them.",
        "the counts: one global and at least one locally optimal selection; the bars show "
        "where the starts landed.",
        "raise the number of random starts, or move the init radius.",
        {"bas_runs": 16, "bas_grid": 6},
    ),
    Step(
        "Over-parameterization helps",
        "overparam.py",
        "As the embedding dimension d grows, every Att-SVM becomes feasible and more GD runs "
        "reach the global selection.",
        "the table: the feasible share reaches 1 from d = 4 on, and the global share grows "
        "from d = 2 to d = 12.",
        "add d = 20, or switch the parameterization to K Qᵀ in the sidebar.",
        {"ovp_runs": 10},
    ),
    Step(
        "K Qᵀ collapses in rank",
        "rank.py",
        "The nuclear-norm SVM, the limit of K Qᵀ, has lower rank than the Frobenius one, and "
        "the small singular values of K(k)Q(k)ᵀ die off during training.",
        "the table 'Ranks at the end': W^mm_*,α has rank 3 against 6 for W^mm_α.",
        "raise the steps, or compare across n and d in the second chart.",
        {"param": "KQ", "rank_inst": 3},
    ),
    Step(
        "A nonlinear head keeps several tokens",
        "nonlinear.py",
        "With an MLP head the softmax keeps a set of tokens; W(k) splits into a finite part "
        "plus a growing SVM direction.",
        "the three errors: W^fin + R_k·W^dir fits best, W^dir alone next, the one-token SVM "
        "worst; |O_i| ≥ 2 for some sequence.",
        "switch the head to quadratic, or change the selection threshold.",
    ),
    Step(
        "Every token can be a query (causal)",
        "sequences.py",
        "With causal attention each query selects among the tokens it may see, and the "
        "per-query SVM has one constraint block per query.",
        "the verdict: every query's selection is optimal (10 / 10).",
        "switch the mode to sequence-to-sequence, or pick another sequence to show.",
        {"n": 2, "T": 5, "steps": 200},
    ),
)


def link_query(k: int, carried: dict | None = None) -> dict:
    """URL parameters of step k (0-based): the shared settings carried, the step's own, and
    the tour position."""
    return {**(carried or {}), **{q: str(v) for q, v in STEPS[k].query.items()}, PARAM: str(k + 1)}


def current() -> int | None:
    """The tour step (0-based) this page was opened from, or None."""
    raw = st.query_params.get(PARAM)
    hosted.read_param(PARAM)
    try:
        k = int(str(raw)) - 1
    except (TypeError, ValueError):
        return None
    return k if 0 <= k < len(STEPS) else None


def banner(pages: dict) -> None:
    """The tour banner above a page opened from the tour. pages: file name -> st.Page."""
    k = current()
    if k is None:
        return
    s = STEPS[k]
    with st.container(border=True):
        st.markdown(f"**Tour {k + 1}/{len(STEPS)} · {s.title}.** {s.claim}")
        st.markdown(
            f":material/visibility: **Look at** {s.look}  \n"
            f":material/arrow_forward: **Try** {s.then}"
        )
        cols = st.columns(3)
        if k > 0:
            cols[0].page_link(
                pages[STEPS[k - 1].page],
                label="Previous step",
                icon=":material/arrow_back:",
                query_params=link_query(k - 1),
            )
        if "tour.py" in pages:
            cols[1].page_link(pages["tour.py"], label="All steps", icon=":material/list:")
        if k + 1 < len(STEPS):
            cols[2].page_link(
                pages[STEPS[k + 1].page],
                label="Next step",
                icon=":material/arrow_forward:",
                query_params=link_query(k + 1),
            )
