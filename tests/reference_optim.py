"""Plain numpy loops of the optimizers of attsvm.optimizers, written from the formulas
(docs/followups.md §2.1, §2.4, §4.1, §5), one step at a time, with the manual gradient of
`reference.np_grad` — not from the library.

The normalizers here are plain `np.linalg.norm` (the library's are scaled against underflow,
which only matters far beyond these runs). L − L* reaches 1e-12 within 50 Polyak steps, below
what the plain difference of two ≈0.6 losses resolves, so `np_loss_gap` writes it per sample
as a sum of non-negative terms (derivation in its docstring).
"""

from __future__ import annotations

import numpy as np
from reference import np_combined, np_dloss, np_forward, np_grad, np_objective, np_queries


def np_loss_infimum(prob, loss):
    """(1/n) Σ_i ℓ(max_t Y_i vᵀ x_it) — single-query linear head."""
    gam = prob.Y[:, None] * (prob.X @ prob.v)
    u = gam.max(axis=1)
    ell = {"logistic": np.log1p(np.exp(-u)), "exponential": np.exp(-u), "correlation": -u}[loss]
    return float(ell.mean())


def np_loss_gap(prob, W, loss):
    """L(W) − L* (single-query linear head) without cancellation: Y_i f_i = γ*_i − δ_i with
    δ_i = Σ_t s_it (γ*_i − γ_it) ≥ 0, and for the logistic loss
    log(1 + e^{−γ*+δ}) − log(1 + e^{−γ*}) = log1p((e^δ − 1) · e^{−γ*} / (1 + e^{−γ*}))."""
    _, s, _ = np_forward(prob, W)
    s = s[:, 0, :]  # (n, T)
    gam = prob.Y[:, None] * (prob.X @ prob.v)
    gs = gam.max(axis=1)
    delta = np.sum(s * (gs[:, None] - gam), axis=1)
    if loss == "logistic":
        per = np.log1p(np.expm1(delta) * np.exp(-gs) / (1 + np.exp(-gs)))
    elif loss == "exponential":
        per = np.exp(-gs) * np.expm1(delta)
    else:
        per = delta
    return float(per.mean())


def np_grad_centred(prob, params, param, loss, ridge=0.0):
    """The cancellation-free gradient of docs/followups.md §4b, from its closed form:
    ∂L/∂W = Σ_ik ∂L/∂f_ik Σ_t s_ikt (c_ikt − Σ_u s_iku c_iku) (x_it − x_iρ) z_ikᵀ with
    c_ikt = ∇h(r_ik) · (x_it − x_iρ) and ρ = argmax_t s_ikt (every head; c_iρ = 0 exactly)."""
    W = np_combined(params, param)
    f, s, r = np_forward(prob, W)
    Q, Y, _ = np_queries(prob)
    dfn = np_dloss(Y * f, loss) * Y / prob.n  # (n, K)
    if prob.head == "linear":
        hr = np.broadcast_to(prob.v, r.shape)
    elif prob.head == "relu":
        hr = ((r @ prob.V) > 0) @ prob.V.T
    else:
        hr = prob.v - 2.0 * prob.lam * r
    rho = np.argmax(s, axis=-1)  # (n, K)
    Xr = np.take_along_axis(prob.X, rho[:, :, None], axis=1)  # (n, K, d)
    D = prob.X[:, None, :, :] - Xr[:, :, None, :]  # (n, K, T, d)
    c = np.einsum("nktd,nkd->nkt", D, hr)
    g = dfn[..., None] * s * (c - np.sum(s * c, -1, keepdims=True))
    G = np.einsum("nkt,nktd,nke->de", g, D, Q)
    if param == "W":
        return G
    K, Qm = params
    return G @ Qm + 2 * ridge * K, G.T @ K + 2 * ridge * Qm


def np_polar(G):
    """U_r V_rᵀ over the singular values > σ_max·max(shape)·2⁻⁵²."""
    U, s, Vt = np.linalg.svd(G, full_matrices=False)
    r = int(np.sum(s > s[0] * max(G.shape) * 2.0**-52))
    return U[:, :r] @ Vt[:r]


def np_optimize(
    prob,
    init,
    param,
    *,
    optimizer,
    steps,
    lr,
    loss="logistic",
    p=None,
    eps=0.0,
    cap=np.inf,
    max_step=np.inf,
    ridge=0.0,
    centred=True,
):
    """Run `steps` updates; returns W(0..steps) as (steps + 1, d, d). `centred`: the gradient
    `np_grad_centred` (else `reference.np_grad`, whose selected-token term cancels once
    1 − s_max is small: at L − L* ≈ 1e-12 it is already off by ~1e-4 relative)."""
    grad = np_grad_centred if centred else np_grad
    params = [np.array(init, dtype=float)] if param == "W" else [np.array(a, float) for a in init]
    Lstar = np_loss_infimum(prob, loss) if optimizer == "polyak" else None
    if optimizer in ("md", "nmd"):
        U = [np.sign(w) * np.abs(w) ** (p - 1) for w in params]  # dual variable, kept
        q = p / (p - 1)
    Ws = []
    for k in range(steps + 1):
        cur = params[0] if param == "W" else tuple(params)
        Ws.append(np_combined(cur, param))
        if k == steps:
            break
        G = grad(prob, cur, param, loss, ridge)
        G = [G] if param == "W" else list(G)
        if optimizer == "gd":
            params = [w - lr * g for w, g in zip(params, G, strict=True)]
        elif optimizer == "ngd":
            params = [
                w - lr * g / (np.linalg.norm(g) + eps) for w, g in zip(params, G, strict=True)
            ]
        elif optimizer == "polyak":
            gap = np_loss_gap(prob, np_combined(cur, param), loss)
            assert abs(gap - (np_objective(prob, cur, param, loss) - Lstar)) <= 1e-14
            g2 = sum(np.sum(g * g) for g in G)
            eta = min(lr * gap / g2, cap, max_step / np.sqrt(g2))
            params = [w - eta * g for w, g in zip(params, G, strict=True)]
        elif optimizer == "md":
            U = [u - lr * g for u, g in zip(U, G, strict=True)]
            params = [np.sign(u) * np.abs(u) ** (1 / (p - 1)) for u in U]
        elif optimizer == "nmd":
            U = [
                u - lr * g / (np.sum(np.abs(g) ** q) ** (1 / q) + eps)
                for u, g in zip(U, G, strict=True)
            ]
            params = [np.sign(u) * np.abs(u) ** (1 / (p - 1)) for u in U]
        elif optimizer == "sign":
            params = [w - lr * np.sign(g) for w, g in zip(params, G, strict=True)]
        elif optimizer == "spectral":
            params = [w - lr * np_polar(g) for w, g in zip(params, G, strict=True)]
        else:
            raise ValueError(optimizer)
    return np.array(Ws)
