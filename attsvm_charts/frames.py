"""Tidy DataFrames for the charts, from library results (pure: numpy/pandas only)."""

from __future__ import annotations

import numpy as np
import pandas as pd

import attsvm
from attsvm.config import selection_label


def per_sequence(steps, values, name: str) -> pd.DataFrame:
    """values (k, n) -> long frame step, sequence, name."""
    k, n = values.shape
    return pd.DataFrame(
        {"step": np.repeat(steps, n), "sequence": np.tile(np.arange(n), k), name: values.ravel()}
    )


def selected_weight(steps, probs, alpha) -> pd.DataFrame:
    """s_{i α_i}(k) and the rest of the mass Σ_{t≠α_i} s_it(k) per sequence."""
    sel = np.take_along_axis(
        probs, np.broadcast_to(alpha[None, :, None], probs.shape[:2] + (1,)), -1
    )[..., 0]
    rest = probs.sum(-1) - sel
    df = per_sequence(steps, sel, "weight")
    df["rest"] = np.clip(rest.ravel(), 1e-18, None)
    df["sequence"] = "seq " + df["sequence"].astype(str)
    return df


def correlations(steps, W, refs: dict) -> pd.DataFrame:
    """corr(W(k), R) for each named reference R (None references are skipped)."""
    parts = []
    for name, R in refs.items():
        if R is None or not np.any(R):
            continue
        parts.append(
            pd.DataFrame({"step": steps, "corr": attsvm.correlation(W, R), "reference": name})
        )
    return pd.concat(parts) if parts else pd.DataFrame(columns=["step", "corr", "reference"])


def margins(prob, W, alpha, sol, opt) -> pd.DataFrame:
    """The margin map at one W: normalized margins, scores, softmax, roles."""
    m = attsvm.token_margins(prob, W, alpha, normalized=True)  # (n, T)
    g = attsvm.token_scores(prob)
    Q = prob.query_view()[0][:, 0, :]
    a = np.einsum("ntd,de,nd->nt", prob.X, W, Q)
    s = np.exp(a - a.max(1, keepdims=True))
    s /= s.sum(1, keepdims=True)
    n, T = m.shape
    seq, tok = np.meshgrid(np.arange(n), np.arange(T), indexing="ij")
    support = sol.support if (sol is not None and sol.feasible) else np.zeros((n, T), bool)
    optimal = np.zeros((n, T), bool)
    if opt is not None:
        optimal[np.arange(n), opt] = True
    selected = np.zeros((n, T), bool)
    selected[np.arange(n), alpha] = True
    return pd.DataFrame(
        {
            "seq": seq.ravel(),
            "token": tok.ravel(),
            "margin": m.ravel(),
            "score": g.ravel(),
            "prob": s.ravel(),
            "support": support.ravel(),
            "optimal": optimal.ravel(),
            "selected": selected.ravel(),
        }
    )


def differing(alpha, opt) -> list[int]:
    return [] if opt is None else [int(i) for i in np.nonzero(np.asarray(alpha) != opt)[0]]


def describe(alpha) -> str:
    return selection_label(alpha)


