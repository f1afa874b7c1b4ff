"""Deeper: a hierarchy of SVMs: the live run, each head against its own SVM, the open label."""

import time

from conftest import assert_clean, chart_specs, charts, open_page, texts

SMALL = {"hier_n": 4, "hier_T": 4, "hier_d": 4, "hier_steps": 200}


def test_default_size_trains_live_and_audits_every_head():
    """The acceptance size, L = 2, H = 2, n = 8, T = 8, d = 16, 2000 steps (the default)."""
    t0 = time.perf_counter()
    at = open_page("hierarchy.py")
    t = texts(at)
    assert "Open question" in t and "no theorem" in t
    assert "After 2,000 steps" in t
    assert "**Layer 1** (at every token)" in t and "**Layer 2** (at the query token)" in t
    # loss, the live grid, the cos grid, the last layer's selections, layer 1's selections
    assert len(charts(at)) == 5
    table = at.dataframe[0].value
    assert list(table.layer) == [1, 1, 2, 2] and table.svm.eq("optimal").all()
    assert table.cos.between(-1, 1).all()
    print(f"default page: {time.perf_counter() - t0:.1f} s")


def test_controls_change_the_run_and_one_layer_one_head_works():
    at = open_page("hierarchy.py", SMALL)
    before = chart_specs(at)
    at.number_input(key="hier_L").set_value(1).run()
    at.number_input(key="hier_H").set_value(1).run()
    assert_clean(at)
    assert "**Layer 1** (at the query token)" in texts(at) and chart_specs(at) != before
    at.checkbox(key="hier_causal").check().run()
    at.selectbox(key="hier_values").set_value("random").run()
    assert_clean(at)
    assert "After 200 steps" in texts(at)


def test_three_layers_four_heads_draws_every_layer():
    at = open_page("hierarchy.py", {**SMALL, "hier_L": 3, "hier_H": 4})
    assert len(charts(at)) == 6  # two earlier layers' selection maps
    assert len(at.dataframe[0].value) == 12


def test_over_budget_is_refused(tiny_budget):
    at = open_page("hierarchy.py", SMALL)
    assert at.error and "work units" in at.error[0].value
