"""Attention SVMs on pair constraints, certified: the solvers behind `attsvm.svm` at scale.

Every attention SVM (docs/theory.md §2) is, for some key differences D_j ∈ R^d and queries
z_k ∈ R^{d2},

    min ‖W‖  s.t.  ⟨A_j, W⟩ = D_jᵀ W z_{k(j)} ≥ 1,   A_j = D_j z_{k(j)}ᵀ,   W ∈ R^{d×d2},

with ‖·‖ Frobenius (Att-SVM) or nuclear (Att-SVM*). The rank-one structure of A_j is all a
solver needs: Σ_j λ_j A_j = Cᵀ Z with C_k = Σ_{j: k(j)=k} λ_j D_j (one sparse product over
the constraints, then a (d, q)·(q, d2) product), and the margins of a W are the rows of D dotted
with the columns of W Zᵀ. No (m, d·d2) row matrix is formed.

Certificates (checkable from the returned arrays):
    Frobenius: W = B(λ) := Σ_j λ_j A_j (`dual_residual` = ‖W − B(λ)‖_F/‖W‖_F); with μ the
        smallest margin, W/μ is feasible with ½‖W‖²/μ² and λ has the dual value
        1ᵀλ − ½‖B(λ)‖² of max_{λ≥0} 1ᵀλ − ½‖B(λ)‖²: `gap` is their relative difference.
    nuclear: λ/max(1, ‖B(λ)‖₂) is feasible for max 1ᵀλ s.t. ‖B(λ)‖₂ ≤ 1 (`dual_residual` =
        max(0, ‖B(λ)‖₂ − 1)) and W/μ for the primal: `gap` = (‖W‖_*/μ − 1ᵀλ/max(1, ‖B‖₂)) /
        (‖W‖_*/μ).
Infeasibility (the same for both norms, Gordan's alternative): a zero constraint (a token
equal to the selected one along its query, or a zero query), or a Farkas certificate
μ ≥ 0, 1ᵀμ = 1, Σ_j μ_j A_j = 0 (`farkas`).

Solvers ("auto" picks by size):
    "CLARABEL": the reference, through the duals of `attsvm.svm` (Frobenius: the QP in λ with
        the Gram K = (D Dᵀ) ∘ (Z Zᵀ)[k, k]; nuclear: the LMI in orthonormal bases of span{D_j}
        and span{z_k}, docs/theory.md §2.6).
    "ldp": Frobenius, exact: Lawson & Hanson's least-distance program (1974, ch. 23) on the
        constraints in those bases, (m, r_D·r_Z) rows: for small d (d² ≪ m) and small m.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import nnls

NORMS = ("fro", "nuc")
SOLVERS = ("auto", "CLARABEL", "ldp")
LDP_INFEASIBLE = 1e-13   # |residual| of the LDP's last coordinate meaning "infeasible"
LDP_MAX_ENTRIES = 10_000_000   # the exact small method forms (m, r_D·r_Z) rows: at most this


@dataclass(frozen=True, eq=False)
class PairSolution:
    """A certified solution of min ‖W‖ s.t. D_jᵀ W z_{k(j)} ≥ 1 (module doc).

    Attributes:
        W: (d, d2) solution, or None when infeasible / failed.
        duals: (m,) multipliers λ ≥ 0 (Frobenius: of ½‖W‖², W = Σ λ_j A_j; nuclear: of ‖W‖_*,
            ‖Σ λ_j A_j‖₂ ≤ 1 up to `dual_residual`), or None.
        feasible: True iff an optimal W was found. status: "optimal", "infeasible", or the
            solver's own word when it failed.
        objective: ‖W‖ in the norm. min_margin: min_j D_jᵀ W z_{k(j)}.
        gap: relative duality gap of (W/min_margin, λ) (module doc).
        dual_residual: Frobenius ‖W − Σ λ_j A_j‖_F/‖W‖_F; nuclear max(0, ‖Σ λ_j A_j‖₂ − 1).
        reason: why infeasible. farkas: (m,) μ ≥ 0, Σ μ = 1, Σ μ_j A_j ≈ 0, when found.
        solver: the method that produced it. norm: "fro" or "nuc".
    """

    W: np.ndarray | None
    duals: np.ndarray | None
    feasible: bool
    status: str
    objective: float | None
    min_margin: float | None
    gap: float | None
    dual_residual: float | None
    reason: str | None = None
    farkas: np.ndarray | None = None
    solver: str = ""
    norm: str = "fro"


# -- the structured operators ---------------------------------------------------------------
class Pairs:
    """The constraints A_j = D_j z_{k(j)}ᵀ with their structured products.

    D (m, d), Z (q, d2), query (m,) int in [0, q)."""

    CHUNK = 8192   # rows per block of the margin products (bounded temporaries)

    def __init__(self, D, Z, query):
        self.D = np.ascontiguousarray(D, dtype=np.float64)
        self.Z = np.ascontiguousarray(Z, dtype=np.float64)
        self.query = np.asarray(query, dtype=np.int64)
        self.m, self.d = self.D.shape
        self.q, self.d2 = self.Z.shape
        # S (q, m): S[k(j), j] = 1; Sλ-weighted sums C = S diag(λ) D
        self._S = sp.csr_matrix((np.ones(self.m), (self.query, np.arange(self.m))),
                                shape=(self.q, self.m))
        self._ZZ = self.Z @ self.Z.T if self.q <= 2 * self.d2 else None

    def combine(self, lam) -> np.ndarray:
        """B(λ) = Σ_j λ_j A_j = Cᵀ Z, C_k = Σ_{j: k(j)=k} λ_j D_j: (d, d2)."""
        C = self._S.multiply(np.asarray(lam)[None, :]).tocsr() @ self.D     # (q, d)
        return C.T @ self.Z

    def margins(self, W) -> np.ndarray:
        """⟨A_j, W⟩ = D_jᵀ W z_{k(j)}: (m,)."""
        return self._rowdot(np.asarray(W) @ self.Z.T)                       # (d, q)

    def gram(self, lam) -> np.ndarray:
        """K λ = (⟨A_j, B(λ)⟩)_j without forming K: (m,)."""
        if self._ZZ is None:
            return self.margins(self.combine(lam))
        C = self._S.multiply(np.asarray(lam)[None, :]).tocsr() @ self.D     # (q, d)
        return self._rowdot(C.T @ self._ZZ)

    def _rowdot(self, M) -> np.ndarray:
        """(D_j · M[:, k(j)])_j for M (d, q)."""
        Mt = np.ascontiguousarray(M.T)
        out = np.empty(self.m)
        for a in range(0, self.m, self.CHUNK):
            b = min(a + self.CHUNK, self.m)
            out[a:b] = np.einsum("ij,ij->i", self.D[a:b], Mt[self.query[a:b]])
        return out

    def bases(self, rtol: float = 1e-12):
        """Orthonormal bases U_D (d, r_D) of span{D_j} and U_Z (d2, r_Z) of the queries used."""
        used = np.unique(self.query)
        return _span(self.D.T, rtol), _span(self.Z[used].T, rtol)

    def reduced_rows(self, UD, UZ) -> np.ndarray:
        """vec(U_Dᵀ A_j U_Z) (row-major): (m, r_D·r_Z)."""
        a, b = self.D @ UD, self.Z @ UZ
        return np.einsum("ja,jb->jab", a, b[self.query]).reshape(self.m, -1)


def _span(M: np.ndarray, rtol: float = 1e-12) -> np.ndarray:
    """Orthonormal basis (p, r) of the column space of M (p, k) (r ≥ 1)."""
    if M.shape[1] > 4 * M.shape[0]:            # many columns: the p × p Gram's eigenvectors
        ev, U = np.linalg.eigh(M @ M.T)
        ev, U = ev[::-1], U[:, ::-1]
        keep = ev > (rtol ** 2) * max(ev[0], 0.0) if ev[0] > 0 else np.zeros(len(ev), bool)
        return U[:, : max(1, int(keep.sum()))]
    U, sv, _ = np.linalg.svd(M, full_matrices=False)
    return U[:, : max(1, int(np.sum(sv > rtol * sv[0])))] if sv.size and sv[0] > 0 else U[:, :1]


# -- certificates ---------------------------------------------------------------------------
def certify(P: Pairs, W, lam, norm: str):
    """(objective, min margin, relative gap, dual residual) of (W, λ) (module doc)."""
    W = np.asarray(W, dtype=np.float64)
    lam = np.asarray(lam, dtype=np.float64)
    mu = float(P.margins(W).min()) if P.m else np.inf
    B = P.combine(lam)
    if norm == "fro":
        obj = float(np.linalg.norm(W))
        res = float(np.linalg.norm(W - B) / obj) if obj > 0 else float(np.linalg.norm(B))
        primal = 0.5 * obj ** 2 / mu ** 2 if mu > 0 else np.inf
        dual = float(lam.sum()) - 0.5 * float(np.sum(B * B))
    else:
        obj = float(np.linalg.svd(W, compute_uv=False).sum())
        s1 = float(np.linalg.norm(B, 2)) if B.size else 0.0
        res = max(0.0, s1 - 1.0)
        primal = obj / mu if mu > 0 else np.inf
        dual = float(lam.sum()) / max(1.0, s1)
    gap = (primal - dual) / primal if np.isfinite(primal) and primal > 0 else np.inf
    return obj, mu, float(gap), res


def _solution(P, W, lam, norm, solver, status="optimal") -> PairSolution:
    obj, mu, gap, res = certify(P, W, lam, norm)
    return PairSolution(W=W, duals=lam, feasible=True, status=status, objective=obj,
                        min_margin=mu, gap=gap, dual_residual=res, solver=solver, norm=norm)


def _infeasible(reason, solver, norm, farkas=None, status="infeasible") -> PairSolution:
    return PairSolution(W=None, duals=None, feasible=False, status=status, objective=None,
                        min_margin=None, gap=None, dual_residual=None, reason=reason,
                        farkas=farkas, solver=solver, norm=norm)


# -- exact small method: least-distance programming ----------------------------------------
def ldp_nnls(G: np.ndarray, h: float = 1.0):
    """Lawson & Hanson's least-distance program: x = argmin ‖x‖ s.t. G x ≥ h via the NNLS
    u = argmin_{u ≥ 0} ‖E u − f‖, E = [Gᵀ; h1ᵀ], f = e_last (1974, ch. 23).

    Returns (x or None, u): x = −r[:-1]/r[-1] for r = E u − f; infeasible iff r = 0, and then
    u/1ᵀu is a Farkas certificate (u ≥ 0, Gᵀu = 0, h1ᵀu = 1). The multipliers of
    min ½‖x‖² are u/(−r[-1]) (x = Gᵀλ)."""
    m, p = G.shape
    E = np.vstack([G.T, np.full((1, m), h)])
    f = np.zeros(p + 1)
    f[-1] = 1.0
    u, _ = nnls(E, f, maxiter=50 * (m + p + 1))
    r = E @ u - f
    if abs(r[-1]) < LDP_INFEASIBLE:
        return None, u
    return -r[:-1] / r[-1], u


def _solve_ldp(P: Pairs, norm: str) -> PairSolution:
    UD, UZ = P.bases()
    R = P.reduced_rows(UD, UZ)
    x, u = ldp_nnls(R)
    if x is None or np.min(R @ x) < 1 - 1e-8:
        s = u.sum()
        return _infeasible("Farkas: a convex combination of the constraints vanishes "
                           f"(‖Σ μ_j A_j‖_F = {np.linalg.norm(R.T @ (u / s)):.2e})"
                           if s > 0 else "the least-distance program found no point",
                           "ldp", norm, farkas=u / s if s > 0 else None)
    lam = u / (1.0 - u.sum())      # −r[-1] = 1 − 1ᵀu > 0 (x = Gᵀu / (1 − 1ᵀu))
    W = P.combine(lam)             # = U_D X U_Zᵀ, exactly Σ λ_j A_j
    return _solution(P, W, lam, "fro", "ldp")


# -- the Clarabel reference -----------------------------------------------------------------
def _solve_clarabel(P: Pairs, norm: str) -> PairSolution:
    import cvxpy as cp

    from . import svm  # lazy: attsvm.svm dispatches to this module

    try:
        if norm == "fro":
            K = (P.D @ P.D.T) * (P.Z @ P.Z.T)[np.ix_(P.query, P.query)]
            lam = cp.Variable(P.m, name="lambda")
            prob = cp.Problem(cp.Minimize(0.5 * cp.quad_form(lam, cp.psd_wrap(K))
                                          - cp.sum(lam)), [lam >= 0])
            prob.solve(solver=svm.SOLVER, **svm.SOLVER_OPTS)
            status = svm._dual_status(prob.status)
            if status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or lam.value is None:
                return _infeasible(f"Clarabel: {status}", "CLARABEL", norm, status=status)
            duals = np.maximum(np.asarray(lam.value), 0.0)   # λ ≥ 0 exactly
            return _solution(P, P.combine(duals), duals, norm, "CLARABEL", status)
        UD, UZ = P.bases()
        R = P.reduced_rows(UD, UZ)
        rD, rZ = UD.shape[1], UZ.shape[1]
        prob, lam, lmi = svm._dual_nuc_problem(np.ascontiguousarray(R.T), P.m, rD, rZ)
        prob.solve(solver=svm.SOLVER, **svm.SOLVER_OPTS)
        status = svm._dual_status(prob.status)
        if (status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or lam.value is None
                or lmi.dual_value is None):
            return _infeasible(f"Clarabel: {status}", "CLARABEL", norm, status=status)
        M = -2.0 * np.asarray(lmi.dual_value)[:rD, rD:]
        duals = np.maximum(np.asarray(lam.value), 0.0)
        return _solution(P, UD @ M @ UZ.T, duals, norm, "CLARABEL", status)
    except cp.error.SolverError as exc:
        msg = f"solver_error: {exc}".splitlines()[0][:200]
        return _infeasible(msg, "CLARABEL", norm, status=msg)


# -- public ---------------------------------------------------------------------------------
def _check(D, Z, query):
    D = np.asarray(D, dtype=np.float64)
    Z = np.asarray(Z, dtype=np.float64)
    query = np.asarray(query)
    if D.ndim != 2 or Z.ndim != 2:
        raise ValueError(f"`D` and `Z` must be 2-d arrays; got shapes {D.shape}, {Z.shape}")
    if query.shape != (D.shape[0],) or (query.size and not np.issubdtype(query.dtype,
                                                                            np.integer)):
        raise ValueError(f"`query` must be an int array of shape ({D.shape[0]},); got "
                         f"{query.dtype} {query.shape}")
    if query.size and (query.min() < 0 or query.max() >= Z.shape[0]):
        raise ValueError(f"`query` must index the {Z.shape[0]} rows of `Z`")
    if not (np.all(np.isfinite(D)) and np.all(np.isfinite(Z))):
        raise ValueError("`D` and `Z` must be finite")
    return D, Z, query.astype(np.int64)


def pick_solver(m: int, d: int, d2: int, q: int, norm: str) -> str:
    """The method "auto" uses for m constraints, W (d, d2) and q queries."""
    p = min(d, m) * min(d2, q)
    if norm == "fro" and m * p <= LDP_MAX_ENTRIES:
        return "ldp"
    return "CLARABEL"


def solve_pairs(D, Z, query, norm: str = "fro", *, solver: str = "auto") -> PairSolution:
    """min ‖W‖ (norm "fro" or "nuc") s.t. D_jᵀ W Z[query[j]] ≥ 1, with its certificate.

    Args:
        D: (m, d) key differences x_α − x_s, one row per constraint.
        Z: (q, d2) the distinct queries.
        query: (m,) int, the row of Z of constraint j's query.
        norm: "fro" or "nuc".
        solver: "auto" (by size), "CLARABEL" (the reference) or "ldp" (Frobenius, exact).
    Returns a `PairSolution`; infeasible data is a result (feasible=False, with `reason`).
    """
    if norm not in NORMS:
        raise ValueError(f"`norm` must be one of {list(NORMS)}; got {norm!r}")
    if solver not in SOLVERS:
        raise ValueError(f"`solver` must be one of {list(SOLVERS)}; got {solver!r}")
    D, Z, query = _check(D, Z, query)
    P = Pairs(D, Z, query)
    if P.m == 0:
        W = np.zeros((P.d, P.d2))
        return PairSolution(W=W, duals=np.zeros(0), feasible=True, status="optimal",
                            objective=0.0, min_margin=np.inf, gap=0.0, dual_residual=0.0,
                            solver="none", norm=norm)
    zero = (np.linalg.norm(D, axis=1) == 0) | (np.linalg.norm(Z, axis=1) == 0)[query]
    if zero.any():
        j = int(np.argmax(zero))
        mu = np.zeros(P.m)
        mu[j] = 1.0
        return _infeasible(f"constraint {j} is zero (a token equal to the selected one along "
                           "its query, or a zero query)", "check", norm, farkas=mu)
    if solver == "auto":
        solver = pick_solver(P.m, P.d, P.d2, P.q, norm)
    if solver == "ldp":
        if norm != "fro":
            raise ValueError("solver='ldp' solves the Frobenius SVM only")
        return _solve_ldp(P, norm)
    return _solve_clarabel(P, norm)
