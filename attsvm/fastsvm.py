"""Batched attention SVMs for sweeps: the same problems as `attsvm.svm`, solved exactly and
fast enough for thousands of instances.

Every attention SVM is  min ‖W‖  s.t.  A vec(W) ≥ 1  (rows of A from
`attsvm.svm.constraint_rows`). Two exact methods, both validated against the library's
Clarabel solutions in tests/test_experiments.py:

* Frobenius (Att-SVM): a least-distance program. Lawson & Hanson (1974, ch. 23): with
  E = [Aᵀ; 1ᵀ] and f = (0, …, 0, 1), solve the NNLS problem u = argmin_{u ≥ 0} ‖E u − f‖;
  the residual r = E u − f is zero iff the constraints are infeasible, else
  vec(W^mm) = −r[:-1] / r[-1]. Finite active-set method: the solution is exact to rounding.

* Nuclear (Att-SVM*): an interior-point (barrier) method on the dual
      max 1ᵀλ  s.t.  λ ≥ 0,  ‖Σ_j λ_j G_j‖_op ≤ 1,
  batched over problems with numpy. G_j = Uᵀ A_j B is constraint j in orthonormal bases U of
  the token differences and B of the queries (W^mm_* = U M Bᵀ keeps every constraint and
  the nuclear norm, docs/theory.md §2.6), so the spectral-norm constraint is the small LMI
  I − NᵀN ⪰ 0, N = Σ λ_j G_j. At the central point of parameter t the matrix
  M = (2/t) N (I − NᵀN)⁻¹ is strictly feasible, ⟨G_j, M⟩ = 1 + 1/(t λ_j), and
  ‖M‖_* − 1ᵀλ ≤ (m + r)/t: stopping at a relative gap of 1e-7 gives solutions whose
  spurious singular values are ~1e-8 of the largest (so rank at rtol 1e-4 is exact).
  Feasibility is decided by the Frobenius LDP (same constraints).
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from scipy.optimize import nnls

from .problems import optimal_tokens
from .svm import SUPPORT_TOL, constraint_rows, margins_and_support, solve_att_svm

GAP_RTOL = 1e-7  # relative duality gap at which the nuclear barrier method stops
CERTIFIED_GAP = 1e-5  # accept a barrier solution only with this certified relative gap
# the barrier's first t: its gap (m + b)/t₀ is START_GAP times the starting dual objective.
# 10 rather than 1 starts nearer the analytic center: on svm-rank (μ = 30) the same ranks, 34
# problems left to Clarabel instead of 352, 1 % fewer Newton steps (docs/performance.md)
START_GAP = 10.0
LDP_INFEASIBLE = 1e-13  # |r[-1]| below which the LDP residual means "infeasible" (‖W‖ ≳ 3e6)


# -- Frobenius: least-distance programming via NNLS ---------------------------------------------
def ldp(G: np.ndarray, h: np.ndarray | float = 1.0) -> np.ndarray | None:
    """x = argmin ‖x‖₂ s.t. G x ≥ h, or None if infeasible. G: (m, p)."""
    m, p = G.shape
    if m == 0:
        return np.zeros(p)
    h = np.broadcast_to(np.asarray(h, dtype=float), (m,))
    E = np.vstack([G.T, h[None, :]])  # (p + 1, m)
    f = np.zeros(p + 1)
    f[-1] = 1.0
    u, _ = nnls(E, f, maxiter=50 * (m + p + 1))
    r = E @ u - f
    if abs(r[-1]) < LDP_INFEASIBLE:
        return None
    x = -r[:-1] / r[-1]
    return x if np.all(G @ x >= h - 1e-8 * np.maximum(1.0, np.abs(h))) else None


def least_norm_fro(rows: np.ndarray, d: int) -> np.ndarray | None:
    """W^mm (d, d) for constraint rows (m, d·d) (row-major vec), or None if infeasible."""
    x = ldp(rows)
    return None if x is None else x.reshape(d, d)


# -- nuclear: batched barrier method on the dual --------------------------------------------------
def _reduce(rows: np.ndarray, Q: np.ndarray, d: int):
    """Orthonormal bases U (d, ra) of the token differences and B (d, rz) of the queries, and
    G (m, ra, rz) with G_j = Uᵀ A_j B, A_j = rows[j] as a (d, d) matrix."""
    A = rows.reshape(-1, d, d)  # A_j = a_j z_jᵀ
    ra = min(d, A.shape[0])
    rz = min(d, Q.shape[0])
    # span{a_j}: the top eigenvectors of Σ_j A_j A_jᵀ (d × d)
    U = np.linalg.eigh(np.einsum("jab,jcb->ac", A, A))[1][:, ::-1][:, :ra]
    B = np.linalg.svd(Q.T, full_matrices=False)[0][:, :rz]
    return U, B, (U.T @ A @ B)


def _n_and_s(G, lam):
    """N = Σ λ_j G_j (P, a, b) and S = I − NᵀN (P, b, b) for G (P, m, a, b), lam (P, m)."""
    P, m, a, b = G.shape
    N = (lam[:, None, :] @ G.reshape(P, m, a * b))[:, 0].reshape(P, a, b)
    return N, np.eye(b) - np.swapaxes(N, 1, 2) @ N


def _point(G, lam):
    """What the barrier method needs at λ, computed once: N and S (`_n_and_s`) and φ_t's
    parts that do not depend on t, (1ᵀλ, Σ log λ, log det S, inside the domain), each (P,)."""
    N, S = _n_and_s(G, lam)
    ev = np.linalg.eigvalsh(S)
    inside = np.all(ev > 0, axis=-1) & np.all(lam > 0, axis=-1)
    logdet = np.log(np.where(ev > 0, ev, 1.0)).sum(-1)
    safe = np.where(lam > 0, lam, 1.0)
    return N, S, (lam.sum(-1), np.log(safe).sum(-1), logdet, inside)


def _phi(t, parts):
    """φ_t(λ) = −t 1ᵀλ − Σ log λ − log det S from `_point`'s parts; +inf outside the
    domain. (P,)"""
    lam_sum, log_sum, logdet, inside = parts
    return np.where(inside, -t * lam_sum - log_sum - logdet, np.inf)


def _rank_one(G: np.ndarray):
    """Factors of G_j = u_j w_jᵀ (to rounding: 1e-13 of ‖G_j‖) for `_hessian_rank_one`, or
    None: (u (P, m, a), w (P, m, b), wᵀ (P, b, m), u uᵀ (P, m, m)), contiguous (numpy's
    stacked matmul is slow on strided views). An Att-SVM constraint matrix is
    (x_iα − x_it) z_iᵀ, rank one, and so is its reduction Uᵀ A_j B (`_reduce`): w_j is G_j's
    row of largest norm, u_j its coefficients."""
    r = np.argmax(np.einsum("pjab,pjab->pja", G, G), axis=-1)  # (P, m)
    w = np.take_along_axis(G, r[..., None, None], axis=2)[:, :, 0]  # (P, m, b)
    ww = np.einsum("pjb,pjb->pj", w, w)
    u = np.einsum("pjab,pjb->pja", G, w) / np.where(ww > 0, ww, 1.0)[..., None]
    err = np.abs(G - u[..., :, None] * w[..., None, :]).max(axis=(2, 3))
    if not np.all(err <= 1e-13 * np.abs(G).max(axis=(2, 3))):
        return None
    u, w = np.ascontiguousarray(u), np.ascontiguousarray(w)
    return u, w, np.ascontiguousarray(np.swapaxes(w, 1, 2)), u @ np.swapaxes(u, 1, 2)


class _Buffers:
    """Arrays reused from one Newton iteration to the next (`nuclear_barrier`): a fresh
    (P, m, m) temporary is fresh memory, paid in page faults each time (reusing the
    Hessian's took four svm-rank batches from 5.9 to 5.2 s here). take(name, shape) is a
    C-contiguous view of the named buffer, which grows when it must."""

    def __init__(self):
        self._flat: dict = {}

    def take(self, name: str, shape) -> np.ndarray:
        size = math.prod(shape)
        buf = self._flat.get(name)
        if buf is None or buf.size < size:
            buf = self._flat[name] = np.empty(size)
        return buf[:size].reshape(shape)


def _hessian_rank_one(fac, N, Sinv, Mn, buf: _Buffers | None = None):
    """H_jk = 2⟨(G_j + Mn C_j) S⁻¹, G_k⟩ (`_newton_step`) for G_j = u_j w_jᵀ (`_rank_one`):
    with ⟨X, G_k⟩ = u_kᵀ X w_k and C_j = w_j q_jᵀ + q_j w_jᵀ, q_j = Nᵀu_j,
        H_jk = 2 [(u_kᵀu_j)(w_jᵀS⁻¹w_k) + (u_kᵀMn w_j)(q_jᵀS⁻¹w_k) + (u_kᵀMn q_j)(w_jᵀS⁻¹w_k)]:
    m²(a + 4b) multiply-adds per problem instead of m²·a·b. The (P, m, m) arrays live in
    `buf` (the returned H too: valid until the next call); the transposed products are
    copied contiguous before the elementwise work (numpy's loops over strided views were
    slower than the copies). The same numbers as without either."""
    buf = buf or _Buffers()
    u, w, wT, uu = fac
    P, m = u.shape[:2]
    q = u @ N  # (P, m, b): rows q_jᵀ
    wSw = np.matmul(w @ Sinv, wT, out=buf.take("wSw", (P, m, m)))  # [j, k] = w_jᵀ S⁻¹ w_k
    qSw = np.matmul(q @ Sinv, wT, out=buf.take("qSw", (P, m, m)))  # [j, k] = q_jᵀ S⁻¹ w_k
    uM = u @ Mn  # (P, m, b): rows u_kᵀ Mn
    raw = buf.take("raw", (P, m, m))
    t = buf.take("t", (P, m, m))
    H = np.multiply(uu, wSw, out=buf.take("H", (P, m, m)))
    np.copyto(t, np.swapaxes(np.matmul(uM, wT, out=raw), 1, 2))  # [j, k] = u_kᵀ Mn w_j
    t *= qSw
    H += t
    qT = np.ascontiguousarray(np.swapaxes(q, 1, 2))
    np.copyto(t, np.swapaxes(np.matmul(uM, qT, out=raw), 1, 2))  # [j, k] = u_kᵀ Mn q_j
    t *= wSw
    H += t
    H *= 2.0
    return H


def _newton_step(t, G, Gt, GfT, lam, fac=None, buf: _Buffers | None = None, NS=None):
    """Gradient and Newton step of φ_t at λ: (P, m) each.

    G (P, m, a, b); Gt = G_jᵀ stacked as (P, m·b, a) and GfT = vec(G_j) as columns
    (P, a·b, m), both C-contiguous (numpy's stacked matmul is slow on strided views); fac:
    `_rank_one`'s factors of G, for `_hessian_rank_one` (a third of svm-rank's time), with
    its reused arrays `buf`; NS: (N, S) at λ when the caller has them (`_point`)."""
    P, m, a, b = G.shape
    N, S = _n_and_s(G, lam) if NS is None else NS
    Sinv = np.linalg.inv(S)
    Mn = N @ Sinv  # (P, a, b)
    grad = -t[:, None] - 1.0 / lam + 2.0 * (Mn.reshape(P, 1, a * b) @ GfT)[:, 0]
    if fac is not None:
        H = _hessian_rank_one(fac, N, Sinv, Mn, buf)
    else:
        # Hessian of −log det(I − NᵀN): H_jk = 2⟨(G_j + Mn C_j) S⁻¹, G_k⟩, C_j = G_jᵀN + NᵀG_j
        GtN = (Gt @ N).reshape(P, m, b, b)
        C = GtN + np.swapaxes(GtN, 2, 3)  # (P, m, b, b)
        MC = Mn @ np.ascontiguousarray(np.swapaxes(C, 1, 2)).reshape(P, b, m * b)
        MC = np.swapaxes(MC.reshape(P, a, m, b), 1, 2)  # (P, m, a, b)
        Aj = np.ascontiguousarray(
            (np.ascontiguousarray(G + MC).reshape(P, m * a, b) @ Sinv).reshape(P, m, a * b)
        )
        H = 2.0 * Aj @ GfT
    H[:, np.arange(m), np.arange(m)] += 1.0 / lam**2
    try:
        step = -np.linalg.solve(H, grad[..., None])[..., 0]
    except np.linalg.LinAlgError:
        step = np.full_like(grad, np.nan)
    return grad, step


def nuclear_barrier(
    G: np.ndarray,
    *,
    gap_rtol: float = GAP_RTOL,
    mu: float = 80.0,
    max_newton: int = 300,
    stage_limit: int = 60,
):
    """Solve min ‖M‖_* s.t. ⟨G_j, M⟩ ≥ 1 for a batch of feasible problems.

    Newton's method with backtracking on φ_t(λ) = −t 1ᵀλ − Σ log λ_j − log det(I − NᵀN);
    t ← μ t at each central point (the Hessian does not depend on t, so the first step after
    raising t is the path-following predictor). Problems leave the batch as they finish.
    μ = 80: on svm-rank 10 % fewer Newton steps than μ = 30, for 30 more problems left to
    Clarabel (64) and the same ranks (docs/performance.md).

    Args:
        G: (P, m, a, b) constraint matrices.
    Returns:
        M (P, a, b) primal solutions scaled to be feasible (min_j ⟨G_j, M⟩ = 1; NaN where
        that failed), and gap (P,) the certified relative duality gap (‖M‖_* − 1ᵀλ)/‖M‖_*
        of the feasible pair (M, λ) (inf where it failed).

    Long because the barrier method (damped Newton centering, then t ← μ·t) is one algorithm
    over one shared state; split, its steps would pass that state around.
    """
    P, m, a, b = G.shape
    lam_all, t_all = _barrier_start(G)
    Gt_all = np.ascontiguousarray(np.swapaxes(G, 2, 3)).reshape(P, m * b, a)
    GfT_all = np.ascontiguousarray(np.swapaxes(G.reshape(P, m, a * b), 1, 2))
    fac_all = _rank_one(G)  # None unless every constraint is rank one
    idx = np.arange(P)  # problems still in the batch
    stage = np.zeros(P, int)
    lam_c = lam_all.copy()  # the last central point
    # the batch's constraint arrays, selected again only when problems leave it (copying
    # them every iteration takes a quarter of the method's time)
    Gi, Gt, GfT, fac = np.ascontiguousarray(G), Gt_all, GfT_all, fac_all
    buf = _Buffers()
    # N, S and φ's parts at the batch's current λ (`_point`), kept from the line search that
    # accepted λ: recomputing them costs svm-rank about 3 % (docs/performance.md)
    cur = _point(Gi, lam_all[idx])
    for _ in range(max_newton):
        lam, t = lam_all[idx], t_all[idx]
        grad, step = _newton_step(t, Gi, Gt, GfT, lam, fac, buf, NS=cur[:2])
        slope = (grad * step).sum(-1)  # −(Newton decrement²)
        centered = -slope < 1e-6
        lam_c[idx[centered]] = lam[centered]
        target = (m + b) / (0.9 * gap_rtol * lam.sum(-1))
        finished = centered & (t >= target)
        stage[idx] = np.where(centered, 0, stage[idx] + 1)
        # rounding: the Hessian is too ill-conditioned to center any further
        finished |= ~np.isfinite(slope) | (slope > 0) | (stage[idx] > stage_limit)
        t_all[idx] = np.where(centered, np.minimum(t * mu, target), t)
        move = ~finished & ~centered
        if move.any():
            every = move.all()
            moved = _backtrack(
                t_all[idx][move],
                Gi if every else Gi[move],
                lam[move],
                step[move],
                slope[move],
                cur if every else _rows(cur, move),
            )
            lam[move] = moved[0]
            lam_all[idx] = lam
            cur = moved[1] if every else _set_rows(cur, move, moved[1])
        if finished.any():
            keep = ~finished
            idx = idx[keep]
            if idx.size == 0:
                break
            Gi, Gt, GfT = Gi[keep], Gt[keep], GfT[keep]
            fac = None if fac is None else tuple(f[keep] for f in fac)
            cur = _rows(cur, keep)
    N, S = _n_and_s(G, lam_c)
    M = N @ np.linalg.inv(S)  # ∝ the central-path primal (2/t) N S⁻¹
    return _polish(G, M, lam_c)


def _barrier_start(G: np.ndarray):
    """`nuclear_barrier`'s start: λ = c·1 with ‖N‖ = 1/2, and t with barrier gap
    (m + b)/t = START_GAP × the dual objective. Returns (λ (P, m), t (P,))."""
    _, m, _, b = G.shape
    lam = np.repeat((0.5 / np.linalg.norm(G.sum(1), ord=2, axis=(-2, -1)))[:, None], m, 1)
    return lam, float(m + b) / (START_GAP * lam.sum(-1))


def _rows(cur, rows):
    """`_point`'s output for the problems `rows` (a mask or indices) of a batch."""
    N, S, parts = cur
    return N[rows], S[rows], tuple(p[rows] for p in parts)


def _set_rows(cur, rows, new):
    """`_point`'s output with the problems `rows` replaced by `new` (in place)."""
    for a, b in zip((cur[0], cur[1]) + cur[2], (new[0], new[1]) + new[2], strict=True):
        a[rows] = b
    return cur


def _backtrack(t, G, lam, step, slope, cur):
    """`nuclear_barrier`'s line search: λ + s·step with s halved from min(1, 0.99 × the
    distance to λ's boundary) until φ_t does not grow beyond rounding (the Armijo test with
    0.01 of the slope), at most 40 times. `cur`: `_point` at λ. Returns the new λ (P, m) and
    `_point` there, both updated in place (`nuclear_barrier` passes copies, or arrays it then
    replaces). Each halving evaluates only the problems still searching."""
    neg = step < 0
    with np.errstate(divide="ignore", invalid="ignore"):
        smax = np.where(neg, -lam / np.where(neg, step, 1.0), np.inf).min(-1)
    s = np.minimum(1.0, 0.99 * smax)
    f0 = _phi(t, cur[2])
    todo = np.arange(len(lam))  # the problems still searching
    for _ in range(40):
        trial = lam[todo] + s[todo, None] * step[todo]
        at = _point(G if len(todo) == len(lam) else G[todo], trial)
        f = f0[todo]
        ok = _phi(t[todo], at[2]) <= f + 0.01 * s[todo] * slope[todo] + 1e-12 * (np.abs(f) + 1.0)
        lam[todo[ok]] = trial[ok]
        _set_rows(cur, todo[ok], _rows(at, ok))
        todo = todo[~ok]
        if todo.size == 0:
            break
        s[todo] *= 0.5
    return lam, cur


def _certify(G, M, lam):
    """Scale M so that min_j ⟨G_j, M⟩ = 1; return it and the relative gap of (M, λ)."""
    low = np.einsum("jab,ab->j", G, M).min()
    if not low > 0:
        return None, np.inf
    M = M / low
    nuc = np.linalg.svd(M, compute_uv=False).sum()
    return M, (nuc - lam.sum()) / nuc


def _polish(G, Mc, lam, *, sv_rtol=1e-6, lam_rtol=1e-4):
    """Complementary slackness from the central point: the solution is M = U X Vᵀ with U, V
    the singular vectors of the central-path primal Mc kept at rtol `sv_rtol`, X ⪰ 0, and
    ⟨G_j, M⟩ = 1 for the constraints with λ_j > lam_rtol·max λ. Solve those equations for X
    (least squares) and keep whichever of it and the rescaled Mc has the smaller certified
    gap. Returns M (P, a, b) (NaN where both failed) and gap (P,)."""
    P = G.shape[0]
    out = np.full(Mc.shape, np.nan)
    gaps = np.full(P, np.inf)
    for p in range(P):
        best, gbest = _certify(G[p], Mc[p], lam[p])
        U, s, Vt = np.linalg.svd(Mc[p], full_matrices=False)
        r = int(np.sum(s > sv_rtol * s[0])) if s[0] > 0 else 0
        act = lam[p] > lam_rtol * lam[p].max()
        if r > 0 and act.any():
            Ur, Vr = U[:, :r], Vt[:r].T
            Gr = np.einsum("ar,jab,bs->jrs", Ur, G[p][act], Vr)  # (|J|, r, r)
            Gs = 0.5 * (Gr + np.swapaxes(Gr, 1, 2)).reshape(-1, r * r)
            X = np.linalg.lstsq(Gs, np.ones(len(Gs)), rcond=None)[0].reshape(r, r)
            X = 0.5 * (X + X.T)
            if np.linalg.eigvalsh(X).min() >= -1e-12 * abs(np.trace(X)):
                cand, g = _certify(G[p], Ur @ X @ Vr.T, lam[p])
                if g < gbest:
                    best, gbest = cand, g
        if best is not None:
            out[p], gaps[p] = best, gbest
    return out, gaps


def _barrier_threads(G: np.ndarray):
    """`nuclear_barrier` on a large batch split over the CPU cores (numpy's linear algebra
    releases the GIL; the problems are independent, so the split changes no number)."""
    parts = min(os.cpu_count() or 1, max(1, len(G) // 16))
    if parts == 1:
        return nuclear_barrier(G)
    chunks = np.array_split(np.arange(len(G)), parts)
    with ThreadPoolExecutor(parts) as pool:
        outs = list(pool.map(lambda idx: nuclear_barrier(G[idx]), chunks))
    return np.concatenate([o[0] for o in outs]), np.concatenate([o[1] for o in outs])


# -- public: solve many Att-SVMs ------------------------------------------------------------------
def solve_many(probs, alphas=None, norm: str = "fro", *, support_tol: float = SUPPORT_TOL):
    """Att-SVM_α (norm "fro") or Att-SVM*_α ("nuc") for many problems.

    Args:
        probs: list of B `Problem`s (any mix of shapes).
        alphas: list of B selections ((n,) or (n, T) in sequence modes); None means opt.
        norm: "fro" or "nuc".
    Returns:
        dict with W: list of (d, d) arrays or None (infeasible), feasible (B,) bool,
        objective (B,) ‖W‖ in that norm (NaN if infeasible), support: list of (n, T) bool
        (or None), margins: list of (n, T) arrays (or None).

    Long because its three phases (the Frobenius LDP for every problem, the certified
    nuclear barrier per shape group with a Clarabel fallback, the margins) fill the same
    per-problem lists.
    """
    B = len(probs)
    alphas = [None] * B if alphas is None else list(alphas)
    rows_all, idx_all, Ws = [], [], [None] * B
    for b, (p, a) in enumerate(zip(probs, alphas, strict=True)):
        a = optimal_tokens(p) if a is None else np.asarray(a, dtype=int)
        alphas[b] = a
        rows, idx = constraint_rows(p, a)
        rows_all.append(rows)
        idx_all.append(idx)
        Ws[b] = least_norm_fro(rows, p.d) if not np.any(np.all(rows == 0, axis=1)) else None
    feasible = np.array([W is not None for W in Ws])
    method = np.where(feasible, "ldp", "ldp-infeasible").astype(object)
    if norm == "nuc":
        groups: dict = {}
        for b in np.nonzero(feasible)[0]:
            p = probs[b]
            if rows_all[b].shape[0] == 0:  # nothing to separate: W = 0
                continue
            key = (rows_all[b].shape, p.query_view()[0].shape)
            groups.setdefault(key, []).append(b)
        for members in groups.values():
            red = [
                _reduce(rows_all[b], probs[b].query_view()[0].reshape(-1, probs[b].d), probs[b].d)
                for b in members
            ]
            M, gap = _barrier_threads(np.stack([r[2] for r in red]))
            for k, b in enumerate(members):
                U, Bz, _ = red[k]
                if gap[k] <= CERTIFIED_GAP:
                    Ws[b] = U @ M[k] @ Bz.T
                    method[b] = "barrier"
                else:  # ill-conditioned (nearly infeasible): interior point
                    sol = solve_att_svm(probs[b], alphas[b], "nuc")
                    Ws[b], method[b] = sol.W, "clarabel"
        feasible = np.array([W is not None for W in Ws])
    objective = np.full(B, np.nan)
    supports, margins = [None] * B, [None] * B
    for b in np.nonzero(feasible)[0]:
        W, p = Ws[b], probs[b]
        s = np.linalg.svd(W, compute_uv=False)
        objective[b] = np.sqrt((s**2).sum()) if norm == "fro" else s.sum()
        margins[b], supports[b] = margins_and_support(
            p, rows_all[b], idx_all[b], W, alphas[b], support_tol=support_tol
        )
    return dict(
        W=Ws,
        feasible=feasible,
        objective=objective,
        support=supports,
        margins=margins,
        alpha=alphas,
        method=method,
    )
