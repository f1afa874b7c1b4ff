"""attsvm.export: the bundle holds what it says, and its reproduce.py, run in a fresh
interpreter, recomputes the exported numbers."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import attsvm
from attsvm import export
from attsvm import io as aio

ROOT = Path(__file__).resolve().parents[1]


def reproduce(target: Path, cwd: Path) -> subprocess.CompletedProcess:
    """Run a bundle's reproduce.py in a fresh interpreter with attsvm importable."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    script = cwd / "reproduce.py"
    args = [sys.executable, str(script)] + ([str(target)] if target.is_file() else [])
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def single():
    """A live-style run: two GD chunks glued together, as the playground records them."""
    prob = attsvm.random_problem(n=4, T=5, d=6, seed=3)
    kw = dict(param="W", lr=0.1, normalized=True, loss="logistic", seed=0)
    a = attsvm.train(prob, steps=60, record_every=3, **kw)
    b = attsvm.train(prob, steps=60, record_every=3, init=a.final_params, **kw)
    glue = lambda x, y: np.concatenate([x, y[1:]])  # noqa: E731
    run = attsvm.Trajectory(
        W=glue(a.W, b.W),
        probs=glue(a.probs, b.probs),
        loss=glue(a.loss, b.loss),
        grad_norm=glue(a.grad_norm, b.grad_norm),
        steps=glue(a.steps, 60 + b.steps),
        K=None,
        Q=None,
        overflow_at=np.asarray(-1),
        settings={},
    )
    sols = {nm: attsvm.solve_att_svm(prob, alpha=run.alpha, norm=nm) for nm in ("fro", "nuc")}
    data = export.build_bundle(
        problem=prob,
        run=run,
        solutions=sols,
        train=kw,
        settings={"n": 4, "note": "<b>kept as text</b>"},
        charts={"loss": '{"mark": "line"}', "loss_page": "<html></html>"},
        page="Token selection",
        url="http://localhost/?n=4",
        max_records=25,
    )
    return prob, run, sols, data


def test_bundle_lists_settings_data_trajectory_svms_charts_and_script(single):
    prob, run, sols, data = single
    files = export.read_bundle(data)
    assert set(files) == {
        "settings.json",
        "reproduce.py",
        "data/problem.npz",
        "data/problem.csv",
        "trajectory/trajectory.npz",
        "trajectory/trajectory.csv",
        "svm/fro.npz",
        "svm/nuc.npz",
        "svm/fro_W.csv",
        "svm/nuc_W.csv",
        "svm/solutions.csv",
        "charts/loss.json",
        "charts/loss_page.html",
    }
    meta = json.loads(files["settings.json"])
    assert meta["format"] == export.FORMAT and meta["attsvm_version"] == attsvm.__version__
    assert meta["train"]["steps"] == 120 and meta["train"]["record_every"] == 3
    assert meta["problem"]["n"] == 4 and meta["url"].endswith("?n=4")
    assert meta["solutions"]["fro"]["alpha"] == run.alpha.tolist()
    assert set(meta["files"]) == set(files)
    for name in ("data/problem.npz", "data/problem.csv"):
        back = aio.load_problem(files[name], filename=name)
        np.testing.assert_array_equal(back.X, prob.X)
    W = np.loadtxt(io.BytesIO(files["svm/fro_W.csv"]), delimiter=",")
    np.testing.assert_array_equal(W, sols["fro"].W)


def test_long_trajectories_are_subsampled_keeping_first_and_last(single):
    _, run, _, data = single
    with np.load(io.BytesIO(export.read_bundle(data)["trajectory/trajectory.npz"])) as R:
        idx, W, steps = R["index"], R["W"], R["steps"]
    assert len(run.steps) == 41 and len(idx) <= 25 and idx[0] == 0 and idx[-1] == 40
    np.testing.assert_array_equal(W, run.W[idx])
    np.testing.assert_array_equal(steps, run.steps[idx])
    csv = export.read_bundle(data)["trajectory/trajectory.csv"].decode().splitlines()
    assert csv[0].startswith("step,loss,grad_norm,norm_W,s_selected_0") and "corr_nuc" in csv[0]
    assert len(csv) == len(idx) + 1


