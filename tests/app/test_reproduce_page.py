"""The Reproduce page: loads with a card per experiment, Run works, bad settings show st.error."""

from __future__ import annotations

from conftest import assert_clean, charts, open_page

import attsvm.experiments as experiments


def test_reproduce_page_loads_with_every_card():
    at = open_page("reproduce.py")
    keys = {b.key for b in at.button}
    assert {f"repro-{name}-run" for name in experiments.EXPERIMENTS} <= keys


def test_run_shows_summary_chart_and_downloads():
    at = open_page("reproduce.py")
    at.number_input(key="repro-geometry-1-steps").set_value(100)
    at.button(key="repro-geometry-1-run").click().run()
    assert_clean(at)
    assert any("Ours" in s.value and "paper 0.625" in s.value for s in at.success)
    assert len(charts(at)) >= 1
    at.run()  # a rerun replays the cached result
    assert_clean(at)
    assert any("Ours" in s.value for s in at.success)


def test_bad_setting_is_an_error_box():
    at = open_page("reproduce.py")
    at.text_input(key="repro-multi-token-ds").set_value("(4, 'x')").run()
    assert_clean(at)
    assert any("ds" in e.value for e in at.error)
