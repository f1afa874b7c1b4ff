"""Export from the app: the bundle behind each page's button holds the page's result, and
the playground's — built from live GD chunks — reproduces in a fresh interpreter."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import streamlit
from conftest import open_page

from attsvm import export

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def downloads(monkeypatch):
    """Capture each download button's data (AppTest has no browser to run a deferred one)."""
    seen = {}
    real = streamlit.download_button

    def capture(label, data, *args, key=None, **kwargs):
        seen[key] = data
        return real(label, b"", *args, key=key, **kwargs)

    monkeypatch.setattr(streamlit, "download_button", capture)
    return seen


def _bundle(seen, key) -> dict[str, bytes]:
    data = seen[key]
    return export.read_bundle(data() if callable(data) else data)


def test_playground_export_reproduces_in_a_fresh_interpreter(downloads, tmp_path):
    at = open_page("playground.py", query={"steps": 200, "seed": 4, "param": "KQ"})
    at.button(key="pg_reset").click().run()
    at.button(key="pg_step").click().run()  # a partly played live run
    files = _bundle(downloads, "pg_export")
    meta = json.loads(files["settings.json"])
    assert meta["train"]["param"] == "KQ" and 0 < meta["train"]["steps"] < 200
    assert meta["settings"]["ProblemSpec"]["seed"] == 4
    assert {
        "charts/margins.json",
        "charts/loss.html",
        "svm/fro.npz",
        "svm/nuc.npz",
        "data/problem.csv",
        "trajectory/trajectory.npz",
    } <= set(files)
    with zipfile.ZipFile(io.BytesIO(downloads["pg_export"]())) as zf:
        zf.extractall(tmp_path)
    out = subprocess.run(
        [sys.executable, "reproduce.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "all numbers agree" in out.stdout


@pytest.mark.parametrize(
    "page, key, expect",
    [
        ("overparam.py", "ovp_export", {"tables/fractions.csv", "charts/fractions.json"}),
        ("rank.py", "rank_export", {"tables/ranks.csv", "charts/svm_ranks.html"}),
        ("basins.py", "bas_export", {"tables/selections.csv", "data/problem.npz"}),
        ("sequences.py", "seq_export", {"trajectory/trajectory.npz", "data/problem.npz"}),
        ("nonlinear.py", "nl_export", {"svm/one_token.npz", "tables/final_softmax.csv"}),
        (
            "staircase.py",
            "stair_export",
            {"tables/spectrum.csv", "charts/gap.json", "data/problem.npz"},
        ),
    ],
)
def test_every_result_page_exports_its_result(downloads, page, key, expect):
    open_page(
        page,
        query={
            "steps": 100,
            "ovp_runs": 2,
            "rank_inst": 1,
            "bas_runs": 4,
            "bas_grid": 2,
            "nl_steps": 200,
            "stair_steps": 1000,
        },
    )
    files = _bundle(downloads, key)
    assert expect <= set(files), sorted(files)
    assert json.loads(files["settings.json"])["page"]
