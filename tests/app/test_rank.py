"""Rank collapse: singular values during training, SVM ranks vs d, the measurement stated."""

from conftest import assert_clean, chart_specs, charts, open_page, table, texts


def test_rank_page_states_its_measurement_and_draws_three_charts():
    at = open_page("rank.py", query={"rank_inst": 2, "steps": 200})
    t = texts(at)
    assert "relative threshold" in t and "Clarabel" in t and "rank 1" in t
    assert len(charts(at)) == 3
    final = table(at, "matrix").set_index("matrix")["rank"]
    assert int(final["W^mm_*,α (nuclear)"]) <= int(final["W^mm_α (Frobenius)"]) <= 6


def test_controls_change_the_rank_sweep():
    at = open_page("rank.py", query={"rank_inst": 2, "steps": 200})
    before = chart_specs(at)[2]
    at.multiselect(key="rank_d").set_value([2, 3]).run()
    assert_clean(at)
    assert chart_specs(at)[2] != before
    at.multiselect(key="rank_n").set_value([]).run()
    assert_clean(at)
    assert "Pick at least one" in texts(at)


def test_over_budget_is_refused(tiny_budget):
    at = open_page("rank.py")
    assert at.error
