"""One downloadable bundle per result: settings, data, trajectory, SVMs, charts and a script.

`build_bundle` returns the bytes of a zip archive, built in memory:

    settings.json               what was run (problem, GD settings, SVM selections, page, link)
    data/problem.npz|.csv       tokens X, labels Y, queries Z, head v (V) — the upload format
    data/init.npz               explicit initialization, when there was one
    trajectory/trajectory.npz   W(k), softmax weights, loss, ‖∇‖ at the recorded steps
    trajectory/trajectory.csv   per recorded step: loss, ‖∇‖, ‖W‖, selected softmax weights,
                                correlation with each SVM solution
    svm/<name>.npz, svm/<name>_W.csv, svm/solutions.csv    the SVM solutions
    tables/<name>.csv           result tables the caller passes (sweeps)
    charts/<name>.json|.html    charts the caller passes as text (Altair JSON / HTML)
    reproduce.py                rebuilds the problem, reruns GD and the SVMs with the same
                                settings and checks the numbers against the bundle

Long trajectories are subsampled (evenly, first and last record kept) to at most
`max_records` records and `MAX_FLOATS` numbers; `reproduce.py` compares at the same records.
The library writes the charts it is given and never imports a plotting or UI package.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from collections.abc import Mapping

import numpy as np

from . import __version__
from .io import problem_arrays, problem_to_csv
from .metrics import correlation
from .problems import Problem
from .svm import SvmSolution
from .training import TRAIN_OPTIONS
from .trajectory import Trajectory

FORMAT = "attsvm-export/1"
TRAIN_KEYS = TRAIN_OPTIONS
MAX_FLOATS = 4_000_000  # numbers in the exported trajectory (≈ 32 MB as float64)
TOLERANCE = {"trajectory": 1e-6, "svm": 1e-6}  # |got − want| / (1 + |want|), reproduce.py
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_STAMP = (1980, 1, 1, 0, 0, 0)  # fixed zip timestamps: equal inputs give equal bytes


def _jsonable(x):
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.integer, np.floating, np.bool_)):
        return x.item()
    if isinstance(x, (set, frozenset, tuple)):
        return list(x)
    return str(x)


def _npz(**arrays) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: np.asarray(v) for k, v in arrays.items() if v is not None})
    return buf.getvalue()


def _csv_matrix(A: np.ndarray) -> bytes:
    rows = (",".join(repr(float(x)) for x in row) for row in np.atleast_2d(A))
    return ("\n".join(rows) + "\n").encode()


def _check_name(kind: str, name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(
            f"`{kind}` names must be 1-64 letters, digits, '_', '.', '-'; got {name!r:.70}"
        )
    return name


def subsample(k: int, max_records: int) -> np.ndarray:
    """Indices of at most `max_records` of k records, evenly spread, first and last kept."""
    if k <= max_records:
        return np.arange(k)
    return np.unique(np.round(np.linspace(0, k - 1, max(max_records, 2))).astype(int))


def _train_settings(run: Trajectory, train: Mapping | None) -> dict:
    cfg = {k: run.settings[k] for k in TRAIN_KEYS if k in run.settings}
    cfg.update(train or {})
    steps = np.asarray(run.steps)
    r = int(steps[1] - steps[0]) if len(steps) > 1 else max(int(steps[-1]), 1)
    if len(steps) > 1 and not np.array_equal(steps, np.arange(0, steps[-1] + 1, r)):
        raise ValueError(
            f"`run.steps` must be 0, r, 2r, …, steps to be reproduced; got {steps[:4].tolist()}…"
        )
    # What was recorded is what gets reproduced (a live run may have stopped early).
    cfg.update(steps=int(steps[-1]), record_every=r)
    missing = [k for k in ("param", "lr", "normalized", "loss") if k not in cfg]
    if missing:
        raise ValueError(f"`train` must give the GD settings {missing} (not in run.settings)")
    if cfg["steps"] < 1:
        raise ValueError("`run` must hold at least one GD step to be reproduced; got step 0 only")
    return cfg


def _init_arrays(init, param: str, batched: bool) -> dict | None:
    if init is None:
        return None
    if param == "W":
        return {"W": np.asarray(init, dtype=float)}
    if batched:
        return {
            "K": np.stack([np.asarray(k, float) for k, _ in init]),
            "Q": np.stack([np.asarray(q, float) for _, q in init]),
        }
    K, Q = init
    return {"K": np.asarray(K, float), "Q": np.asarray(Q, float)}


def _problem_meta(problem: Problem | None) -> dict | None:
    """The problem's shape and settings for settings.json (None for a sweep)."""
    if problem is None:
        return None
    return dict(
        n=problem.n,
        T=problem.T,
        d=problem.d,
        attention=problem.attention,
        head=problem.head,
        queries=problem.queries,
        query_index=problem.query_index,
        lam=problem.lam,
        name=problem.name,
    )