# -- 2-D geometry (d = 2) -----------------------------------------------------------------
def geometry_tokens(prob, opt, sol, sols: dict):
    """Tokens, separating lines and SVM arrows in the token plane.

    Returns (tokens, lines, arrows): tokens with roles; for each query the line
    {x : xᵀw_i = x_{i,opt}ᵀw_i − ½}, w_i = W z_i of `sol` (halfway between the optimal
    token and the margin-1 level); arrows along S.W z_i for each named solution in `sols`.
    """
    Q = prob.query_view()[0][:, 0, :]  # (n, 2)
    n, T = prob.n, prob.T
    g = attsvm.token_scores(prob)
    sup = sol.support if sol.feasible else np.zeros((n, T), bool)
    seq, tok = np.meshgrid(np.arange(n), np.arange(T), indexing="ij")
    optimal = tok == np.asarray(opt)[:, None]
    tokens = pd.DataFrame(
        {
            "seq": [f"seq {i}" for i in seq.ravel()],
            "token": tok.ravel(),
            "x1": prob.X[..., 0].ravel(),
            "x2": prob.X[..., 1].ravel(),
            "score": g.ravel(),
            "optimal": optimal.ravel(),
            "support": sup.ravel(),
            "label": np.where(optimal, "optimal", np.where(sup, "support token", "")).ravel(),
        }
    )
    span = float(np.abs(prob.X).max() * 1.35) or 1.0
    lines, arrows = [], []
    for i in range(n if sol.feasible else 0):
        w = sol.W @ Q[i]
        nw = float(w @ w)
        if nw == 0:
            continue
        p0 = (float(prob.X[i, opt[i]] @ w) - 0.5) * w / nw
        perp = np.array([-w[1], w[0]]) / np.sqrt(nw)
        lines += [
            dict(seq=f"seq {i}", x1=x[0], x2=x[1])
            for x in (p0 - 4 * span * perp, p0 + 4 * span * perp)
        ]
        for name, S in sols.items():
            if S.feasible:
                u = S.W @ Q[i]
                u = 0.9 * span * u / (np.linalg.norm(u) or 1.0)
                arrows += [
                    dict(seq=f"seq {i}", norm=name, x1=a, x2=b, key=f"{name}{i}")
                    for a, b in ((0.0, 0.0), (u[0], u[1]))
                ]
    return (
        tokens,
        pd.DataFrame(lines, columns=["seq", "x1", "x2"]),
        pd.DataFrame(arrows, columns=["seq", "norm", "x1", "x2", "key"]),
    )


def geometry_paths(prob, runs: dict, sols: dict, *, direction: bool):
    """GD paths W(k) z_i of each named run (optionally divided by ‖W(k)‖_F) and the SVM
    rays S.W z_i (to the paths' reach; in the direction view, to the limit point
    S.W z_i / ‖S.W‖_F). Returns (paths, rays)."""
    Q = prob.query_view()[0][:, 0, :]
    paths = []
    for label, run in runs.items():
        P = np.einsum("kde,ne->knd", run.W, Q)  # (k, n, 2)
        if direction:
            nrm = np.linalg.norm(run.W, axis=(1, 2))[:, None, None]
            P = np.divide(P, nrm, out=np.full_like(P, np.nan), where=nrm > 0)
        paths += [
            pd.DataFrame(
                {
                    "seq": f"z_{i}",
                    "param": label,
                    "step": run.steps,
                    "p1": P[:, i, 0],
                    "p2": P[:, i, 1],
                    "key": f"{label}{i}",
                }
            )
            for i in range(prob.n)
        ]
    paths = pd.concat(paths)
    reach = float(np.nanmax(np.abs(paths[["p1", "p2"]].to_numpy(dtype=float))))
    reach = reach if np.isfinite(reach) and reach > 0 else 1.0
    rays = []
    for name, S in sols.items():
        for i in range(prob.n if S.feasible else 0):
            u = S.W @ Q[i]
            u = (
                u / np.linalg.norm(S.W)
                if direction
                else 1.15 * reach * u / (np.linalg.norm(u) or 1.0)
            )
            rays.append(
                pd.DataFrame(
                    {
                        "seq": f"z_{i}",
                        "norm": name,
                        "p1": [0.0, u[0]],
                        "p2": [0.0, u[1]],
                        "key": f"{name}{i}",
                    }
                )
            )
    rays = pd.concat(rays) if rays else pd.DataFrame(columns=["seq", "norm", "p1", "p2", "key"])
    return paths, rays


# -- rank and nonlinear heads ---------------------------------------------------------------
def singular_values(runs: dict) -> pd.DataFrame:
    """σ_j(W(k)) / σ_1(W(k)) of each named run: step, j, sigma, param."""
    parts = []
    for label, run in runs.items():
        S = run.singular_values  # (k, d)
        rel = np.divide(S, S[:, :1], out=np.zeros_like(S), where=S[:, :1] > 0)
        k, d = rel.shape
        parts.append(
            pd.DataFrame(
                {
                    "step": np.repeat(run.steps, d),
                    "j": np.tile(np.arange(d), k),
                    "sigma": np.clip(rel.ravel(), 1e-18, None),
                    "param": label,
                }
            )
        )
    return pd.concat(parts)


