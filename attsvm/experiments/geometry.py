"""E1 / E1', the paper's 2-D pictures (docs/theory.md §4, `visualization1/2.ipynb`).

n = 2 sequences in d = 2 dimensions, labels +1. Normalized GD (η = 0.1, 2000 steps) from
W(0) = 0 for the W-parameterization and from K(0) = 0.1·N(0, I), Q(0) = 0 for (K, Q)
(so W(0) = 0 as well). Each query z_i is mapped by the iterate: the path k ↦ W(k) z_i
is drawn against the rays t·W^mm z_i (Frobenius SVM) and t·W^mm_* z_i (nuclear SVM).
docs/theory.md §6 facts 6 and 7 give the correlations along the way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import limits
from ..metrics import correlation
from ..model import jax
from ..optimizers import AUTHORS_GRADIENT
from ..problems import (
    PRESETS,
    check_choice,
    check_float,
    optimal_tokens,
    paper_problem,
    token_scores,
)
from ..svm import solve_att_svm
from ..training import train_batch
from .core import (
    Experiment,
    Progress,
    Result,
    check_settings,
    fmt,
    gd_price,
    no_progress,
    settings_dict,
)

NAMES = ("geometry-1", "geometry-2")
TITLE = "2-D geometry: GD paths W(k) z_i against the SVM directions"
# docs/theory.md §4 E1/E1' and §6 facts 6-7: {(param, svm): {step: corr}}
REFERENCE = {
    "geometry-1": {
        ("W", "fro"): {100: 0.625, 500: 0.994, 2000: 0.9997},
        ("W", "nuc"): {2000: 0.90},
        ("KQ", "nuc"): {100: 0.957, 500: 0.99986, 2000: 0.99988},
        ("KQ", "fro"): {2000: 0.89},
    },
    "geometry-2": {
        ("W", "fro"): {100: 0.9926, 500: 0.9992, 2000: 0.9996},
        ("KQ", "nuc"): {100: 0.9994, 2000: 0.9996},
    },
}
REFERENCE_SVM = {
    "geometry-1": {
        "fro": [[2.8536, -2.7029], [5.3714, 5.5805]],
        "nuc": [[0.4867, 0.4693], [7.0055, 6.7544]],
    },
    "geometry-2": {
        "fro": [[0.7926, -1.0865], [-0.6330, -0.3471]],
        "nuc": [[0.9938, -1.2597], [-0.1332, -0.2578]],
    },
}
PAPER = {
    "geometry-1": "W-GD corr with W^mm 0.625 / 0.994 / 0.9997 at steps 100 / 500 / 2000; "
    "(K,Q)-GD corr with W^mm_* 0.957 / 0.99986 / 0.99988, with W^mm ≈ 0.89",
    "geometry-2": "W-GD corr with W^mm 0.9926 / 0.9992 / 0.9996 at steps 100 / 500 / 2000; "
    "(K,Q)-GD corr with W^mm_* 0.9994 (100), 0.9996 (2000)",
}


@dataclass(frozen=True, kw_only=True)
class Settings:
    """preset: "geometry-1" (early Figure 1) or "geometry-2" (later Figure 1); steps, lr:
    normalized GD; kq_scale: std of K(0); seed: the seed of K(0)."""

    preset: str = "geometry-1"
    steps: int = 2000
    lr: float = 0.1
    kq_scale: float = 0.1
    seed: int = 0

    def __post_init__(self):
        check_choice("preset", self.preset, tuple(PRESETS))
        check_settings(self)
        check_float("kq_scale", self.kq_scale, 0.0, 10.0, lo_open=True)


def run(s: Settings = Settings(), *, progress: Progress = no_progress) -> Result:
    """The experiment in the authors' notebooks' order: initializations, GD for both
    parameterizations, both SVMs, then the frames (tokens, paths, rays, correlations)."""
    prob = paper_problem(s.preset)
    trajs = _train_both(prob, s, progress)
    progress(0.9, "SVMs")
    svms = {norm: solve_att_svm(prob, None, norm) for norm in ("fro", "nuc")}
    paths, corr = _path_frames(prob, trajs, svms)
    svm_rows = [
        dict(
            svm=norm,
            entry=f"W[{a},{b}]",
            ours=float(sol.W[a, b]) if sol.feasible else np.nan,
            paper=REFERENCE_SVM[s.preset][norm][a][b],
        )
        for norm, sol in svms.items()
        for a in range(2)
        for b in range(2)
    ]
    frames = {
        "tokens": _token_frame(prob),
        "paths": paths,
        "rays": _ray_frame(prob, svms, reach=float(np.hypot(paths.x, paths.y).max()) * 1.1),
        "correlation": corr,
        "svm": pd.DataFrame(svm_rows),
    }
    return Result(
        name=s.preset, frames=frames, summary=_summary(s, corr, svms), settings=settings_dict(s)
    )


def _train_both(prob, s: Settings, progress: Progress) -> dict:
    """{param: Trajectory}: normalized GD on W from 0 and on (K, Q) from (kq_scale·N, 0)."""
    d = prob.d
    rng = np.random.default_rng(s.seed)
    inits = {
        "W": np.zeros((d, d)),
        "KQ": (s.kq_scale * rng.standard_normal((d, d)), np.zeros((d, d))),
    }
    trajs = {}
    for j, param in enumerate(("W", "KQ")):
        progress(0.45 * j, f"gradient descent ({param})")
        # one run: on one device (train() would spread a batch of one over all of them)
        trajs[param] = train_batch(
            [prob],
            param=param,
            steps=s.steps,
            lr=s.lr,
            **AUTHORS_GRADIENT,  # the official code's loop: its numbers are the reference
            init=[inits[param]],
            record_every=1,
            devices=jax.devices()[:1],
        )[0]
    return trajs


def _token_frame(prob) -> pd.DataFrame:
    """One row per token: its coordinates, score and whether it is its sequence's optimum."""
    opt = optimal_tokens(prob)
    g = token_scores(prob)
    return pd.DataFrame(
        [
            dict(
                seq=i + 1,
                token=t + 1,
                x=prob.X[i, t, 0],
                y=prob.X[i, t, 1],
                score=g[i, t],
                optimal=bool(t == opt[i]),
            )
            for i in range(prob.n)
            for t in range(prob.T)
        ]
    )