def _zipped(files: dict) -> bytes:
    """The zip of `files` (name → bytes), members sorted and time-stamped `_STAMP`, so equal
    contents give equal bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in sorted(files):
            zf.writestr(
                zipfile.ZipInfo(name, _STAMP), files[name], compress_type=zipfile.ZIP_DEFLATED
            )
    return buf.getvalue()


def build_bundle(
    *,
    problem: Problem | None,
    run: Trajectory | None = None,
    solutions: Mapping[str, SvmSolution] | None = None,
    train: Mapping | None = None,
    init=None,
    settings: Mapping | None = None,
    charts: Mapping[str, str] | None = None,
    tables: Mapping | None = None,
    page: str = "",
    url: str = "",
    max_records: int = 2000,
) -> bytes:
    """Build the export zip (module doc) and return its bytes.

    Args:
        problem: the problem that was run; None for a sweep over many generated problems
            (then only settings, tables and charts are written, and no run or solutions).
        run: its GD trajectory (single, or a batch of runs on this problem), or None.
        solutions: name → SvmSolution (e.g. {"fro": W^mm, "nuc": W^mm_*}); names become
            file names.
        train: GD keyword arguments of attsvm.train not recorded in `run.settings` (a
            trajectory built by hand, e.g. from live chunks, carries none).
        init: the explicit initialization (as given to attsvm.train / train_batch), or
            None for the default one.
        settings: the caller's own settings (the app's sidebar), stored as they are.
        charts: name → chart text: Altair JSON (`chart.to_json()`) or HTML (`to_html()`);
            a name without extension gets .html when the text starts with "<", else .json.
        tables: name → pandas DataFrame (written as CSV).
        page, url: where the result was shown; the link that restores it.
        max_records: most trajectory records exported (subsampled beyond).
    """
    solutions = _checked_inputs(problem, run, solutions)
    if run is None and init is not None:
        raise ValueError("`init` needs a `run` to go with it; got run=None")
    meta: dict = {
        "format": FORMAT,
        "attsvm_version": __version__,
        "page": page,
        "url": url,
        "problem": _problem_meta(problem),
        "settings": dict(settings or {}),
        "train": None,
        "runs": None,
        "trajectory": None,
        "solutions": {},
        "tolerance": TOLERANCE,
    }
    # Members in order: data, trajectory, SVM solutions, tables and charts, then the manifest.
    files = _data_files(problem)
    if run is not None:
        files.update(_trajectory_files(run, train, init, solutions, max_records, meta))
    files.update(_svm_files(solutions, meta))
    files.update(_table_and_chart_files(tables, charts))
    meta["files"] = sorted(files) + ["settings.json", "reproduce.py"]
    files["settings.json"] = json.dumps(meta, indent=2, default=_jsonable).encode()
    files["reproduce.py"] = REPRODUCE.encode()
    return _zipped(files)


def _checked_inputs(problem, run, solutions) -> dict:
    """The bundle's inputs checked at the boundary; returns the solutions as a dict."""
    if problem is None and (run is not None or solutions):
        raise ValueError("`problem` must be given with a run or solutions; got None")
    if problem is not None and not isinstance(problem, Problem):
        raise ValueError(
            f"`problem` must be an attsvm.Problem or None; got {type(problem).__name__}"
        )
    if run is not None and not isinstance(run, Trajectory):
        raise ValueError(f"`run` must be an attsvm.Trajectory or None; got {type(run).__name__}")
    solutions = dict(solutions or {})
    for name, sol in solutions.items():
        _check_name("solutions", name)
        if not isinstance(sol, SvmSolution):
            raise ValueError(
                f"`solutions[{name!r}]` must be an SvmSolution; got {type(sol).__name__}"
            )
    return solutions


def _data_files(problem: Problem | None) -> dict[str, bytes]:
    """data/problem.npz (and .csv where the upload format can hold the problem)."""
    if problem is None:
        return {}
    if problem.queries != "single":
        return {
            "data/problem.npz": _npz(
                X=problem.X,
                Y=problem.Y,
                Z=problem.Z,
                v=problem.v,
                V=problem.V,
                head=np.array(problem.head),
                lam=np.array(problem.lam),
                queries=np.array(problem.queries),
            )
        }
    files = {"data/problem.npz": _npz(**problem_arrays(problem))}
    try:
        files["data/problem.csv"] = problem_to_csv(problem)
    except ValueError:  # quadratic head / non-default query: NPZ only
        pass
    return files


