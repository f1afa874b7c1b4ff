"""Token selection (live) page: loads with a verdict, controls drive it, bad input is shown."""

import re

from conftest import assert_clean, chart_specs, charts, open_page, texts


def _iteration(at) -> int:
    m = re.search(r"Iteration ([\d,]+) of", texts(at))
    return int(m.group(1).replace(",", ""))


def test_first_load_shows_a_finished_run_with_verdict_and_charts():
    at = open_page("playground.py")
    t = texts(at)
    assert "Verdict at iteration 500" in t
    assert "GD selects α =" in t and ("optimal" in t.lower())
    assert len(charts(at)) == 6
    assert _iteration(at) == 500
    # both SVMs state their certified duality gap beside their status
    gaps = re.findall(r"`optimal` \(certified gap ([0-9.e+-]+)\)", t)
    assert len(gaps) == 2 and all(float(g) <= 1e-6 for g in gaps), t


def test_reset_step_play_and_scrub():
    at = open_page("playground.py")
    at.button(key="pg_reset").click().run()
    assert_clean(at)
    assert _iteration(at) == 0
    at.button(key="pg_step").click().run()
    assert_clean(at)
    assert _iteration(at) == 50  # one chunk = 10 records of 5 steps
    at.button(key="pg_play").click().run()  # AppTest runs the fragment once per run
    assert_clean(at)
    assert at.session_state["pg_playing"] and _iteration(at) == 100
    at.button(key="pg_pause").click().run()
    assert_clean(at)
    assert not at.session_state["pg_playing"]
    before = chart_specs(at)
    at.slider(key="iter").set_value(20).run()  # scrub back: the margin map redraws
    assert_clean(at)
    assert "at k = 20" in chart_specs(at)[0] and chart_specs(at)[0] != before[0]


def test_sidebar_controls_change_the_run():
    at = open_page("playground.py")
    before = texts(at)
    at.number_input(key="seed").set_value(3).run()
    assert_clean(at)
    after = texts(at)
    assert "seed=3" in after and after != before
    at.segmented_control(key="param").set_value("KQ").run()
    assert_clean(at)
    assert "nuclear" in texts(at) and "(K, Q)" in texts(at)


def test_url_query_parameters_set_the_problem():
    at = open_page("playground.py", query={"n": 4, "T": 5, "seed": 7, "steps": 200})
    t = texts(at)
    assert "random n=4, T=5, d=10, seed=7" in t and "200 steps" in t
    assert _iteration(at) == 200


def test_T_equal_1_is_explained_not_crashed():
    at = open_page("playground.py", query={"T": 1})
    assert "nothing to select" in texts(at)
    assert not at.error


def test_over_budget_shows_an_error(tiny_budget):
    at = open_page("playground.py")
    assert at.error and "Cannot run this" in at.error[0].value
    assert not charts(at)
