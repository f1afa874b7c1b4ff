"""An independent numpy reference of joint (attention, head) training for the tests.

Written from the formulas (arXiv 2306.13596 §2; docs/followups.md §2, §4b), not from
attsvm: single-query problems, linear head f_i = vᵀ X_iᵀ s_i, logistic loss
L = (1/n) Σ_i log(1 + e^{−Y_i f_i}), the centred logit gradient
s_t (c_t − Σ_u s_u c_u), c_t = vᵀ(x_t − x_ρ), ρ = argmax_t, and the head gradient
Σ_i ∂L/∂f_i r_i. Each tensor (W, or K and Q, and v) takes its own step.
"""

from __future__ import annotations

import numpy as np


def _queries(prob):
    return prob.X[:, prob.query_index] if prob.Z is None else prob.Z


def joint_grads(prob, W, v):
    """(∂L/∂W (d, d), ∂L/∂v (d,), L, s (n, T)) at (W, v)."""
    X, Y, Z = prob.X, prob.Y, _queries(prob)
    n = X.shape[0]
    a = np.einsum("ntd,de,ne->nt", X, W, Z)
    rho = a.argmax(-1)
    e = np.exp(a - a.max(-1, keepdims=True))
    s = e / e.sum(-1, keepdims=True)
    r = np.einsum("nt,ntd->nd", s, X)
    f = r @ v
    u = Y * f
    L = np.logaddexp(0.0, -u).sum() / n
    df = -Y / (1.0 + np.exp(u)) / n  # ∂L/∂f_i = −Y σ(−u) / n
    h = X @ v  # (n, T)
    c = h - h[np.arange(n), rho][:, None]
    ga = df[:, None] * s * (c - np.sum(s * c, -1, keepdims=True))
    gW = np.einsum("nt,ntd,ne->de", ga, X, Z)
    gv = df @ r
    return gW, gv, L, s


def _unit(g, q=2.0):
    """g / ‖g‖_q, and 0 for a zero gradient (no step)."""
    n = np.sum(np.abs(g) ** q) ** (1.0 / q)
    return g / n if n > 0 else 0.0 * g


def joint_ngd(prob, W0, v0, *, steps, lr, optimizer="ngd", param="W", p=2.0):
    """Rules "gd", "ngd", "nmd" (ℓp dual step g/‖g‖_q, q = p/(p−1), dual variable
    accumulated), each tensor on its own. param "KQ": W0 = (K, Q). Returns (Ws, vs) after
    every step (steps + 1 entries)."""
    P = [np.array(a, float) for a in (W0 if param == "KQ" else (W0,))] + [np.array(v0, float)]
    q = p / (p - 1.0)
    U = [np.sign(a) * np.abs(a) ** (p - 1.0) for a in P]
    Ws, vs = [], []

    def combined(P):
        return P[0] @ P[1].T if param == "KQ" else P[0]

    for _ in range(steps + 1):
        Ws.append(combined(P))
        vs.append(P[-1].copy())
        gW, gv, _, _ = joint_grads(prob, combined(P), P[-1])
        G = [gW @ P[1], gW.T @ P[0]] if param == "KQ" else [gW]
        G.append(gv)
        if optimizer == "gd":
            P = [a - lr * g for a, g in zip(P, G, strict=True)]
        elif optimizer == "ngd":
            P = [a - lr * _unit(g) for a, g in zip(P, G, strict=True)]
        else:  # nmd
            U = [u - lr * _unit(g, q=q) for u, g in zip(U, G, strict=True)]
            P = [np.sign(u) * np.abs(u) ** (1.0 / (p - 1.0)) for u in U]
    return np.array(Ws), np.array(vs)