def _trajectory_files(
    run: Trajectory, train, init, solutions: dict, max_records: int, meta: dict
) -> dict[str, bytes]:
    """trajectory/*.npz|csv and data/init.npz; records the GD settings in `meta`."""
    cfg = _train_settings(run, train)
    meta["train"] = cfg
    meta["runs"] = len(run) if run.batched else None
    meta["backend"] = run.backend
    ax = 1 if run.batched else 0
    k = run.W.shape[ax]
    per = run.W[..., 0, :, :].size + np.take(run.probs, 0, axis=ax).size
    keep = subsample(k, min(max_records, max(2, MAX_FLOATS // max(per, 1))))
    take = lambda a: np.take(a, keep, axis=ax)  # noqa: E731
    files = {
        "trajectory/trajectory.npz": _npz(
            index=keep,
            steps=np.asarray(run.steps)[keep],
            W=take(run.W),
            probs=take(run.probs),
            loss=take(run.loss),
            grad_norm=take(run.grad_norm),
            K=run.K,
            Q=run.Q,
            overflow_at=run.overflow_at,
        )
    }
    files["trajectory/trajectory.csv"] = _trajectory_csv(run, keep, solutions)
    meta["trajectory"] = dict(
        records=int(k), exported=int(len(keep)), subsampled=bool(len(keep) < k)
    )
    ini = _init_arrays(init, cfg["param"], run.batched)
    if ini is not None:
        files["data/init.npz"] = _npz(**ini)
    return files


def _svm_files(solutions: dict, meta: dict) -> dict[str, bytes]:
    """svm/<name>.npz, svm/<name>_W.csv and svm/solutions.csv; records them in `meta`."""
    files: dict[str, bytes] = {}
    summary = ["name,norm,feasible,status,objective,alpha"]
    for name, sol in solutions.items():
        alpha = np.asarray(sol.alpha)
        meta["solutions"][name] = dict(
            norm=sol.norm,
            alpha=alpha.tolist(),
            feasible=bool(sol.feasible),
            status=sol.status,
            objective=sol.objective,
            solver=sol.solver,
        )
        files[f"svm/{name}.npz"] = _npz(
            W=sol.W,
            support=sol.support,
            margins=sol.margins,
            duals=sol.duals,
            alpha=alpha,
            feasible=np.array(sol.feasible),
        )
        if sol.W is not None:
            files[f"svm/{name}_W.csv"] = _csv_matrix(sol.W)
        obj = "" if sol.objective is None else repr(float(sol.objective))
        status = str(sol.status).replace('"', "'")
        summary.append(
            f'{name},{sol.norm},{sol.feasible},"{status}",{obj},'
            f'"{" ".join(str(int(a)) for a in alpha.ravel())}"'
        )
    if solutions:
        files["svm/solutions.csv"] = ("\n".join(summary) + "\n").encode()
    return files


def _table_and_chart_files(tables: Mapping | None, charts: Mapping | None) -> dict[str, bytes]:
    """tables/<name>.csv and charts/<name>.json|.html, names and types checked."""
    files: dict[str, bytes] = {}
    for name, df in (tables or {}).items():
        _check_name("tables", name)
        if not hasattr(df, "to_csv"):
            raise ValueError(
                f"`tables[{name!r}]` must be a pandas DataFrame; got {type(df).__name__}"
            )
        files[f"tables/{name}.csv"] = df.to_csv(index=False).encode()
    for name, text in (charts or {}).items():
        _check_name("charts", name)
        if not isinstance(text, str):
            raise ValueError(
                f"`charts[{name!r}]` must be chart text (JSON or HTML); got {type(text).__name__}"
            )
        if not name.endswith((".json", ".html")):
            name += ".html" if text.lstrip().startswith("<") else ".json"
        files[f"charts/{name}"] = text.encode()
    return files


def _trajectory_csv(run: Trajectory, keep: np.ndarray, solutions: dict) -> bytes:
    import pandas as pd

    if run.batched:
        cols = {
            "run": np.repeat(np.arange(len(run)), len(keep)),
            "step": np.tile(np.asarray(run.steps)[keep], len(run)),
            "loss": run.loss[:, keep].ravel(),
            "grad_norm": run.grad_norm[:, keep].ravel(),
            "norm_W": np.linalg.norm(run.W[:, keep], axis=(-2, -1)).ravel(),
        }
        return pd.DataFrame(cols).to_csv(index=False).encode()
    W = run.W[keep]
    cols = {
        "step": np.asarray(run.steps)[keep],
        "loss": run.loss[keep],
        "grad_norm": run.grad_norm[keep],
        "norm_W": np.linalg.norm(W, axis=(-2, -1)),
    }
    if run.probs.ndim == 3:  # single query: (k, n, T)
        final = run.probs[-1].argmax(-1)
        sel = run.probs[keep][:, np.arange(run.probs.shape[1]), final]
        for i in range(sel.shape[1]):
            cols[f"s_selected_{i}"] = sel[:, i]
    for name, sol in solutions.items():
        if sol.W is not None and sol.W.shape == W.shape[1:]:
            cols[f"corr_{name}"] = [correlation(w, sol.W) if np.any(w) else np.nan for w in W]
    return pd.DataFrame(cols).to_csv(index=False).encode()


def read_bundle(data: bytes) -> dict[str, bytes]:
    """The files of a bundle (name → bytes), e.g. to inspect one in a test or notebook."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


# The script shipped in every bundle. Kept short and dependent on the public API only.
REPRODUCE = '''\
"""Reproduce this attsvm export: rebuild the problem, rerun GD and the SVMs, compare.

    python reproduce.py              # in the unzipped bundle
    python reproduce.py bundle.zip   # or straight from the zip

Needs attsvm importable (pip install -r requirements.txt in the attsvm repository).
Exits 1 when a number disagrees beyond the tolerance in settings.json.
"""
import io
import json
import sys
import zipfile
from pathlib import Path

import numpy as np

import attsvm

SRC = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent)


def read(name):
    if SRC.is_file():
        with zipfile.ZipFile(SRC) as z:
            return z.read(name) if name in z.namelist() else None
    path = SRC / name
    return path.read_bytes() if path.exists() else None


def arrays(name):
    raw = read(name)
    return None if raw is None else dict(np.load(io.BytesIO(raw), allow_pickle=False))


S = json.loads(read("settings.json"))
if S["problem"] is None:
    sys.exit("This bundle holds a sweep's tables and charts; rerun it from its settings.json.")
P, D = S["problem"], arrays("data/problem.npz")
prob = attsvm.Problem(X=D["X"], Y=D["Y"], Z=D.get("Z"), v=D.get("v"), V=D.get("V"),
                      head=P["head"], lam=P["lam"], query_index=P["query_index"],
                      queries=P["queries"], lengths=D.get("lengths"))
rows = []


def agree(what, got, want, tol):
    got, want = np.asarray(got, float), np.asarray(want, float)
    same_nan = np.array_equal(np.isnan(got), np.isnan(want))
    err = np.nanmax(np.abs(got - want) / (1 + np.abs(want)), initial=0.0) if same_nan else np.inf
    rows.append((what, float(err), tol))


if S["train"] is not None:
    I = arrays("data/init.npz")
    init = None if I is None else (I["W"] if "W" in I else (I["K"], I["Q"]))
    tol, ax = S["tolerance"]["trajectory"], 0 if S["runs"] is None else 1
    if S["runs"] is None:
        run = attsvm.train(prob, init=init, **S["train"])
    else:
        if init is not None:
            init = list(init) if isinstance(init, np.ndarray) else list(zip(*init))
        run = attsvm.train_batch([prob] * S["runs"], init=init, **S["train"])
    R = arrays("trajectory/trajectory.npz")
    for key in ("W", "probs", "loss", "grad_norm"):
        agree(f"GD {key}", np.take(getattr(run, key), R["index"], axis=ax), R[key], tol)
for name, s in S["solutions"].items():
    sol = attsvm.solve_att_svm(prob, alpha=np.array(s["alpha"]), norm=s["norm"])
    rows.append((f"SVM {name} feasible", 0.0 if sol.feasible == s["feasible"] else np.inf, 0.0))
    if s["feasible"] and sol.feasible:
        Wref, tol = arrays(f"svm/{name}.npz")["W"], S["tolerance"]["svm"]
        agree(f"SVM {name} objective", sol.objective, s["objective"], tol)
        agree(f"SVM {name} direction", 1 - attsvm.correlation(sol.W, Wref), 0.0, tol)

ok = all(err <= tol for _, err, tol in rows)
for what, err, tol in rows:
    verdict = "ok" if err <= tol else "DIFFERS"
    print(f"{what:28s} max rel. diff {err:9.2e}  (tol {tol:.0e})  {verdict}")
print("reproduced: all numbers agree" if ok else "NOT reproduced")
sys.exit(0 if ok else 1)
'''
