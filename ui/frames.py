"""Tidy DataFrames for the charts, from library results (pure: numpy/pandas only)."""
from __future__ import annotations

import numpy as np
import pandas as pd

import attsvm

from .specs import selection_label


def per_sequence(steps, values, name: str) -> pd.DataFrame:
    """values (k, n) -> long frame step, sequence, name."""
    k, n = values.shape
    return pd.DataFrame({"step": np.repeat(steps, n), "sequence": np.tile(np.arange(n), k),
                         name: values.ravel()})


def selected_weight(steps, probs, alpha) -> pd.DataFrame:
    """s_{i α_i}(k) and the rest of the mass Σ_{t≠α_i} s_it(k) per sequence."""
    sel = np.take_along_axis(probs, np.broadcast_to(alpha[None, :, None],
                                                    probs.shape[:2] + (1,)), -1)[..., 0]
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
        parts.append(pd.DataFrame({"step": steps, "corr": attsvm.correlation(W, R),
                                   "reference": name}))
    return pd.concat(parts) if parts else pd.DataFrame(columns=["step", "corr", "reference"])


def margins(prob, W, alpha, sol, opt) -> pd.DataFrame:
    """The margin map at one W: normalized margins, scores, softmax, roles."""
    m = attsvm.token_margins(prob, W, alpha, normalized=True)              # (n, T)
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
    return pd.DataFrame({"seq": seq.ravel(), "token": tok.ravel(), "margin": m.ravel(),
                         "score": g.ravel(), "prob": s.ravel(), "support": support.ravel(),
                         "optimal": optimal.ravel(), "selected": selected.ravel()})


def differing(alpha, opt) -> list[int]:
    return [] if opt is None else [int(i) for i in np.nonzero(np.asarray(alpha) != opt)[0]]


def describe(alpha) -> str:
    return selection_label(alpha)
