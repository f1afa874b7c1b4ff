"""Train the head too: the presets draw both paths against their SVM rays, the float32
switch adds the authors' loop next to the exact run, the p slider flips the MD-Att
selection, random instances compare the SVMs, and an over-budget request is refused."""

from conftest import assert_clean, chart_specs, charts, open_page, table, texts

SMALL = {"jt_steps": 500}


def test_relaxed_preset_float64_then_float32():
    at = open_page("joint.py", query=SMALL)
    assert len(charts(at)) == 1
    t = table(at, "corr_relaxed")
    assert t.corr_relaxed.iloc[0] > 0.999 and t.corr_v.iloc[0] > 0.999
    assert "**not** support: [3]" in texts(at)
    at.segmented_control(key="jt_dtype").set_value("float32").run()
    assert_clean(at)
    assert len(charts(at)) == 2
    t = table(at, "corr_relaxed").set_index("run")
    f32 = t.loc["float32, authors' loop"]
    assert f32.corr_tight > f32.corr_relaxed  # the authors' loop stalls near tight


def test_p_slider_flips_the_mdatt_selection_and_random_instances():
    at = open_page("joint.py", query={**SMALL, "jt_src": "mdatt-toy"})
    assert "α = (1, 0)" in texts(at)
    before = chart_specs(at)
    at.slider(key="jt_p").set_value(3.0).run()
    assert_clean(at)
    assert "α = (0, 0)" in texts(at) and chart_specs(at) != before
    at.segmented_control(key="jt_src").set_value("random").run()
    at.number_input(key="jt_runs").set_value(3).run()
    assert_clean(at)
    assert len(charts(at)) == 2
    assert len(table(at, "corr_balanced")) == 3
    assert "Relaxed beats tight in" in texts(at)


def test_over_budget_is_refused(tiny_budget):
    at = open_page("joint.py", query=SMALL)
    assert at.error and not charts(at)


def test_hostile_link_values_fall_back_to_defaults():
    at = open_page(
        "joint.py", query={**SMALL, "jt_src": "<script>", "jt_p": "1e300", "jt_dtype": "float16"}
    )
    assert not at.error and len(charts(at)) == 1
    assert "Ignored link parameters" in texts(at)