def test_equal_inputs_give_equal_bytes(single):
    prob, run, sols, data = single
    again = export.build_bundle(
        problem=prob,
        run=run,
        solutions=sols,
        train=dict(param="W", lr=0.1, normalized=True, loss="logistic", seed=0),
        settings={"n": 4, "note": "<b>kept as text</b>"},
        charts={"loss": '{"mark": "line"}', "loss_page": "<html></html>"},
        page="Token selection",
        url="http://localhost/?n=4",
        max_records=25,
    )
    assert again == data


def test_the_snippet_reproduces_the_exported_numbers_in_a_fresh_interpreter(single, tmp_path):
    *_, data = single
    zipfile.ZipFile(io.BytesIO(data)).extractall(tmp_path)
    out = reproduce(tmp_path, tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "reproduced: all numbers agree" in out.stdout
    for what in ("GD W", "GD probs", "GD loss", "SVM fro objective", "SVM nuc direction"):
        assert what in out.stdout


def test_a_changed_number_is_caught(single, tmp_path):
    *_, data = single
    zipfile.ZipFile(io.BytesIO(data)).extractall(tmp_path)
    path = tmp_path / "trajectory" / "trajectory.npz"
    with np.load(path) as R:
        arrays = dict(R)
    arrays["loss"][5] *= 1.001
    np.savez(path, **arrays)
    out = reproduce(tmp_path, tmp_path)
    assert out.returncode == 1 and "GD loss" in out.stdout and "DIFFERS" in out.stdout


def test_a_batch_of_kq_runs_with_explicit_inits_reproduces_from_the_zip(tmp_path):
    prob = attsvm.random_problem(n=3, T=4, d=4, seed=5)
    rng = np.random.default_rng(0)
    inits = [
        (0.3 * rng.standard_normal((4, 2)), 0.3 * rng.standard_normal((4, 2))) for _ in range(3)
    ]
    run = attsvm.train_batch([prob] * 3, param="KQ", m=2, steps=40, record_every=4, init=inits)
    data = export.build_bundle(
        problem=prob, run=run, init=inits, solutions={"nuc": attsvm.solve_att_svm(prob, norm="nuc")}
    )
    assert "data/init.npz" in export.read_bundle(data)
    bundle = tmp_path / "bundle.zip"
    bundle.write_bytes(data)
    (tmp_path / "reproduce.py").write_bytes(export.read_bundle(data)["reproduce.py"])
    out = reproduce(bundle, tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    "kw, match",
    [
        (dict(charts={"../evil": "{}"}), "`charts` names"),
        (dict(charts={"ok": b"bytes"}), "chart text"),
        (dict(solutions={"fro": "W"}), "SvmSolution"),
        (dict(tables={"t": [1, 2]}), "DataFrame"),
        (dict(init=np.zeros((2, 2))), "needs a `run`"),
        (dict(problem="X"), "attsvm.Problem"),
        (dict(problem=None, solutions={"fro": None}), "must be given with"),
    ],
)
def test_bad_bundle_arguments_are_refused(kw, match):
    args = dict(problem=attsvm.random_problem(n=2, T=2, d=2))
    with pytest.raises(ValueError, match=match):
        export.build_bundle(**{**args, **kw})


def test_a_sweep_bundle_holds_tables_and_charts_without_data():
    import pandas as pd

    data = export.build_bundle(
        problem=None,
        tables={"runs": pd.DataFrame({"d": [2, 4]})},
        charts={"bars": "{}"},
        settings={"runs": 3},
    )
    files = export.read_bundle(data)
    assert set(files) == {"settings.json", "reproduce.py", "tables/runs.csv", "charts/bars.json"}
    assert json.loads(files["settings.json"])["problem"] is None


def test_a_hand_built_trajectory_needs_its_gd_settings():
    prob = attsvm.random_problem(n=2, T=3, d=2)
    r = attsvm.train(prob, steps=4)
    bare = attsvm.Trajectory(
        W=r.W,
        probs=r.probs,
        loss=r.loss,
        grad_norm=r.grad_norm,
        steps=r.steps,
        K=None,
        Q=None,
        overflow_at=r.overflow_at,
        settings={},
    )
    with pytest.raises(ValueError, match="GD settings"):
        export.build_bundle(problem=prob, run=bare)