def _path_frames(prob, trajs: dict, svms: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The paths k ↦ W(k) z_i and corr(W(k), each SVM) for both parameterizations."""
    paths, corr = [], []
    for param, tr in trajs.items():
        WZ = np.einsum("kab,ib->kia", tr.W, prob.Z)  # (k, n, 2): W(k) z_i
        for i in range(prob.n):
            paths.append(
                pd.DataFrame(
                    dict(
                        param=param, query=f"z{i + 1}", step=tr.steps, x=WZ[:, i, 0], y=WZ[:, i, 1]
                    )
                )
            )
        for norm, sol in svms.items():
            c = correlation(tr.W[1:], sol.W) if sol.feasible else np.full(len(tr.steps) - 1, np.nan)
            corr.append(pd.DataFrame(dict(param=param, svm=norm, step=tr.steps[1:], corr=c)))
    return pd.concat(paths, ignore_index=True), pd.concat(corr, ignore_index=True)


def _ray_frame(prob, svms: dict, *, reach: float) -> pd.DataFrame:
    """The rays t·W^mm z_i and t·W^mm_* z_i, drawn to length `reach` (1 when it is 0)."""
    reach = reach or 1.0
    rays = []
    for norm, sol in svms.items():
        if not sol.feasible:
            continue
        for i in range(prob.n):
            v = sol.W @ prob.Z[i]
            v = v / np.linalg.norm(v) * reach
            rays.append(dict(svm=norm, query=f"z{i + 1}", x0=0.0, y0=0.0, x=v[0], y=v[1]))
    return pd.DataFrame(rays)


def _summary(s, corr, svms) -> dict:
    rows, parts = [], []
    for (param, norm), ref in REFERENCE[s.preset].items():
        for step, paper in ref.items():
            hit = corr[(corr.param == param) & (corr.svm == norm) & (corr.step == step)]
            ours = float(hit["corr"].iloc[0]) if len(hit) else np.nan
            rows.append(dict(param=param, svm=norm, step=step, ours=ours, paper=paper))
    for param, norm in (("W", "fro"), ("KQ", "nuc")):
        sel = [r for r in rows if r["param"] == param and r["svm"] == norm]
        label = "W^mm" if norm == "fro" else "W^mm_*"
        parts.append(
            f"{param}-GD corr with {label}: "
            + " / ".join(
                f"{fmt(r['ours'], 5)} (paper {fmt(r['paper'], 5)}) at {r['step']}" for r in sel
            )
        )
    rank = {
        norm: int(np.sum(np.linalg.svd(sol.W, compute_uv=False) > 1e-4 * np.linalg.norm(sol.W, 2)))
        for norm, sol in svms.items()
        if sol.feasible
    }
    parts.append(f"rank W^mm {rank.get('fro')}, W^mm_* {rank.get('nuc')}")
    return {"paper": PAPER[s.preset], "rows": rows, "text": "; ".join(parts), "svm_rank": rank}


# -- the records: what the registry, CLI, store, budget and Reproduce page read -------
def price(s: Settings) -> tuple:
    """(items, floats, sizes) of a run with `s` (`budget.Price`), from `run`'s loop sizes."""
    p = paper_problem(s.preset)
    items = [
        gd_price(
            f"GD on {param}",
            n=p.n,
            T=p.T,
            d=p.d,
            steps=s.steps,
            runs=1,
            param=param,
            record_every=1,
        )
        for param in ("W", "KQ")
    ]
    svm = [
        (f"Att-SVM ({nm})", limits.svm_work(n=p.n, T=p.T, d=p.d, norm=nm)) for nm in ("fro", "nuc")
    ]
    return (
        [i for i, _ in items] + svm,
        max(f for _, f in items),
        dict(n=p.n, T=p.T, d=p.d, steps=s.steps, runs=1),
    )


RECORDS = tuple(
    Experiment(
        name=name,
        title=TITLE,
        paper=PAPER[name],
        Settings=Settings,
        run=run,
        price=price,
        chart="attsvm_charts.experiments:geometry",
        tiny=dict(steps=200),
        fixed=dict(preset=name),
    )
    for name in NAMES
)
