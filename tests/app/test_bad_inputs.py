"""Bad-input suite: hostile, malformed, huge and out-of-range values through every way in —
the link's query parameters, the widgets, the upload and the hosted budgets. Each must end
in a clear message (or a safely ignored value) and an app that still works afterwards."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from conftest import assert_clean, charts, open_link, open_page, texts

import attsvm
from attsvm import io as aio
from attsvm import limits
from ui import budget, upload_ui

HOSTILE = [
    "<script>alert(1)</script>",
    "1e9",
    "-5",
    "nan",
    "inf",
    "-inf",
    "1" * 400,
    "![x](http://evil.example/p.png)",
    "`; rm -rf /",
    "\u202e\u0000",
    "[1,2]",
]
# Every URL-bound widget: the sidebar on every page, plus each page's own controls.
SIDEBAR_KEYS = [
    "preset",
    "n",
    "T",
    "d",
    "seed",
    "attention",
    "head",
    "lam",
    "param",
    "m",
    "loss",
    "lr",
    "steps",
    "ngd",
    "init",
    "init_seed",
]
PAGE_KEYS = {
    "playground.py": ["iter"],
    "basins.py": ["bas_n", "bas_T", "bas_d", "bas_seed", "bas_runs", "bas_radius", "bas_grid"],
    "overparam.py": ["ovp_d", "ovp_runs"],
    "rank.py": ["rank_n", "rank_T", "rank_d", "rank_inst"],
    "nonlinear.py": ["nl_head", "nl_lam", "nl_n", "nl_T", "nl_d", "nl_seed", "nl_steps", "nl_thr"],
    "sequences.py": ["seq_mode", "seq_i"],
    "geometry.py": ["geo_src", "geo_n", "geo_T", "geo_seed", "geo_init"],
}


def no_raw_markup(at) -> None:
    """User text reaches the page only inside code spans or backslash-escaped: no live HTML,
    links or images."""
    for el in list(at.markdown) + list(at.caption) + list(at.error) + list(at.warning):
        outside = re.sub(r"\\.", "", re.sub(r"`[^`]*`", "", el.value))
        assert "<script" not in outside and "](http" not in outside, el.value


@pytest.mark.parametrize("page", list(PAGE_KEYS))
def test_hostile_link_parameters_are_ignored_with_a_note(page):
    keys = SIDEBAR_KEYS + PAGE_KEYS[page]
    at = open_link(page, {k: HOSTILE[j % len(HOSTILE)] for j, k in enumerate(keys)})
    assert_clean(at)
    note = " ".join(w.value for w in at.sidebar.warning)
    assert "Ignored link parameters" in note, note
    no_raw_markup(at)
    assert charts(at)  # defaults were used: the page works


@pytest.mark.parametrize("value", HOSTILE)
def test_every_hostile_string_is_survived_on_the_playground(value):
    at = open_page(
        "playground.py",
        query={"n": value, "lr": value, "preset": value, "loss": value, "iter": value},
    )
    assert_clean(at)
    no_raw_markup(at)
    assert len(charts(at)) == 6


@pytest.mark.parametrize(
    "key, value",
    [
        ("n", 10**9),
        ("T", -1),
        ("d", 0),
        ("steps", 10**12),
        ("lr", float("nan")),
        ("lr", float("inf")),
        ("lr", -0.5),
        ("seed", 2**70),
        ("init_seed", -1),
    ],
)
def test_out_of_range_widget_values_are_refused_and_the_app_keeps_working(key, value):
    at = open_page("playground.py")
    before = at.number_input(key=key).value
    at.number_input(key=key).set_value(value).run()
    assert_clean(at)
    assert at.number_input(key=key).value == before  # Streamlit refuses the value
    assert len(charts(at)) == 6


@pytest.mark.parametrize(
    "page, key, value",
    [
        ("basins.py", "bas_runs", 10**9),
        ("basins.py", "bas_radius", float("inf")),
        ("overparam.py", "ovp_runs", -3),
        ("rank.py", "rank_inst", 10**9),
        ("nonlinear.py", "nl_thr", float("nan")),
        ("nonlinear.py", "nl_steps", 10**9),
    ],
)
def test_page_controls_refuse_out_of_range_values(page, key, value):
    at = open_page(page)
    before = at.number_input(key=key).value
    at.number_input(key=key).set_value(value).run()
    assert_clean(at)
    assert at.number_input(key=key).value == before
    assert charts(at)


REPRO_TEXT = ["repro-multi-token-ds", "repro-svm-rank-pairs", "repro-overparameterization-param"]


@pytest.mark.parametrize(
    "value",
    [
        "![x](http://evil.example/p.png)",
        "<script>alert(1)</script>",
        "(" * 500,
        "(1e309, nan)",
        "(10**9,)",
        "9" * 5000,
        "{'a': 1}",
    ],
)
def test_free_text_settings_on_the_reproduce_page_are_refused_inertly(value):
    at = open_page("reproduce.py")
    for key in REPRO_TEXT:
        at.text_input(key=key).set_value(value).run()
        assert_clean(at)
    assert len(at.error) == len(REPRO_TEXT)  # one refusal per card
    assert all("Cannot run this" in e.value for e in at.error)
    no_raw_markup(at)


# -- the upload path --------------------------------------------------------------------------
def _csv(prob) -> bytes:
    return aio.problem_to_csv(prob)


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return buf.getvalue()


def _with_nan(data: bytes) -> bytes:
    lines = data.decode().split("\n")
    cells = lines[1].split(",")  # the first token row
    cells[4] = "nan"
    lines[1] = ",".join(cells)
    return "\n".join(lines).encode()


P = attsvm.random_problem(n=3, T=4, d=5, seed=1)
BAD_UPLOADS = [
    ("nan.csv", _with_nan(_csv(P)), "finite"),
    ("inf.npz", _npz(X=np.full((2, 3, 2), np.inf), Y=np.ones(2), v=np.ones(2)), "finite"),
    ("shape.npz", _npz(X=P.X, Y=np.ones(7), v=P.v), "shape"),
    ("labels.npz", _npz(X=P.X, Y=np.array([0, 1, 2]), v=P.v), "+1 or -1"),
    ("html.csv", b"<script>alert(1)</script>\n<b>x</b>", "header"),
    ("huge.csv", b"kind,seq,token,label,f0\n" + b"x,0,0,1,1\n" * 300_000, "at most"),
    ("sizes.npz", _npz(X=np.ones((1000, 2, 2)), Y=np.ones(1000), v=np.ones(2)), "between 1 and"),
    ("binary.npz", bytes(range(256)) * 10, "NPZ"),
    (
        "pickle.npz",
        _npz(X=np.array([{"evil": 1}], dtype=object), Y=np.ones(1), v=np.ones(1)),
        "numeric",
    ),
]


def _upload(at, name: str, data: bytes):
    at.file_uploader(key="upload").upload(name, data, "application/octet-stream").run()
    assert_clean(at)
    return at


@pytest.mark.parametrize("name, data, rule", BAD_UPLOADS, ids=[b[0] for b in BAD_UPLOADS])
def test_bad_uploads_show_a_clear_error_and_the_app_keeps_working(monkeypatch, name, data, rule):
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    at = open_page("playground.py", query={"preset": "upload"})
    _upload(at, name, data)
    errors = " ".join(e.value for e in at.error)
    assert "This file cannot be used" in errors and rule in errors, errors
    no_raw_markup(at)
    assert len(charts(at)) == 6  # the default problem is still shown


def test_a_good_upload_replaces_the_problem_and_a_bad_one_after_it_is_refused(monkeypatch):
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    at = open_page("playground.py", query={"preset": "upload"})
    _upload(at, "mine.csv", _csv(P))
    assert not at.error and "custom tokens" in texts(at)
    assert "n = 3, T = 4, d = 5" in texts(at)
    at.file_uploader(key="upload").clear().run()
    _upload(at, "bad.npz", _npz(X=P.X, Y=np.ones(3)))  # no head vector v
    assert "`head vector v` must be present" in " ".join(e.value for e in at.error)
    assert "custom tokens" not in texts(at) and len(charts(at)) == 6


@pytest.mark.parametrize("head", ["relu", "quadratic"])
def test_an_upload_with_a_nonlinear_head_is_explored_like_a_random_one(monkeypatch, head):
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    Q = attsvm.random_problem(n=3, T=4, d=5, seed=1, head=head, lam=0.3)
    head_arrays = dict(V=Q.V) if head == "relu" else dict(v=Q.v, lam=np.array(Q.lam))
    data = _npz(X=Q.X, Y=Q.Y, Z=Q.Z, head=np.array(head), **head_arrays)
    at = open_page("playground.py", query={"preset": "upload"})
    _upload(at, "mine.npz", data)
    shown = texts(at)
    assert not at.error and f"custom tokens, {head} head" in shown, shown
    assert f"{head} head" in shown and len(charts(at)) == 6
    assert any("nonlinear head" in i.value for i in at.info)
    # the same problem as the library builds from the file
    spec = upload_ui.upload_spec(aio.load_problem(data, filename="mine.npz"), "cross")
    got = spec.build()
    assert (got.head, got.lam) == (head, Q.lam if head == "quadratic" else 0.0)
    np.testing.assert_array_equal(got.X, Q.X)
    np.testing.assert_array_equal(
        got.V if head == "relu" else got.v, Q.V if head == "relu" else Q.v
    )
    at.switch_page("app_pages/nonlinear.py").run()
    assert_clean(at)
    assert not at.error and charts(at)


# -- hosted budgets, session allowance, cancel and deadline -----------------------------------
def test_hosted_mode_refuses_an_oversized_action_with_the_largest_that_fits(monkeypatch):
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    at = open_page("basins.py", query={"bas_runs": 1024, "bas_grid": 40, "steps": 20000})
    msg = " ".join(e.value for e in at.error)
    assert "hosted mode" in msg and "`runs` must be at most 500" in msg, msg
    at.number_input(key="bas_runs").set_value(16).run()
    at.number_input(key="bas_grid").set_value(4).run()
    at.number_input(key="steps").set_value(200).run()
    assert_clean(at)
    assert not at.error and charts(at)


def test_a_session_over_its_compute_allowance_is_told_when_to_come_back(monkeypatch):
    monkeypatch.setenv("ATTSVM_MODE", "hosted")
    at = open_page("playground.py")
    spent = budget.SessionBudget(limits.LIMITS["hosted"])
    spent.charge(limits.LIMITS["hosted"].session_seconds + 1)
    at.session_state["_attsvm_session_budget"] = spent
    at.number_input(key="seed").set_value(7).run()
    assert_clean(at)
    msg = " ".join(e.value for e in at.error)
    assert "this session used" in msg and "try again in" in msg, msg


def test_a_cancelled_sweep_stays_cancelled_until_run_again():
    at = open_page("overparam.py", query={"ovp_runs": 2, "steps": 50})
    assert charts(at)
    pspec, tspec = at.session_state["_attsvm_specs"]
    # What the Cancel button's callback stores (the sweep's settings, hashed).
    at.session_state["_ovp_cancelled"] = hash((pspec, tspec, (2, 4, 8, 12), 2))
    at.run()
    assert_clean(at)
    assert "Cancelled" in texts(at) and not charts(at)
    at.button(key="ovp_again").click().run()
    assert_clean(at)
    assert charts(at) and "Cancelled" not in texts(at)


def test_a_sweep_past_the_action_deadline_stops_with_a_note(monkeypatch):
    import dataclasses

    quick = dataclasses.replace(limits.LIMITS["hosted"], action_seconds=0.0)
    monkeypatch.setattr(limits, "current", lambda: quick)
    at = open_page("rank.py", query={"rank_inst": 1})
    assert_clean(at)
    assert "Partial result" in " ".join(w.value for w in at.warning)
