"""Measurements (docs/theory.md §A.2): correlation, token-selection margins, numerical
rank, norm growth.

    corr(A, B) = ⟨A, B⟩_F / (‖A‖_F ‖B‖_F)
    margin_it(W) = (x_{iα_i} − x_it)ᵀ W z_i,   normalized: margin_it / ‖W‖_F
    rank_rtol(W) = #{k : σ_k(W) > rtol · σ_1(W)}
"""

from __future__ import annotations

import numpy as np

from .problems import Problem, check_alpha, check_float, optimal_tokens

RANK_RTOL = 1e-4  # relative singular-value threshold of `numerical_rank` (docs/theory.md §4 E3)


def _matrix(name, A):
    try:
        A = np.asarray(A, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"`{name}` must be a numeric matrix; got {type(A).__name__}") from exc
    if A.ndim < 2:
        raise ValueError(f"`{name}` must be a matrix (…, d, d); got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"`{name}` must be finite (no NaN or inf); got non-finite entries")
    return A


def correlation(A, B):
    """⟨A, B⟩ / (‖A‖_F ‖B‖_F) ∈ [-1, 1].

    A may be a stack (…, d, d) against one B (d, d): returns an array, NaN where a matrix of
    the stack is zero. For two single matrices a zero matrix is a ValueError.
    """
    A, B = _matrix("A", A), _matrix("B", B)
    if A.shape[-2:] != B.shape[-2:]:
        raise ValueError(f"`B` must have the shape of `A` {A.shape[-2:]}; got {B.shape}")
    nb = np.linalg.norm(B, axis=(-2, -1))
    na = np.linalg.norm(A, axis=(-2, -1))
    if A.ndim == 2 and B.ndim == 2:
        for name, nrm in (("A", na), ("B", nb)):
            if nrm == 0:
                raise ValueError(f"`{name}` must be a non-zero matrix; got the zero matrix")
        return float(np.clip(np.sum(A * B) / (na * nb), -1.0, 1.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        c = np.sum(A * B, axis=(-2, -1)) / (na * nb)
    return np.clip(np.where((na > 0) & (nb > 0), c, np.nan), -1.0, 1.0)


def token_margins(prob: Problem, W, alpha=None, *, normalized: bool = False) -> np.ndarray:
    """margin_it = (x_{iα_i} − x_it)ᵀ W z_i: (n, T) ((n, K, T) in sequence modes).

    0 at the selected token, NaN at tokens a causal query may not attend to. With
    `normalized`, divided by ‖W‖_F (these approach 1/‖W^mm‖_F along a converging GD path).
    W may be a stack (k, d, d): a leading axis is added.
    """
    W = _matrix("W", W)
    if W.shape[-2:] != (prob.d, prob.d):
        raise ValueError(f"`W` must be ({prob.d}, {prob.d}); got {W.shape}")
    a = optimal_tokens(prob) if alpha is None else check_alpha(prob, alpha)
    Q, _, mask = prob.query_view()
    A = a.reshape(prob.n, -1)  # (n, K)
    logits = np.einsum("ntd,...de,nke->...nkt", prob.X, W, Q)  # (..., n, K, T)
    sel = np.take_along_axis(logits, np.broadcast_to(A[..., None], logits.shape[:-1] + (1,)), -1)
    m = np.where(prob.token_mask(), sel - logits, np.nan)
    if normalized:
        nrm = np.linalg.norm(W, axis=(-2, -1))[..., None, None, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            m = np.where(nrm > 0, m / nrm, np.nan)
    return m[..., 0, :] if prob.queries == "single" else m


def numerical_rank(W, *, rtol: float = RANK_RTOL) -> int | np.ndarray:
    """#{σ_k > rtol·σ_1}: the rank at a stated relative tolerance (0 for the zero matrix).

    Stacks (…, d, d) give an integer array.
    """
    W = _matrix("W", W)
    rtol = check_float("rtol", rtol, 0.0, 1.0)
    s = np.linalg.svd(W, compute_uv=False)
    r = np.sum(s > rtol * s[..., :1], axis=-1)
    return int(r) if np.ndim(r) == 0 else r


def norm_growth(W) -> np.ndarray:
    """‖W(k)‖_F along a stack (k, d, d) (e.g. `Trajectory.W`)."""
    return np.linalg.norm(_matrix("W", W), axis=(-2, -1))
