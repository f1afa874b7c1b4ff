"""“What am I looking at?”: every chart of every page is followed by its explanation."""

from __future__ import annotations

import pytest
from conftest import assert_clean, charts, open_page

from ui import about

# page -> charts drawn as one group with a single explanation (ntp: three live panels)
GROUPED = {"ntp.py": 2, "staircase.py": 1, "hierarchy.py": 1}
PAGES = [
    "playground.py",
    "geometry.py",
    "basins.py",
    "overparam.py",
    "rank.py",
    "nonlinear.py",
    "sequences.py",
    "ntp.py",
    "optimizers.py",
    "joint.py",
    "staircase.py",
    "words.py",
    "hierarchy.py",
    None,
]
QUERY = {
    "basins.py": {"bas_runs": 8, "bas_grid": 3},
    "overparam.py": {"ovp_runs": 2},
    "rank.py": {"rank_inst": 1, "steps": 100},
    "sequences.py": {"n": 2, "T": 5, "steps": 100},
    "ntp.py": {"ntp_steps": 400},
    "optimizers.py": {"opt_steps": 200},
    "joint.py": {"jt_steps": 200},
    "staircase.py": {"stair_steps": 1000},
    "words.py": {"words_n": 8, "words_steps": 500},
    "hierarchy.py": {"hier_n": 4, "hier_T": 4, "hier_d": 4, "hier_steps": 200},
}


def _explanations(at) -> list[str]:
    return [e for e in at.get("expander") if e.proto.label == about.LABEL]


@pytest.mark.parametrize("page", PAGES, ids=[p or "overview" for p in PAGES])
def test_every_chart_is_explained(page):
    at = open_page(page, QUERY.get(page, {}))
    assert_clean(at)
    n = len(charts(at))
    assert n >= 1
    assert len(_explanations(at)) == n - GROUPED.get(page, 0), (n, len(_explanations(at)))


def test_every_explanation_is_plain_text_of_a_few_sentences():
    for key, text in about.ABOUT.items():
        assert 40 < len(text) < 600, key
        assert "<" not in text and "](" not in text, key