def query_probs(prob, run, i: int, opt) -> pd.DataFrame:
    """Sequence i's final softmax of every query (sequence modes): query, token, prob (NaN
    where the query may not attend), selected (GD's pick), optimal."""
    k, t = np.meshgrid(np.arange(prob.T), np.arange(prob.T), indexing="ij")
    P = run.probs[-1, i]  # (K, T)
    _, _, mask = prob.query_view()
    return pd.DataFrame(
        {
            "query": k.ravel(),
            "token": t.ravel(),
            "prob": np.where(mask, P, np.nan).ravel(),
            "selected": (t == run.alpha[i][:, None]).ravel(),
            "optimal": (
                (t == opt[i][:, None]) if opt is not None else np.zeros_like(t, bool)
            ).ravel(),
        }
    )


def query_selected_weight(run) -> pd.DataFrame:
    """Mean and min over queries of the selected tokens' softmax weight per record (tidy)."""
    alpha = run.alpha
    sel = np.take_along_axis(
        run.probs, np.broadcast_to(alpha[None, ..., None], run.probs.shape[:-1] + (1,)), -1
    )[..., 0]
    k = len(run.steps)
    return pd.DataFrame(
        {"step": run.steps, "mean": sel.reshape(k, -1).mean(1), "min": sel.reshape(k, -1).min(1)}
    ).melt(id_vars="step", var_name="over queries", value_name="weight")


def gap_curves(steps, refs: dict) -> pd.DataFrame:
    """1 − corr per record for each reference (clipped at 1e-12 for log axes), tidy."""
    return pd.concat(
        [
            pd.DataFrame({"step": steps, "1 − corr": np.clip(v, 1e-12, None), "reference": name})
            for name, v in refs.items()
        ]
    )


def kept_tokens(prob, s, selected) -> pd.DataFrame:
    """Final softmax s (n, T) with O_i (`selected`) and each sequence's best single token."""
    best = attsvm.token_scores(prob).argmax(1)
    seq, tok = np.meshgrid(np.arange(prob.n), np.arange(prob.T), indexing="ij")
    return pd.DataFrame(
        {
            "seq": seq.ravel(),
            "token": tok.ravel(),
            "prob": s.ravel(),
            "selected": selected.ravel(),
            "optimal": (tok == best[:, None]).ravel(),
        }
    )


def kept_sets(s, selected) -> pd.DataFrame:
    """Per sequence: |O_i|, its tokens and the largest masked softmax weight."""
    masked = ~selected
    return pd.DataFrame(
        {
            "sequence": np.arange(len(s)),
            "|O_i|": selected.sum(1),
            "kept tokens": [", ".join(map(str, np.nonzero(r)[0])) for r in selected],
            "largest masked weight": [
                f"{s[i][masked[i]].max():.1e}" if masked[i].any() else "—" for i in range(len(s))
            ],
        }
    )


def geometry_tables(X, Y, Z, v):
    """The editable tables of 2-D data: tokens (sequence, token, x₁, x₂), sequences
    (label Y, z₁, z₂) and the head vector (v₁, v₂)."""
    n, T = X.shape[:2]
    return (
        pd.DataFrame(
            {
                "sequence": np.repeat(np.arange(n), T),
                "token": np.tile(np.arange(T), n),
                "x₁": X[:, :, 0].ravel(),
                "x₂": X[:, :, 1].ravel(),
            }
        ),
        pd.DataFrame({"sequence": np.arange(n), "label Y": Y, "z₁": Z[:, 0], "z₂": Z[:, 1]}),
        pd.DataFrame({"v₁": [v[0]], "v₂": [v[1]]}),
    )
