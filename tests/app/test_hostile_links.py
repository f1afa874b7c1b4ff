"""Hostile links: any value in any parameter, shared or page-level, draws the page without an
exception box, and the sidebar lists exactly the parameters that were not used, with why."""

from __future__ import annotations

import pytest
from conftest import assert_clean, open_link
from streamlit.runtime.state.query_params import QueryParams

from ui import links

HUGE = "9" * 100_000
NOTE = "Ignored link parameters"


def note(at) -> str:
    return "\n".join(w.value for w in at.sidebar.warning if NOTE in w.value)


# (page, link, parameters the note must name, parameters it must not name)
CASES = [
    (None, {"seed": "1e400"}, {"seed"}, set()),
    (None, {"seed": HUGE}, {"seed"}, set()),
    (None, {"n": "-1e308", "T": "inf", "d": "nan", "lr": "-inf"}, {"n", "T", "d", "lr"}, set()),
    (None, {"steps": "1e16", "init_seed": "0x10"}, {"steps", "init_seed"}, set()),
    (
        None,
        {"n": "6", "seed": "0", "steps": "500", "lr": "0.1"},
        set(),
        {"n", "seed", "steps", "lr"},
    ),  # defaults: used, not ignored
    (None, {"n": "7", "ngd": "false", "param": "KQ"}, set(), {"n", "ngd", "param"}),
    (
        None,
        {"preset": "<script>alert(1)</script>", "head": "[x](javascript:y)"},
        {"preset", "head"},
        set(),
    ),
    (None, {"n": "-3", "seed": "5"}, {"n"}, {"seed"}),
    ("rank.py", {"rank_inst": "1e400", "rank_T": HUGE}, {"rank_inst", "rank_T"}, set()),
    ("rank.py", {"rank_T": "5"}, set(), {"rank_T"}),
    (
        "basins.py",
        {"bas_runs": "1e999", "bas_grid": "-0", "bas_seed": "2"},
        {"bas_runs", "bas_grid"},
        {"bas_seed"},
    ),
    ("nonlinear.py", {"nl_lam": "1e309", "nl_steps": "2.5"}, {"nl_lam", "nl_steps"}, set()),
    ("overparam.py", {"ovp_d": ["2", "1e400"], "ovp_runs": "1e400"}, {"ovp_runs"}, set()),
    (
        "ntp.py",
        {
            "ntp_K": "1e400",
            "ntp_steps": "-inf",
            "ntp_shape": "9" * 900 + "x4",
            "ntp_seqs": "[x](javascript:y)",
            "ntp_lr": "0.01",
        },
        {"ntp_K", "ntp_steps"},
        {"ntp_lr"},
    ),
    (
        "reproduce.py",
        {"repro-local-convergence-runs": "1e400", "repro-svm-rank-ds": "(" * 400},
        {"repro-local-convergence-runs", "repro-svm-rank-ds"},
        set(),
    ),
    (
        "reproduce.py",
        {
            "repro-svm-rank-pairs": "<b>x</b>",
            "repro-multi-token-ds": "__import__('os').getcwd()",
            "repro-ntp-global-fixtures": "/etc",
            "repro-nope-x": "1",
            "repro-svm-rank-run": "1",
            "repro-svm-rank-runs": "7",
            "repro-multi-token-runs": "-4",
        },
        {
            "repro-svm-rank-pairs",
            "repro-multi-token-ds",
            "repro-ntp-global-fixtures",
            "repro-nope-x",
            "repro-svm-rank-run",
            "repro-multi-token-runs",
        },
        {"repro-svm-rank-runs"},
    ),
    (None, {"nope": "1", "seed": "5"}, {"nope"}, {"seed"}),
    ("rank.py", {"bas_runs": "3", "rank_T": "5"}, {"bas_runs"}, {"rank_T"}),
]


@pytest.mark.parametrize(
    "page,link,named,unnamed", CASES, ids=[f"{p}:{','.join(q)}"[:60] for p, q, _, _ in CASES]
)
def test_hostile_link_draws_the_page_and_names_what_it_ignored(page, link, named, unnamed):
    at = open_link(page, link)
    assert_clean(at)
    text = note(at)
    for k in named:
        assert f"`{k}`" in text, (k, text)
    for k in unnamed:
        assert f"`{k}`" not in text, (k, text)
    assert "Traceback" not in text


def test_a_link_with_hundreds_of_parameters_is_refused_past_the_cap():
    link = {f"p{j}": str(j) for j in range(links.MAX_PARAMS + 10)}
    at = open_link(None, link)
    assert_clean(at)
    assert "more than 64 parameters" in note(at)


@pytest.mark.parametrize(
    "key,value,why",
    [
        ("seed", "1e400", "finite"),
        ("seed", "-inf", "finite"),
        ("lr", "NaN", "finite"),
        ("seed", "9" * 400, "finite"),
        ("seed", "9" * 2000, "longer"),
        ("n", "1e16", "2⁵³"),
        ("n", ["1", "1e999"], "finite"),
        ("k" * 200, "1", "name"),
        ("geo_data", "x" * 5000, None),
        ("geo_data", "x" * 20_000, "longer"),
        ("n", "6", None),
        ("head", "relu", None),
        ("lr", "1e-300", None),
        ("n", "-0", None),
    ],
)
def test_link_rules(key, value, why):
    got = links.refusal(key, value)
    assert (got is None) if why is None else (why in got), got


@pytest.mark.parametrize(
    "state,url,same",
    [
        (6, "6", True),
        (6, "6.0", True),
        (6, "7", False),
        (0.1, "0.1", True),
        (True, "true", True),
        (False, "False", True),
        (True, "false", False),
        ("W", "W", True),
        ("W", "KQ", False),
        ([2, 4], ["2", "4"], True),
        ([2, 4], ["4", "2"], False),
        ([5], "5", True),
        (6, "x", False),
        (None, "None", True),
    ],
)
def test_same_value(state, url, same):
    assert links.same_value(state, url) is same


def test_streamlit_still_keeps_initial_query_values_where_clean_link_edits_them():
    """`ui.hosted._forget` edits Streamlit's private initial-value store; a Streamlit upgrade
    that renames it would silently bring back the OverflowError: fail here instead."""
    qp = QueryParams()
    qp.set_initial_query_params("seed=1e400")
    assert qp._initial_query_params == {"seed": ["1e400"]}
    assert qp.get_initial_value("seed") == "1e400"
    assert callable(qp.remove_param)
