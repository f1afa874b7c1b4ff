"""The app's pure helpers: live chunking, record intervals, chart frames, chart tooltips."""

import json
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as hst

import attsvm
from attsvm import live
from attsvm.config import ProblemSpec, TrainSpec, custom_spec, record_every
from attsvm_charts import explorer as charts
from attsvm_charts import frames
from ui import linkdata


@pytest.mark.parametrize("steps", [1, 7, 100, 500, 1000, 2000, 4999])
def test_record_intervals_divide_steps_and_keep_charts_light(steps):
    for r in (record_every(steps), live.live_every(steps)):
        assert steps % r == 0 and steps // r <= 200
    if steps >= 10 and steps % 10 == 0:
        assert (steps // live.live_every(steps)) % 10 == 0  # whole live chunks


@pytest.mark.parametrize("param", ["W", "KQ"])
def test_live_chunks_reproduce_a_one_shot_run(param):
    pspec = ProblemSpec(n=3, T=4, d=5, seed=2)
    tspec = TrainSpec(param=param, steps=100)
    prob = pspec.build()
    run = live.new_run(pspec, tspec)
    while not run["done"]:
        live.step_run(run, prob, tspec, 10)
    one = attsvm.train(
        prob, param=param, steps=100, record_every=run["every"], seed=tspec.init_seed
    )
    np.testing.assert_array_equal(run["steps"], one.steps)
    np.testing.assert_allclose(run["W"], one.W, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run["probs"], one.probs, rtol=0, atol=1e-12)


def test_separating_lines_sit_halfway_to_the_margin():
    prob = attsvm.paper_problem("geometry-1")
    opt = attsvm.optimal_tokens(prob)
    fro = attsvm.solve_att_svm(prob)
    tokens, lines, arrows = frames.geometry_tokens(prob, opt, fro, {"W^mm z_i": fro})
    assert tokens["optimal"].sum() == prob.n and tokens["support"].sum() == fro.support.sum()
    Q = prob.Z
    for i in range(prob.n):
        w = fro.W @ Q[i]
        pts = lines[lines["seq"] == f"seq {i}"][["x1", "x2"]].to_numpy()
        np.testing.assert_allclose(pts @ w, prob.X[i, opt[i]] @ w - 0.5, atol=1e-9)
    assert len(arrows) == 2 * prob.n


def test_custom_spec_round_trips_the_arrays():
    prob = attsvm.paper_problem("geometry-2")
    spec = custom_spec(prob.X, prob.Y, prob.Z, prob.v)
    hash(spec)  # usable as a cache key
    back = spec.build()
    np.testing.assert_array_equal(back.X, prob.X)
    np.testing.assert_array_equal(back.Z, prob.Z)


def test_custom_spec_with_nan_is_refused_with_a_named_argument():
    prob = attsvm.paper_problem("geometry-1")
    X = prob.X.copy()
    X[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="`X`"):
        custom_spec(X, prob.Y, prob.Z, prob.v).build()


def test_every_chart_builder_has_tooltips():
    prob = attsvm.random_problem(3, 4, 5, 0)
    run = attsvm.train(prob, steps=20, record_every=2)
    sol = attsvm.solve_att_svm(prob, run.alpha)
    opt = attsvm.optimal_tokens(prob)
    sw = frames.selected_weight(run.steps, run.probs, run.alpha)
    built = [
        charts.curves(
            sw, y="weight", color="sequence", title="t", y_title="y", rule_x=4, hline=0.5
        ),
        charts.margin_map(frames.margins(prob, run.W[-1], run.alpha, sol, opt), title="m"),
        charts.singular_values(frames.singular_values({"W": run}), title="s", rtol=1e-4),
    ]
    for chart in built:
        spec = json.dumps(chart.to_dict())
        layers = spec.count('"mark"')
        assert spec.count('"tooltip"') >= layers, "a layer without tooltips"


# -- edited 2-D data in a link (ui/linkdata.py) ------------------------------------------------
_FLOATS = hst.floats(allow_nan=False, allow_infinity=False, width=64)


@given(n=hst.integers(1, 8), T=hst.integers(1, 12), data=hst.data())
def test_link_data_round_trips_every_float64_exactly(n, T, data):
    X = np.array(data.draw(hst.lists(_FLOATS, min_size=n * T * 2, max_size=n * T * 2)))
    Y = np.array(data.draw(hst.lists(hst.sampled_from([-1.0, 1.0]), min_size=n, max_size=n)))
    Z = np.array(data.draw(hst.lists(_FLOATS, min_size=2 * n, max_size=2 * n)))
    v = np.array(data.draw(hst.lists(_FLOATS, min_size=2, max_size=2)))
    text = linkdata.encode("random_3_4_0", X.reshape(n, T, 2), Y, Z.reshape(n, 2), v)
    tag, X2, Y2, Z2, v2 = linkdata.decode(text, max_n=8, max_T=12)
    assert tag == "random_3_4_0"
    for a, b in ((X.reshape(n, T, 2), X2), (Y, Y2), (Z.reshape(n, 2), Z2), (v, v2)):
        np.testing.assert_array_equal(a, b)
        assert np.array_equal(np.signbit(a), np.signbit(b))  # -0.0 survives too


@pytest.mark.parametrize(
    "text,why",
    [
        ("a|1,1|1,2|1|1,2", "TAG|n,T|X|Y|Z|v"),
        ("a|x,1|1,2|1|1,2|1,2", "n,T"),
        (
            "a|9,1|"
            + ",".join(["1"] * 18)
            + "|"
            + ",".join(["1"] * 9)
            + "|"
            + ",".join(["1"] * 18)
            + "|1,2",
            "1 ≤ n ≤ 8",
        ),
        ("a|1,1|1|1|1,2|1,2", "the tokens must have 2 numbers; got 1"),
        ("a|1,1|1,inf|1|1,2|1,2", "the tokens must be finite"),
        ("a|1,1|1,2|one|1,2|1,2", "the labels must be numbers"),
        ("a|1,1|1,2|1|1,2|" + "1" * 20_000, "at most 12,000 characters"),
    ],
)
def test_malformed_link_data_is_refused_with_the_reason(text, why):
    with pytest.raises(ValueError, match=re.escape(why)):
        linkdata.decode(text, max_n=8, max_T=12)


def test_shared_runs_keep_the_newest_and_drop_the_oldest():
    from ui.cache import SharedRuns

    runs = SharedRuns(2)
    runs.put("a", 1)
    runs.put("b", 2)
    assert runs.get("a") == 1  # reading does not refresh
    runs.put("c", 3)
    assert runs.get("a") is None and runs.get("b") == 2 and runs.get("c") == 3
    runs.put("b", 4)  # a rewrite makes "b" the newest
    runs.put("d", 5)
    assert runs.get("c") is None and runs.get("b") == 4 and runs.get("d") == 5


def test_a_log_band_gives_vega_only_positive_values():
    """mean − std ≤ 0 (and a zero mean) must not reach a log axis: one such value leaves
    the scale without a domain and the panel blank (the NTP charts' 1 − top-SCC mass)."""
    import pandas as pd

    from attsvm_charts.bands import band

    df = pd.DataFrame(
        dict(step=[0, 1, 2, 3], mean=[0.5, 1e-3, 0.0, 2e-4], std=[0.1, 2e-3, 0.0, 1e-4], curve="c")
    )
    spec = band(df, x="step", y="mean", color="curve", title="t", y_title="y", log_y=True).to_dict()
    rows = next(iter(spec["datasets"].values()))
    assert [r["step"] for r in rows] == [0, 1, 3]
    assert all(r["lo"] > 0 and r["mean"] > 0 for r in rows)
    assert rows[1]["lo"] == pytest.approx(1e-4) and rows[2]["lo"] == pytest.approx(1e-4)
    lin = band(df, x="step", y="mean", color="curve", title="t", y_title="y").to_dict()
    assert len(next(iter(lin["datasets"].values()))) == 4  # a linear axis keeps every row


def _sidebar_of(page):
    from streamlit.testing.v1 import AppTest

    def script(page):
        from ui import sidebar

        sidebar.render(page=page)

    at = AppTest.from_function(script, args=(page,), default_timeout=60).run()
    assert not at.exception
    return [e.proto.label for e in at.get("expander")]


def test_the_sidebar_folds_away_only_what_a_page_does_not_use():
    from ui import sidebar

    assert _sidebar_of("small-init-rank") == [sidebar.UNUSED_TRAINING_LABEL]
    assert _sidebar_of("next-token") == [sidebar.UNUSED_LABEL]
    assert _sidebar_of("token-selection") == []
