"""Sequences and causal attention: per-query selections, verdict and SVM."""

from conftest import assert_clean, chart_specs, charts, open_page, texts


def test_causal_default_has_a_verdict_and_per_query_map():
    at = open_page("sequences.py", query={"n": 2, "T": 5, "steps": 200})
    t = texts(at)
    assert "Verdict after 200 steps" in t
    assert "queries whose selection is optimal" in t
    assert len(charts(at)) == 3
    assert "saturated" not in t  # a one-token causal query is not a saturation


def test_controls_change_the_output():
    at = open_page("sequences.py", query={"n": 2, "T": 5, "steps": 200})
    before = chart_specs(at)
    at.segmented_control(key="seq_mode").set_value("sequence").run()
    assert_clean(at)
    assert chart_specs(at) != before
    at.selectbox(key="seq_i").set_value(1).run()
    assert_clean(at)
    assert "Sequence 1" in chart_specs(at)[0]


def test_T_equal_1_is_explained():
    at = open_page("sequences.py", query={"T": 1})
    assert "nothing to select" in texts(at) and not at.error


def test_over_budget_is_refused(tiny_budget):
    at = open_page("sequences.py")
    assert at.error
