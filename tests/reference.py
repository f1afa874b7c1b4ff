"""An independent numpy reference of the model (docs/theory.md §1 and §A.1), for the tests.

Written from the formulas, not from attsvm.model: queries, masks, heads, losses and the
manual gradient  ∂L/∂W = Σ_ik Σ_t g_ikt x_it z_ikᵀ  with g = ∂L/∂(logits).
"""

from __future__ import annotations

import numpy as np


def np_queries(prob):
    """Queries (n, K, d), labels (n, K), attendable mask (K, T), built from the fields."""
    n, T, d = prob.X.shape
    if prob.queries == "single":
        Q = prob.X[:, prob.query_index] if prob.Z is None else prob.Z
        return Q[:, None, :], prob.Y[:, None], np.ones((1, T), bool)
    Q = prob.X if prob.Z is None else prob.Z
    mask = np.ones((T, T), bool)
    return Q, prob.Y, (np.tril(mask) if prob.queries == "causal" else mask)


def np_forward(prob, W):
    """f (n, K), s (n, K, T), r (n, K, d) at the combined matrix W."""
    Q, _, mask = np_queries(prob)
    a = np.einsum("ntd,de,nke->nkt", prob.X, W, Q)
    a = np.where(mask[None], a, -np.inf)
    e = np.exp(a - a.max(-1, keepdims=True))
    s = e / e.sum(-1, keepdims=True)
    r = np.einsum("nkt,ntd->nkd", s, prob.X)
    if prob.head == "linear":
        f = r @ prob.v
    elif prob.head == "relu":
        f = np.maximum(r @ prob.V, 0.0).sum(-1)
    else:
        f = r @ prob.v - prob.lam * np.sum(r * r, -1)
    return f, s, r


def np_loss(u, kind):
    return {"logistic": np.logaddexp(0.0, -u), "exponential": np.exp(-u), "correlation": -u}[kind]


def np_dloss(u, kind):
    return {
        "logistic": -1.0 / (1.0 + np.exp(u)),
        "exponential": -np.exp(-u),
        "correlation": -np.ones_like(u),
    }[kind]


def np_combined(params, param):
    return params if param == "W" else params[0] @ params[1].T


def np_objective(prob, params, param, loss, ridge=0.0):
    """L(W) = (1/n) Σ_ik ℓ(Y_ik f_ik), plus ridge (‖K‖² + ‖Q‖²) for "KQ"."""
    f, _, _ = np_forward(prob, np_combined(params, param))
    _, Y, _ = np_queries(prob)
    L = np_loss(Y * f, loss).sum() / prob.n
    if param == "KQ":
        L += ridge * (np.sum(params[0] ** 2) + np.sum(params[1] ** 2))
    return L


def np_grad(prob, params, param, loss, ridge=0.0):
    """Manual gradient of `np_objective` (W, or the pair (∇K, ∇Q))."""
    W = np_combined(params, param)
    f, s, r = np_forward(prob, W)
    Q, Y, _ = np_queries(prob)
    dfn = np_dloss(Y * f, loss) * Y / prob.n  # ∂L/∂f: (n, K)
    if prob.head == "linear":
        hr = np.broadcast_to(prob.v, r.shape)  # ∂h/∂r: (n, K, d)
    elif prob.head == "relu":
        hr = ((r @ prob.V) > 0) @ prob.V.T
    else:
        hr = prob.v - 2.0 * prob.lam * r
    c = np.einsum("ntd,nkd->nkt", prob.X, hr)  # ∂f/∂s_t
    g = dfn[..., None] * s * (c - np.sum(s * c, -1, keepdims=True))  # ∂L/∂a: (n, K, T)
    G = np.einsum("nkt,ntd,nke->de", g, prob.X, Q)
    if param == "W":
        return G
    K, Qm = params
    return G @ Qm + 2 * ridge * K, G.T @ K + 2 * ridge * Qm


def np_gd(prob, init, param, *, steps, lr, loss, normalized=True, ridge=0.0):
    """Plain per-step numpy GD; returns W(0..steps) (steps+1, d, d) and losses."""
    eps0 = 2.0**-52
    params = init if param == "W" else (init[0].copy(), init[1].copy())
    Ws, Ls = [], []
    for k in range(steps + 1):
        W = np_combined(params, param)
        Ws.append(W)
        Ls.append(np_objective(prob, W, "W", loss))
        if k == steps:
            break
        G = np_grad(prob, params, param, loss, ridge)
        Gs = (G,) if param == "W" else G
        if normalized:
            Gs = tuple(a / (np.linalg.norm(a) + eps0) for a in Gs)
        Ps = (params,) if param == "W" else params
        new = tuple(p - lr * a for p, a in zip(Ps, Gs, strict=True))
        params = new[0] if param == "W" else new
    return np.array(Ws), np.array(Ls)


def rel(a, b) -> float:
    """‖a − b‖ / ‖b‖ (Frobenius, over all axes)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))
