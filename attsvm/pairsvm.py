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
    "newton", "wsnewton", "ws": Frobenius at scale, on the dual (projected Newton–CG; on a
        working set where m ≫ d·d2; the LDP on a working set).
    "alm": nuclear, a Burer–Monteiro augmented Lagrangian handing over to Newton on the
        optimality conditions, matrix-free (MINRES).
The method, its measurements and its prices: docs/svm-solvers.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.sparse as sp
from scipy.optimize import nnls

from . import blas, pairjax
from .limits import KKT_PREC_MAX, LDP_MAX_ENTRIES, fro_method, nuc_fallback

NORMS = ("fro", "nuc")
SOLVERS = ("auto", "CLARABEL", "ldp", "ws", "wsnewton", "newton", "alm")
LDP_INFEASIBLE = 1e-13  # |residual| of the LDP's last coordinate meaning "infeasible"
RHO_GROWTH = 4.0  # ρ ← 4ρ after each outer step (ρ₀ = RHO0/max y)
RHO0 = 5.0
# Projected Newton's ε-active set: λ_j ≤ EPS_ACTIVE·max λ with a positive gradient takes a
# gradient step, not a Newton one; a small ε leaves more to Newton, which needs fewer steps.
EPS_ACTIVE = 1e-5
WS_LOOSE_GAP = 1e-7  # the working set's rounds before the last solve to this gap only
WS_NEAR = 0.2  # "wsnewton" tops each round's joiners up with non-members of margin < 1 + this
GRAM_MAX = 8000  # "ws" solves working sets up to this size on their formed Gram (n² floats)
# uᵀKu from a formed Gram carries rounding of ε·(max‖A_j‖·1ᵀu)², so ‖B(u)‖ is resolved to
# about 1e-8 of max‖A_j‖·1ᵀu: `_ldp_gram` calls data infeasible below this, and "ws" checks
# the Farkas vector μ on the constraints themselves and states the bound ‖W‖ ≥ 1/‖B(μ)‖
FARKAS_GRAM = 1e-7
POLISH_GAP = 1e-4  # `_ldp_gram` tries its active-set finish once the relative gap is this small


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
@dataclass(frozen=True, eq=False)
class Tokens:
    """The constraints' token form, where each D_j = x_{iα} − x_{it} comes from n sequences
    of T keys and each sequence's K queries are rows i·K … i·K + K − 1 of Z: with it the
    products read the (n, T, d) keys instead of the (m, d) differences (T − 1 times fewer
    numbers when every token is a query), through the logits G_ik = X_i W z_ik.

    X (n, T, d) keys (padding rows unused); alpha (n, K) int, the selected token of each
    query; flat (m,) int, constraint j's index (i, k, t) raveled in (n, K, T)."""

    X: np.ndarray
    alpha: np.ndarray
    flat: np.ndarray

    @property
    def shape(self) -> tuple:
        return (self.X.shape[0], self.alpha.shape[1], self.X.shape[1])  # (n, K, T)

    def subset(self, S) -> Tokens:
        return Tokens(self.X, self.alpha, self.flat[S])

    def margins(self, W, Z) -> np.ndarray:
        """(x_{iα} − x_{it})ᵀ W z_ik at each constraint: (m,)."""
        n, K, _ = self.shape
        V = (Z @ np.asarray(W).T).reshape(n, K, -1)  # (n, K, d): W z_ik
        G = V @ self.X.transpose(0, 2, 1)  # (n, K, T): x_itᵀ W z_ik
        G = np.take_along_axis(G, self.alpha[:, :, None], axis=2) - G
        return G.reshape(-1)[self.flat]

    def combine(self, lam, Z) -> np.ndarray:
        """Σ_j λ_j (x_{iα} − x_{it}) z_ikᵀ = Σ_ik (Σ_t Λ_ikt x_it) z_ikᵀ with Λ_ik = −λ_ik·
        plus (Σ_t λ_ikt) at α_ik: (d, d2)."""
        n, K, T = self.shape
        L = np.zeros(n * K * T)
        L[self.flat] = -np.asarray(lam, dtype=np.float64)
        L = L.reshape(n, K, T)
        tot = -L.sum(axis=2, keepdims=True)
        np.put_along_axis(L, self.alpha[:, :, None], tot, axis=2)  # λ_ikα = 0: it is no pair
        C = L @ self.X  # (n, K, d)
        return C.reshape(n * K, -1).T @ Z


class Pairs:
    """The constraints A_j = D_j z_{k(j)}ᵀ with their structured products.

    D (m, d), Z (q, d2), query (m,) int in [0, q); products: "numpy", "jax" (margins,
    combinations and Gram products on JAX's device, `attsvm.pairjax`) or "auto"
    (`pairjax.pick`: JAX only on an accelerator, for large problems)."""

    CHUNK = 8192  # rows per block of the margin products (bounded temporaries)

    def __init__(self, D, Z, query, tokens: Tokens | None = None, products: str = "numpy"):
        self.D = np.ascontiguousarray(D, dtype=np.float64)
        self.Z = np.ascontiguousarray(Z, dtype=np.float64)
        self.query = np.asarray(query, dtype=np.int64)
        self.m, self.d = self.D.shape
        self.q, self.d2 = self.Z.shape
        self.tokens = tokens
        self.requested = products  # "auto" decides again for each subset, by its size
        self.products = pairjax.pick(products, m=self.m, d=self.d, d2=self.d2, q=self.q)
        self._device = None
        if self.products == "jax":
            self._device = pairjax.DeviceProducts(self.D, self.Z, self.query, tokens)
        # the pattern of S (q, m), S[k(j), j] = λ_j, in CSR form: C = S D
        self._order = np.argsort(self.query, kind="stable")
        self._indptr = np.concatenate([[0], np.cumsum(np.bincount(self.query, minlength=self.q))])
        self._ZZ = self.Z @ self.Z.T if self.q <= 2 * self.d2 and tokens is None else None

    def subset(self, S) -> Pairs:
        """The constraints S alone (the same queries Z)."""
        tokens = None if self.tokens is None else self.tokens.subset(S)
        return Pairs(self.D[S], self.Z, self.query[S], tokens, self.requested)

    def combine(self, lam) -> np.ndarray:
        """B(λ) = Σ_j λ_j A_j = Cᵀ Z, C_k = Σ_{j: k(j)=k} λ_j D_j: (d, d2)."""
        if self._device is not None:
            return self._device.combine(lam)
        if self.tokens is not None:
            return self.tokens.combine(lam, self.Z)
        return self._sums(lam).T @ self.Z

    def _sums(self, lam) -> np.ndarray:
        """C (q, d), C_k = Σ_{j: k(j)=k} λ_j D_j."""
        S = sp.csr_matrix(
            (np.asarray(lam, dtype=np.float64)[self._order], self._order, self._indptr),
            shape=(self.q, self.m),
        )
        return np.asarray(S @ self.D)

    def margins(self, W) -> np.ndarray:
        """⟨A_j, W⟩ = D_jᵀ W z_{k(j)}: (m,)."""
        if self._device is not None:
            return self._device.margins(W)
        if self.tokens is not None:
            return self.tokens.margins(W, self.Z)
        return self._rowdot(np.asarray(W) @ self.Z.T)  # (d, q)

    def gram(self, lam) -> np.ndarray:
        """K λ = (⟨A_j, B(λ)⟩)_j without forming K: (m,)."""
        if self._device is not None:
            return self._device.gram(lam)
        if self._ZZ is None:
            return self.margins(self.combine(lam))
        return self._rowdot(self._sums(lam).T @ self._ZZ)

    def gram_matrix(self) -> np.ndarray:
        """K = (⟨A_j, A_k⟩) = (D Dᵀ) ∘ (Z Zᵀ)[k(j), k(k)], formed: (m, m)."""
        ZZ = self.Z @ self.Z.T
        return (self.D @ self.D.T) * ZZ[np.ix_(self.query, self.query)]

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
    if M.shape[1] > 4 * M.shape[0]:  # many columns: the p × p Gram's eigenvectors
        ev, U = np.linalg.eigh(M @ M.T)
        ev, U = ev[::-1], U[:, ::-1]
        keep = ev > (rtol**2) * max(ev[0], 0.0) if ev[0] > 0 else np.zeros(len(ev), bool)
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
        primal = 0.5 * obj**2 / mu**2 if mu > 0 else np.inf
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
    return PairSolution(
        W=W,
        duals=lam,
        feasible=True,
        status=status,
        objective=obj,
        min_margin=mu,
        gap=gap,
        dual_residual=res,
        solver=solver,
        norm=norm,
    )


def _infeasible(reason, solver, norm, farkas=None, status="infeasible") -> PairSolution:
    return PairSolution(
        W=None,
        duals=None,
        feasible=False,
        status=status,
        objective=None,
        min_margin=None,
        gap=None,
        dual_residual=None,
        reason=reason,
        farkas=farkas,
        solver=solver,
        norm=norm,
    )


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
        return _infeasible(
            "Farkas: a convex combination of the constraints vanishes "
            f"(‖Σ μ_j A_j‖_F = {np.linalg.norm(R.T @ (u / s)):.2e})"
            if s > 0
            else "the least-distance program found no point",
            "ldp",
            norm,
            farkas=u / s if s > 0 else None,
        )
    lam = u / (1.0 - u.sum())  # −r[-1] = 1 − 1ᵀu > 0 (x = Gᵀu / (1 − 1ᵀu))
    W = P.combine(lam)  # = U_D X U_Zᵀ, exactly Σ λ_j A_j
    return _solution(P, W, lam, "fro", "ldp")


# -- the Clarabel reference -----------------------------------------------------------------
def _solve_clarabel(P: Pairs, norm: str) -> PairSolution:
    import cvxpy as cp

    from . import conic

    try:
        if norm == "fro":
            K = (P.D @ P.D.T) * (P.Z @ P.Z.T)[np.ix_(P.query, P.query)]
            lam = cp.Variable(P.m, name="lambda")
            prob = cp.Problem(
                cp.Minimize(0.5 * cp.quad_form(lam, cp.psd_wrap(K)) - cp.sum(lam)), [lam >= 0]
            )
            prob.solve(solver=conic.SOLVER, **conic.SOLVER_OPTS)
            status = conic.dual_status(prob.status)
            if status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or lam.value is None:
                return _infeasible(f"Clarabel: {status}", "CLARABEL", norm, status=status)
            duals = np.maximum(np.asarray(lam.value), 0.0)  # λ ≥ 0 exactly
            return _solution(P, P.combine(duals), duals, norm, "CLARABEL", status)
        UD, UZ = P.bases()
        R = P.reduced_rows(UD, UZ)
        rD, rZ = UD.shape[1], UZ.shape[1]
        prob, lam, lmi = conic.dual_nuc_problem(np.ascontiguousarray(R.T), P.m, rD, rZ)
        prob.solve(solver=conic.SOLVER, **conic.SOLVER_OPTS)
        status = conic.dual_status(prob.status)
        if (
            status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
            or lam.value is None
            or lmi.dual_value is None
        ):
            return _infeasible(f"Clarabel: {status}", "CLARABEL", norm, status=status)
        M = -2.0 * np.asarray(lmi.dual_value)[:rD, rD:]
        duals = np.maximum(np.asarray(lam.value), 0.0)
        return _solution(P, UD @ M @ UZ.T, duals, norm, "CLARABEL", status)
    except cp.error.SolverError as exc:
        msg = f"solver_error: {exc}".splitlines()[0][:200]
        return _infeasible(msg, "CLARABEL", norm, status=msg)


# -- public ---------------------------------------------------------------------------------
def _check_tokens(tokens: Tokens | None, D, Z, query) -> Tokens | None:
    """`tokens` as arrays, or ValueError where it does not describe (D, Z, query)."""
    if tokens is None:
        return None
    X = np.ascontiguousarray(tokens.X, dtype=np.float64)
    alpha = np.asarray(tokens.alpha, dtype=np.int64)
    flat = np.asarray(tokens.flat, dtype=np.int64)
    ok = X.ndim == 3 and alpha.ndim == 2 and X.shape[0] == alpha.shape[0]
    ok = ok and X.shape[2] == D.shape[1] and flat.shape == (D.shape[0],)
    ok = ok and alpha.size == Z.shape[0] and (alpha.size == 0 or 0 <= alpha.min())
    ok = ok and (alpha.size == 0 or alpha.max() < X.shape[1])
    n, K, T = X.shape[0], alpha.shape[1] if alpha.ndim == 2 else 0, X.shape[1]
    ok = ok and (flat.size == 0 or (0 <= flat.min() and flat.max() < n * K * T))
    if ok:
        i, k, t = np.unravel_index(flat, (n, K, T))
        ok = np.array_equal(query, i * K + k)
        for a in range(0, D.shape[0], Pairs.CHUNK):  # blocks: no second (m, d) array
            b = slice(a, a + Pairs.CHUNK)
            ok = ok and np.array_equal(D[b], X[i[b], alpha[i[b], k[b]]] - X[i[b], t[b]])
    if not ok:
        raise ValueError(
            "`tokens` does not describe the constraints: D_j must be X[i, alpha[i, k]] − "
            "X[i, t] and query_j = i·K + k for (i, k, t) = unravel(flat_j, (n, K, T))"
        )
    return Tokens(X, alpha, flat)


def _check(D, Z, query):
    D = np.asarray(D, dtype=np.float64)
    Z = np.asarray(Z, dtype=np.float64)
    query = np.asarray(query)
    if D.ndim != 2 or Z.ndim != 2:
        raise ValueError(f"`D` and `Z` must be 2-d arrays; got shapes {D.shape}, {Z.shape}")
    if query.shape != (D.shape[0],) or (query.size and not np.issubdtype(query.dtype, np.integer)):
        raise ValueError(
            f"`query` must be an int array of shape ({D.shape[0]},); got "
            f"{query.dtype} {query.shape}"
        )
    if query.size and (query.min() < 0 or query.max() >= Z.shape[0]):
        raise ValueError(f"`query` must index the {Z.shape[0]} rows of `Z`")
    if not (np.all(np.isfinite(D)) and np.all(np.isfinite(Z))):
        raise ValueError("`D` and `Z` must be finite")
    return D, Z, query.astype(np.int64)


# -- Frobenius at scale: projected Newton–PCG on the dual -----------------------------------
class _BlockJacobi:
    """The preconditioner of `_fro_newton`: the inverse of K's diagonal blocks restricted to
    the free set F, one block per query (K_FF,kk = (D_F D_Fᵀ) ‖z_k‖² + c·11ᵀ over the free
    members F of query k), the identity elsewhere. The blocks are built from D at each
    restriction, padded to the next power of two of their size and inverted in batches of
    equal size; a block of more than `BLOCK_MAX` free members keeps only its diagonal."""

    BLOCK_MAX = 64  # the inverses cost Σ_k |F_k|³: larger blocks take the Jacobi diagonal

    def __init__(self, P: Pairs, c: float = 0.0):
        self.P, self.c = P, c
        self.zz = np.einsum("kb,kb->k", P.Z, P.Z)
        self.diag = np.einsum("ja,ja->j", P.D, P.D) * self.zz[P.query] + c
        self.parts: list = []  # per block size g: (constraints js, their flat index, inverses)

    def restrict(self, free: np.ndarray):
        P = self.P
        fj = np.flatnonzero(free)
        qf = P.query[fj]
        counts = np.bincount(qf, minlength=P.q)
        order = np.argsort(qf, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        slot = np.empty(fj.size, np.int64)  # position of each free j in its query's block
        slot[order] = np.arange(fj.size) - np.repeat(starts, counts)
        size = 2 ** np.ceil(np.log2(np.maximum(counts, 1))).astype(np.int64)
        self.parts = []
        for g in np.unique(size[(counts > 0) & (counts <= self.BLOCK_MAX)]):
            ks = np.flatnonzero((size == g) & (counts > 0) & (counts <= self.BLOCK_MAX))
            rank = np.full(P.q, -1)
            rank[ks] = np.arange(ks.size)
            sel = np.flatnonzero(rank[qf] >= 0)
            pos = rank[qf[sel]] * g + slot[sel]
            Dp = np.zeros((ks.size * g, P.d))
            Dp[pos] = P.D[fj[sel]]
            Dp = Dp.reshape(ks.size, g, P.d)
            K = (Dp @ np.swapaxes(Dp, 1, 2)) * self.zz[ks, None, None] + self.c
            f = np.zeros(ks.size * g, bool)
            f[pos] = True
            f = f.reshape(ks.size, g)
            K *= f[:, :, None] & f[:, None, :]
            dg = np.einsum("kii->ki", K)
            ridge = 1e-11 * np.maximum(dg.max(axis=1, keepdims=True), 1e-300)
            dg += np.where(f, ridge, 1.0)
            self.parts.append((fj[sel], pos, np.linalg.inv(K)))

    def apply(self, r: np.ndarray) -> np.ndarray:
        out = r / self.diag
        for js, pos, inv in self.parts:
            rp = np.zeros(inv.shape[0] * inv.shape[1])
            rp[pos] = r[js]
            out[js] = (inv @ rp.reshape(*inv.shape[:2], 1)).reshape(-1)[pos]
        return out


def _pcg(op, prec, b, tol, maxit):
    """Preconditioned CG for op(x) = b (op PSD) from x = 0, stopped at ‖residual‖ ≤ tol,
    after `maxit` steps or at (numerically) zero curvature. Returns (x, steps)."""
    x = np.zeros_like(b)
    r = b.copy()
    z = prec(r)
    p = z.copy()
    rz = r @ z
    for it in range(maxit):
        if np.linalg.norm(r) <= tol:
            return x, it
        Ap = op(p)
        curv = p @ Ap
        if curv <= 1e-15 * (p @ p) * max(1.0, abs(rz)):
            return (x if it else p), it
        a = rz / curv
        x += a * p
        r -= a * Ap
        z = prec(r)
        rz_new = r @ z
        p = z + (rz_new / rz) * p
        rz = rz_new
    return x, maxit


def _fro_newton(
    P: Pairs,
    *,
    ldp: bool = True,
    gap_tol: float = 1e-12,
    max_newton: int = 300,
    max_cg: int = 400,
    farkas_tol: float = 1e-9,
    lam0: np.ndarray | None = None,
):
    """The Frobenius SVM from an NNQP in λ ≥ 0 by projected Newton with an ε-active set
    (Bertsekas 1982, "Projected Newton methods for optimization problems with simple
    constraints"): on the free set F, the Newton step by preconditioned CG (block-Jacobi over
    queries; K products matrix-free, `Pairs.gram`); on the ε-active set a diagonally scaled
    gradient step; an Armijo search along the projection arc.

    ldp=False: the dual min ½‖B(λ)‖² − 1ᵀλ (unbounded below on infeasible data).
    ldp=True: Lawson–Hanson's form min ½‖B(u)‖² + ½(1ᵀu − 1)², i.e. K + 11ᵀ, bounded on any
    data: λ = u/(1 − 1ᵀu) solves the dual when feasible, and when infeasible u → μ with
    B(μ) = 0, 1ᵀμ = 1 (a Farkas certificate).

    It is long because the Newton step, the active-set update, the arc search and the
    certificate test share one loop's state; split, each part would take all of it.

    Returns (λ, status, farkas): status "optimal" (certified relative gap ≤ gap_tol),
    "infeasible" (μ = u/1ᵀu with ‖B(μ)‖_F ≤ farkas_tol·max_j ‖A_j‖_F: no W with
    ‖W‖_F < 1/‖B(μ)‖_F is feasible), or "inaccurate"."""
    c = 1.0 if ldp else 0.0
    prec = _BlockJacobi(P, c)
    dK = prec.diag  # K's diagonal: ‖D_j‖²‖z_k‖² + c
    amax = float(np.sqrt(dK.max()))
    ones = np.ones(P.m)
    K1 = P.gram(ones)
    lam = ones * (P.m / (float(ones @ K1) + c * P.m**2))
    Kl = K1 * lam[0]
    if lam0 is not None and not ldp and float(np.max(lam0)) > 0:  # a warm start
        lam = np.maximum(np.asarray(lam0, dtype=np.float64), 0.0)
        Kl = P.gram(lam)
    for _ in range(max_newton):
        s = float(lam.sum())
        g = Kl + c * s - 1.0
        W2 = float(lam @ Kl)
        done = _newton_certified(lam, Kl, s, W2, c, gap_tol)
        if done is not None:
            return done, "optimal", None
        if s > 0 and np.sqrt(max(W2, 0.0)) <= farkas_tol * amax * s:
            return None, "infeasible", lam / s
        pg = np.where(lam > 0, g, np.minimum(g, 0.0))
        wdist = float(np.linalg.norm(lam - np.maximum(lam - g, 0.0)))
        eps = min(EPS_ACTIVE * float(lam.max()), wdist)
        free = ~((lam <= eps) & (g > 0))
        prec.restrict(free)
        gF = np.where(free, g, 0.0)
        nrm = float(np.linalg.norm(gF))
        tol = max(1e-15 * np.sqrt(P.m), min(0.1 * nrm, nrm**2))

        def op(v, free=free):
            v = np.where(free, v, 0.0)
            return np.where(free, P.gram(v) + c * v.sum(), 0.0)

        def pre(r, free=free):
            return np.where(free, prec.apply(r), 0.0)

        p, _ = _pcg(op, pre, -gF, tol, max_cg)
        p = np.where(free, p, -g / dK)
        f0 = 0.5 * W2 + 0.5 * c * s * s - s
        found = _arc_search(P, lam, p, g, f0, c)
        if found is None:
            return None, "inaccurate", None
        new, Bn = found
        if np.array_equal(new, lam) and float(np.abs(pg).max()) > 0:
            return None, "inaccurate", None
        lam = new
        Kl = P.margins(Bn)
    return None, "inaccurate", None


# -- the working set's exact subproblem: the least-distance program in Gram form ------------
def _ldp_gram(K: np.ndarray, u0=None, *, gap_tol: float = 1e-12, max_iter: int = 200):
    """Lawson–Hanson's least-distance program from the Gram alone (as Bro & De Jong 1997 do
    for NNLS): min ½uᵀ(K + 11ᵀ)u − 1ᵀu over u ≥ 0, K = (⟨A_j, A_k⟩) formed, by projected
    Newton with the free block factored exactly (Cholesky with a ridge of max |g_F|, which
    keeps the steps bounded on the near-singular Grams of low-rank inputs and vanishes at the
    solution), and from a relative gap of POLISH_GAP on, `_ldp_polish`: without it the steps
    near the solution are cut short by the bound and the last digits take a hundred steps.

    It is long because the step, the finish and the certificate test share one loop's state.

    Returns (λ, status, farkas) as `_fro_newton` does (λ = u/(1 − 1ᵀu))."""
    Q = K + 1.0
    dQ = Q.diagonal().copy()
    amax = float(np.sqrt(max(float(K.diagonal().max()), 0.0)))
    if u0 is not None and float(np.max(u0)) > 0:
        u = np.maximum(np.asarray(u0, dtype=np.float64), 0.0)
    else:
        u = np.full(K.shape[0], K.shape[0] / float(Q.sum()))
    Qu = Q @ u
    polished = False
    for it in range(max_iter):
        s = float(u.sum())
        Ku, g = Qu - s, Qu - 1.0
        W2 = float(u @ Ku)
        done = _newton_certified(u, Ku, s, W2, 1.0, gap_tol)
        if done is not None:
            return done, "optimal", None
        if s > 0 and np.sqrt(max(W2, 0.0)) <= FARKAS_GRAM * amax * s:
            return None, "infeasible", u / s
        near = _newton_certified(u, Ku, s, W2, 1.0, POLISH_GAP, margin_tol=1.0) is not None
        if not polished and (near or it % 10 == 9):  # every tenth step: no gap if infeasible
            finish = _ldp_polish(Q, u)
            if finish is not None:  # checked at the loop's top; a Newton step if not done
                u, Qu, polished = finish, Q @ finish, True
                continue
        polished = False
        eps = min(EPS_ACTIVE * float(u.max()), float(np.linalg.norm(u - np.maximum(u - g, 0.0))))
        F = np.flatnonzero(~((u <= eps) & (g > 0)))
        p = -g / dQ
        if F.size:
            ridge = max(1e-13 * float(dQ[F].max()), float(np.abs(g[F]).max()))
            p[F] = -_cho_solve(Q[np.ix_(F, F)], ridge, g[F])
        f0 = 0.5 * float(u @ Qu) - s
        step = 1.0
        for _ in range(60):  # Armijo along the projection arc
            new = np.maximum(u + step * p, 0.0)
            Qn = Q @ new
            if 0.5 * float(new @ Qn) - float(new.sum()) <= (
                f0 + 1e-4 * float(g @ (new - u)) + 1e-15 * abs(f0)
            ):
                break
            step *= 0.5
        else:
            return None, "inaccurate", None
        if np.array_equal(new, u):
            return None, "inaccurate", None
        u, Qu = new, Qn
    return None, "inaccurate", None


def _cho_solve(A: np.ndarray, ridge: float, b: np.ndarray) -> np.ndarray:
    """(A + ridge·I)⁻¹ b by Cholesky (A symmetric PSD, modified in place)."""
    A.flat[:: A.shape[0] + 1] += ridge
    return scipy.linalg.cho_solve(scipy.linalg.cho_factor(A, lower=True, check_finite=False), b)


def _ldp_polish(Q: np.ndarray, u: np.ndarray, tol: float = 1e-13, rounds: int = 30):
    """Lawson–Hanson's loop (1974, ch. 23) with moves of whole blocks, from a near-optimal
    u: on the passive set P = {u > 0}, the stationary point z of ½uᵀQu − 1ᵀu (a Cholesky
    with a 1e-12 relative ridge and three steps of iterative refinement, so near-singular
    Q_PP give the solution nearest u); where z leaves u ≥ 0, the step back to the first bound
    and those members leave P; else the members outside P with 1 − (Qz)_j > tol join it.
    Returns the u where none does, or None after `rounds` moves."""
    dmax = float(Q.diagonal().max())
    for _ in range(rounds):
        P = np.flatnonzero(u > 0)
        QP = Q[np.ix_(P, P)]
        c = scipy.linalg.cho_factor(
            QP + 1e-12 * dmax * np.eye(P.size), lower=True, check_finite=False
        )
        z = u[P].copy()
        for _ in range(3):
            z += scipy.linalg.cho_solve(c, 1.0 - QP @ z, check_finite=False)
        uP, neg = u[P], z <= 0
        u = np.zeros_like(u)
        if neg.any():
            ratio = uP[neg] / (uP[neg] - z[neg])
            a = float(ratio.min())
            new = uP + a * (z - uP)
            new[np.flatnonzero(neg)[ratio <= a * (1 + 1e-12)]] = 0.0
            u[P] = np.maximum(new, 0.0)
            continue
        u[P] = z
        viol = np.flatnonzero((1.0 - Q @ u > tol) & (u == 0))
        if not viol.size:
            return u
        u[viol] = np.finfo(float).tiny  # they join P
    return None


def _newton_certified(
    lam, Kl, s: float, W2: float, c: float, gap_tol: float, margin_tol: float = 1e-11
):
    """`_fro_newton`'s stopping test: λ' = λ / (1 − c·1ᵀλ) when its scaled primal W is
    feasible (smallest margin ≥ 1 − margin_tol) with relative duality gap ≤ gap_tol, else
    None."""
    if 1.0 - c * s <= 0:
        return None
    sc = 1.0 / (1.0 - c * s)
    mu = float(Kl.min()) * sc
    if mu <= 0:
        return None
    primal = 0.5 * W2 * sc * sc / mu**2
    if primal - (s * sc - 0.5 * W2 * sc * sc) <= gap_tol * primal and mu >= 1 - margin_tol:
        return lam * sc
    return None


def _arc_search(P: Pairs, lam, p, g, f0: float, c: float):
    """Armijo search along the projection arc max(λ + t·p, 0), t = 1, ½, ¼, …:
    (the new λ, its B(λ)), or None after 60 halvings."""
    step = 1.0
    for _ in range(60):
        new = np.maximum(lam + step * p, 0.0)
        Bn = P.combine(new)
        sn = float(new.sum())
        fn = 0.5 * float(np.sum(Bn * Bn)) + 0.5 * c * sn * sn - sn
        if fn <= f0 + 1e-4 * float(g @ (new - lam)) + 1e-15 * abs(f0):
            return new, Bn
        step *= 0.5
    return None


# -- nuclear at scale: Burer–Monteiro + augmented Lagrangian, then a dual polish ------------
def _nuc_alm(
    P: Pairs,
    W0: np.ndarray,
    lam0: np.ndarray,
    *,
    gap_tol: float = 1e-8,
    good_gap: float = 1e-6,
    max_outer: int = 40,
    max_inner: int = 4000,
    patience: int = 1,
    refine=None,
):
    """min ‖W‖_* s.t. ⟨A_j, W⟩ ≥ 1 as W = U Vᵀ, min ½(‖U‖²_F + ‖V‖²_F) (Burer & Monteiro,
    Math. Program. 2003; ‖W‖_* = min over factorisations, Srebro et al. 2005) by the
    augmented Lagrangian (Nocedal & Wright ch. 17.4) with L-BFGS inside; started from the
    Frobenius solution W0 (feasible) and multipliers λ0/‖B(λ0)‖₂ (dual feasible).

    With s_j = max(0, y_j − ρ(⟨A_j, W⟩ − 1)) the gradients are U − B(s) V and V − B(s)ᵀ U:
    one margin product and one `Pairs.combine` per evaluation. After each outer step the
    pair (W, y) is certified and, near the end, y is polished (`_nuc_polish`); from a gap of
    KKT_START on, `refine(W, y)` (Newton on the optimality conditions) is tried, again each
    time the gap has fallen tenfold, and the ALM stops once it certifies within gap_tol.

    It is long because the outer loop's multiplier update, its certification and its
    stopping rule share the penalty ρ, the best pair so far and the staleness count.

    Returns (W, λ, gap) of the best certified pair."""
    Uw, sw, Vwt = np.linalg.svd(W0, full_matrices=False)
    k = int(min(len(sw), max(1, np.sum(sw > 1e-10 * sw[0]))))
    d, d2 = W0.shape
    U, V = Uw[:, :k] * np.sqrt(sw[:k]), Vwt[:k].T * np.sqrt(sw[:k])
    y = lam0 / max(np.linalg.norm(P.combine(lam0), 2), 1e-300)
    rho = RHO0 / max(float(y.max()), 1e-12)
    best = (W0, y, certify(P, W0, y, "nuc")[2])

    def fun(x, y, rho):
        U, V = x[: d * k].reshape(d, k), x[d * k :].reshape(d2, k)
        c = P.margins(U @ V.T)
        s = np.maximum(0.0, y - rho * (c - 1.0))
        B = P.combine(s)
        f = 0.5 * (np.sum(U * U) + np.sum(V * V)) + (np.sum(s * s) - np.sum(y * y)) / (2 * rho)
        return f, np.concatenate([(U - B @ V).ravel(), (V - B.T @ U).ravel()])

    x = np.concatenate([U.ravel(), V.ravel()])
    viol_prev = np.inf
    stale = 0
    tried = np.inf
    for _ in range(max_outer):
        x, _ = _lbfgs(
            lambda v: fun(v, y, rho),
            x,
            max_iter=max_inner,
            gtol=max(1e-11, 1e-3 * min(viol_prev, 1.0)),
        )
        W = x[: d * k].reshape(d, k) @ x[d * k :].reshape(d2, k).T
        c = P.margins(W)
        y = np.maximum(0.0, y - rho * (c - 1.0))
        viol = float(max(0.0, 1.0 - c.min()))
        cands = [(W, y)]
        if viol < 1e-6:
            cands += _nuc_polish(P, W, c, y)
        before = best[2]
        best = _best_certified(P, best, cands)
        if refine is not None and viol < 1e-3 and best[2] <= min(KKT_START, 0.1 * tried):
            tried = best[2]
            best = _best_certified(P, best, [refine(W, y)])
        stale = stale + 1 if best[2] > 0.5 * before else 0
        if (
            best[2] <= gap_tol
            or (best[2] <= good_gap and stale >= patience)
            or stale >= 2 * patience
        ):
            break
        if rho < 1e8 / max(float(y.max()), 1e-12):
            rho *= RHO_GROWTH
        viol_prev = viol
    W, lam, gap = best
    s1 = float(np.linalg.norm(P.combine(lam), 2))
    return W, lam / max(1.0, s1), gap


def _best_certified(P: Pairs, best, cands):
    """The (W, λ, gap) of the smallest nuclear gap among `best` and the (W, λ) `cands`
    (None in `cands` is skipped)."""
    for cand in cands:
        if cand is None:
            continue
        W, lam = cand
        gap = certify(P, W, lam, "nuc")[2]
        if gap < best[2]:
            best = (W, lam, gap)
    return best


def _lbfgs(fun, x, *, max_iter: int, gtol: float, memory: int = 20):
    """Unconstrained L-BFGS (Nocedal & Wright, Alg. 7.4–7.5) with a backtracking Armijo
    search; stops when ‖∇‖_∞ ≤ gtol·max(1, |f|) or when 10 steps gained less than 1e-14·|f|
    (rounding). Returns (x, iterations). (scipy's L-BFGS-B spent 15 ms a step in its own
    bookkeeping at n = 2048 here.)"""
    f, g = fun(x)
    S, Y, rhos = [], [], []
    hist = []
    for it in range(max_iter):
        hist.append(f)
        if np.abs(g).max() <= gtol * max(1.0, abs(f)) or (
            it >= 10 and hist[-11] - f <= 1e-14 * max(1.0, abs(f))
        ):
            return x, it
        q = g.copy()
        alphas = []
        for s_, y_, r_ in zip(reversed(S), reversed(Y), reversed(rhos), strict=True):
            a = r_ * (s_ @ q)
            q -= a * y_
            alphas.append(a)
        if S:
            q *= (S[-1] @ Y[-1]) / (Y[-1] @ Y[-1])
        for (s_, y_, r_), a in zip(zip(S, Y, rhos, strict=True), reversed(alphas), strict=True):
            q += (a - r_ * (y_ @ q)) * s_
        p = -q
        slope = float(g @ p)
        if slope >= 0:
            p, slope = -g, -float(g @ g)
            S, Y, rhos = [], [], []
        t = 1.0 if S else min(1.0, 1.0 / max(np.abs(g).max(), 1e-300))
        for _ in range(40):
            xn = x + t * p
            fn, gn = fun(xn)
            if fn <= f + 1e-4 * t * slope:
                break
            t *= 0.5
        else:
            return x, it
        sv, yv = xn - x, gn - g
        sy = float(sv @ yv)
        if sy > 1e-12 * float(np.sqrt((sv @ sv) * (yv @ yv))):
            S.append(sv)
            Y.append(yv)
            rhos.append(1.0 / sy)
            if len(S) > memory:
                S.pop(0)
                Y.pop(0)
                rhos.pop(0)
        x, f, g = xn, fn, gn
    return x, max_iter


def _nuc_polish(
    P: Pairs,
    W: np.ndarray,
    c: np.ndarray,
    y: np.ndarray,
    *,
    sv_rtol: float = 1e-5,
    act_tol: float = 1e-6,
    max_entries: int = 30_000_000,
):
    """Exact optimality conditions from an approximate solution W = U Σ Vᵀ of min ‖W‖_*
    (the subdifferential of the nuclear norm, Watson 1992): with r the numerical rank,
    (1) dual: B(λ) = U_r V_rᵀ + R, U_rᵀ R = 0, R V_r = 0, so U_rᵀ B(λ) = V_rᵀ and
        B(λ) V_r = U_r, λ ≥ 0 on the constraints active at W — a non-negative least-squares
        problem (Lawson–Hanson) in λ_S, which leaves ‖R‖₂ ≤ 1 unchecked: the convex
        combination with the ALM's multipliers y (whose ‖B(y)‖₂ ≈ 1) that certifies best is
        kept;
    (2) primal: W' = U_r X V_rᵀ, X symmetric, with ⟨A_j, W'⟩ = 1 where λ_j > 0 (least
        squares; kept only when X ⪰ 0, so ‖W'‖_* = tr X).
    Returns [(W, λ), (W', λ)] candidates for `certify` (empty when too large)."""
    U, s, Vt = np.linalg.svd(W, full_matrices=False)
    r = int(np.sum(s > sv_rtol * s[0]))
    S = np.nonzero((c <= 1.0 + act_tol) | (y > 1e-9 * max(float(y.max()), 1e-300)))[0]
    if r == 0 or S.size == 0 or (r * (P.d2 + P.d)) * S.size > max_entries:
        return []
    Ur, Vr = U[:, :r], Vt[:r].T
    Dj, zj = P.D[S], P.Z[P.query[S]]
    a, b = Dj @ Ur, zj @ Vr  # (|S|, r)
    M = np.concatenate(
        [
            np.einsum("ja,jb->jab", a, zj).reshape(S.size, -1),
            np.einsum("ja,jb->jab", Dj, b).reshape(S.size, -1),
        ],
        axis=1,
    ).T
    t = np.concatenate([Vr.T.ravel(), Ur.ravel()])
    lamS, _ = nnls(M, t, maxiter=20 * S.size)
    lam = np.zeros(P.m)
    lam[S] = lamS
    By, Bl = P.combine(y), P.combine(lam)
    best, val = lam, -np.inf
    for th in (0.0, 0.5, 0.8, 0.9, 0.95, 0.99, 1.0):
        v = (th * lam.sum() + (1 - th) * y.sum()) / max(
            1.0, np.linalg.norm(th * Bl + (1 - th) * By, 2)
        )
        if v > val:
            best, val = th * lam + (1 - th) * y, v
    lam = best
    out = [(W, lam)]
    pos = lamS > 1e-9 * max(float(lamS.max()), 1e-300)
    if pos.any():
        G = np.einsum("ja,jb->jab", a[pos], b[pos])  # ⟨A_j, U_r X V_rᵀ⟩ = aᵀ X b
        G = 0.5 * (G + np.swapaxes(G, 1, 2)).reshape(int(pos.sum()), -1)
        X = np.linalg.lstsq(G, np.ones(len(G)), rcond=None)[0].reshape(r, r)
        X = 0.5 * (X + X.T)
        if np.linalg.eigvalsh(X).min() >= -1e-12 * abs(np.trace(X)):
            out.append((Ur @ X @ Vr.T, lam))
    return out


KKT_START = 1e-3  # `_nuc_alm` hands over to `_nuc_kkt` from this gap
KKT_ITERS = 20_000  # MINRES iterations of one `_nuc_kkt`, all its Newton steps together


class _KKTSystem:
    """The nuclear SVM's optimality conditions at W = U Vᵀ (U: d × r, V: d2 × r) with the
    constraints S active and their multipliers λ_S (`_nuc_kkt`), and their Jacobian as a
    symmetric operator, formed from (|S|, ·) products only (no d·r × d·r matrix)."""

    def __init__(self, P: Pairs, S: np.ndarray, U, V, lS):
        self.P, self.S, self.U, self.V, self.lS = P, S, U, V, lS
        self.Dj, self.zj = P.D[S], P.Z[P.query[S]]
        lam = np.zeros(P.m)
        lam[S] = lS
        self.B = P.combine(lam)
        self.DU, self.zV = self.Dj @ U, self.zj @ V
        self.nU, self.nV = U.size, V.size

    def residual(self) -> np.ndarray:
        """(U − B V, V − Bᵀ U, −(⟨A_j, U Vᵀ⟩ − 1)_S), the last block negated as in `op`."""
        U, V, B = self.U, self.V, self.B
        c = np.einsum("jk,jk->j", self.DU, self.zV)
        return np.concatenate([(U - B @ V).ravel(), (V - B.T @ U).ravel(), 1.0 - c])

    def op(self, x: np.ndarray) -> np.ndarray:
        """The Jacobian of `residual` times x = (δU, δV, δλ_S): symmetric, since ∂(U − BV)/∂λ_j
        = −A_j V and ∂(V − BᵀU)/∂λ_j = −A_jᵀ U are minus the margins' derivatives."""
        nU, nV, B = self.nU, self.nV, self.B
        dU = x[:nU].reshape(self.U.shape)
        dV = x[nU : nU + nV].reshape(self.V.shape)
        dl = x[nU + nV :, None]
        return np.concatenate(
            [
                (dU - B @ dV - self.Dj.T @ (dl * self.zV)).ravel(),
                (dV - B.T @ dU - self.zj.T @ (dl * self.DU)).ravel(),
                -np.einsum("jk,jk->j", self.Dj @ dU, self.zV)
                - np.einsum("jk,jk->j", self.DU, self.zj @ dV),
            ]
        )

    def preconditioner(self):
        """x ↦ (x_U, x_V, (C Cᵀ)⁻¹ x_λ), C the margins' Jacobian (|S| rows): the block-diagonal
        preconditioner of saddle-point systems with the identity for I − [[0, B], [Bᵀ, 0]]
        (Murphy, Golub & Wathen, SIAM J. Sci. Comput. 2000), for MINRES; None past
        KKT_PREC_MAX active constraints (its Cholesky factor is |S|² floats)."""
        k, n = len(self.S), self.nU + self.nV
        if k == 0 or k > KKT_PREC_MAX:
            return None
        Dj, zj, DU, zV = self.Dj, self.zj, self.DU, self.zV
        CCt = (Dj @ Dj.T) * (zV @ zV.T) + (zj @ zj.T) * (DU @ DU.T)
        CCt[np.diag_indices(k)] += 1e-12 * float(np.trace(CCt)) / k + 1e-300
        factor = scipy.linalg.cho_factor(CCt, check_finite=False)

        def prec(v):
            out = v.copy()
            out[n:] = scipy.linalg.cho_solve(factor, v[n:], check_finite=False)
            return out

        return prec

    def step(self, x: np.ndarray) -> _KKTSystem:
        nU, nV = self.nU, self.nV
        return _KKTSystem(
            self.P,
            self.S,
            self.U + x[:nU].reshape(self.U.shape),
            self.V + x[nU : nU + nV].reshape(self.V.shape),
            self.lS + x[nU + nV :],
        )


def _minres(op, b: np.ndarray, rtol: float, maxiter: int, prec=None):
    """Preconditioned MINRES (Paige & Saunders, SIAM J. Numer. Anal. 1975; in the form of
    Elman, Silvester & Wathen, Finite Elements and Fast Iterative Solvers, 2014, Alg. 4.1) for
    op(x) = b with op symmetric (indefinite or singular) and `prec` a symmetric positive
    definite approximate inverse (None: the identity), from x = 0, stopped when the residual
    the recurrence tracks (in the prec-norm) is at most rtol times its start. Returns
    (x, iterations). scipy's `minres` stops on estimates of ‖op‖·‖x‖ instead, at true
    relative residuals of 0.1–0.6 when asked for 1e-3 on the systems of `_kkt_newton`."""
    prec = prec if prec is not None else (lambda v: v)
    x = np.zeros_like(b)
    v_prev, v = np.zeros_like(b), b.copy()
    z = prec(v)
    g_prev, g = 1.0, float(np.sqrt(max(float(v @ z), 0.0)))
    if g == 0.0:
        return x, 0
    w_prev2, w_prev = np.zeros_like(b), np.zeros_like(b)
    eta, start = g, g  # the rotated right-hand side: |eta| is the residual's norm
    c2, s2, c1, s1 = 1.0, 0.0, 1.0, 0.0  # the Givens rotations two and one steps back
    for it in range(maxiter):
        z = z / g
        Az = op(z)
        delta = float(Az @ z)
        v_next = Az - (delta / g) * v - (g / g_prev) * v_prev
        z_next = prec(v_next)
        g_next = float(np.sqrt(max(float(v_next @ z_next), 0.0)))
        a0 = c1 * delta - c2 * s1 * g
        a1 = float(np.hypot(a0, g_next))
        a2 = s1 * delta + c2 * c1 * g
        a3 = s2 * g
        if a1 == 0.0:
            return x, it + 1
        c, s = a0 / a1, g_next / a1
        w = (z - a3 * w_prev2 - a2 * w_prev) / a1
        x += c * eta * w
        eta = -s * eta
        if abs(eta) <= rtol * start or g_next <= 1e-300:
            return x, it + 1
        v_prev, v, z = v, v_next, z_next
        g_prev, g = g, g_next
        w_prev2, w_prev = w_prev, w
        c2, s2, c1, s1 = c1, s1, c, s
    return x, maxiter


def _kkt_newton(sysm: _KKTSystem, budget: list[int], steps: int = 12) -> _KKTSystem:
    """Inexact Newton on `_KKTSystem`: each step solves the Newton system by preconditioned
    MINRES (`_minres`, restarted while its true residual misses the target, since MINRES
    measures the residual in the preconditioner's norm) to a relative residual of
    min(1e-3, ‖F‖/‖F₀‖) (superlinear convergence), until ‖F‖ is 1e-9 of ‖F₀‖ or stops
    halving. The solves are loose by design: far from the solution a tight solve stalls MINRES
    and gives a worse step (docs/svm-solvers.md). `budget` holds the MINRES iterations left
    and is decremented. The Jacobian is singular along U → UO, V → VO (O orthogonal), which
    leaves W unchanged; the residual is orthogonal to those directions, and so are MINRES's
    iterates."""
    F = sysm.residual()
    res0 = res = float(np.linalg.norm(F))
    cap = 2000  # MINRES iterations of the next step: each is capped, since a stalled one is wasted
    for _ in range(steps):
        if (
            res <= max(1e-12 * max(1.0, float(np.linalg.norm(sysm.U))), 1e-9 * res0)
            or budget[0] <= 0
        ):
            break
        target = max(1e-12, min(1e-3, res / res0)) * res
        prec, limit = sysm.preconditioner(), min(cap, budget[0])
        x, used, r = np.zeros_like(F), 0, -F
        for _ in range(3):
            dx, n = _minres(sysm.op, r, target / float(np.linalg.norm(r)), limit - used, prec)
            x, used = x + dx, used + n
            r = -F - sysm.op(x)
            if float(np.linalg.norm(r)) <= target or used >= limit:
                break
        budget[0] -= used
        cap = 3 * used + 100
        new = sysm.step(x)
        Fn = new.residual()
        rn = float(np.linalg.norm(Fn))
        if rn > 0.5 * res:
            break
        sysm, F, res = new, Fn, rn
    return sysm


def _kkt_correct(sysm: _KKTSystem, scale: float) -> _KKTSystem | None:
    """The next system after Newton solved `sysm`, or None when its solution is optimal:
    a primal-dual active-set round (constraints with λ_j < 0 leave, violated ones join with
    λ_j = 0), and a rank that was too small grows: each singular value σ > 1 of B(λ) (dual
    infeasible) whose left singular vector lies outside span(U) (W lacks that direction)
    adds its singular pair, scaled by √((σ − 1)·scale), to U and V."""
    P, lS, U, V = sysm.P, sysm.lS, sysm.U, sysm.V
    keep = lS >= -1e-12 * (max(float(lS.max()), 1e-300) if lS.size else 1.0)
    join = np.setdiff1d(np.flatnonzero(P.margins(U @ V.T) < 1.0 - 1e-9), sysm.S)
    Ub, sb, Vbt = np.linalg.svd(sysm.B, full_matrices=False)
    grow = np.flatnonzero(sb > 1.0 + 1e-7)
    Q = np.linalg.qr(U)[0]
    grow = grow[np.linalg.norm(Ub[:, grow] - Q @ (Q.T @ Ub[:, grow]), axis=0) > 0.5]
    if keep.all() and join.size == 0 and grow.size == 0:
        return None
    t = np.sqrt((sb[grow] - 1.0) * scale)
    U, V = np.hstack([U, Ub[:, grow] * t]), np.hstack([V, Vbt[grow].T * t])
    S = np.concatenate([sysm.S[keep], join])
    return _KKTSystem(P, S, U, V, np.concatenate([lS[keep], np.zeros(join.size)]))


def _nuc_kkt(P: Pairs, W, lam, *, act_tol: float = 1e-6, rounds: int = 4):
    """Newton on the nuclear SVM's optimality conditions, from the ALM's (W, λ): with
    W = U Vᵀ balanced (r its rank by complementary slackness) and S the active constraints,

        U = B(λ) V,   V = B(λ)ᵀ U,   ⟨A_j, U Vᵀ⟩ = 1 (j ∈ S),

    the stationarity of min ½(‖U‖² + ‖V‖²) under the active margins (Burer & Monteiro 2003),
    as many equations as unknowns (U, V, λ_S); `_kkt_newton` solves them matrix-free. The
    ALM's value converges long before its subspaces do (second order), so a dual built on
    them stalls near a gap of 1e-6; Newton from the ALM's handover (a gap of 1e-3, KKT_START)
    converges superlinearly. The active set and the rank are then corrected (`_kkt_correct`)
    and Newton rerun, up to `rounds` times. Returns (W, λ) for `certify` to judge."""
    Uw, s, Vt = np.linalg.svd(W, full_matrices=False)
    # complementary slackness: W's i-th singular value is zero unless B(λ)'s is one, so the
    # rank is where W's relative singular values fall below B(λ)'s distances from 1
    sb = np.linalg.svd(P.combine(lam), compute_uv=False)
    k = min(len(s), len(sb))
    support = s[:k] > (1.0 - sb[:k]) * s[0]
    r = max(1, k if support.all() else int(np.argmin(support)))
    S = np.flatnonzero((P.margins(W) <= 1.0 + act_tol) | (lam > 1e-9 * float(lam.max())))
    U, V = Uw[:, :r] * np.sqrt(s[:r]), Vt[:r].T * np.sqrt(s[:r])
    sysm = _KKTSystem(P, S, U, V, lam[S].copy())
    budget = [KKT_ITERS]
    for _ in range(rounds):
        sysm = _kkt_newton(sysm, budget)
        nxt = _kkt_correct(sysm, scale=float(s[0]))
        if nxt is None or budget[0] <= 0:
            break
        sysm = nxt
    lam = np.zeros(P.m)
    lam[sysm.S] = np.maximum(sysm.lS, 0.0)
    return sysm.U @ sysm.V.T, lam


# -- public ---------------------------------------------------------------------------------
CLARABEL_MAX_M = 1500  # "auto" falls back to Clarabel on undecided problems up to this m


def pick_solver(m: int, d: int, d2: int, q: int, norm: str) -> str:
    """The method "auto" uses for m constraints, W (d, d2) and q queries: for Frobenius
    `limits.fro_method`'s ("ldp" for small d, "wsnewton" for m ≫ d·d2, else "newton"), which
    its price follows; "alm" for nuclear (started from the Frobenius solution)."""
    return "alm" if norm == "nuc" else fro_method(m, d, d2, q)


def _working_set(
    P: Pairs, S, solve, tol: float, grow, max_rounds: int, *, loose: bool = True, near: float = 0.0
):
    """Constraint generation (a cutting-plane / working-set loop), shared by "ws" and
    "wsnewton": `solve(S, lam0, tight)` solves the constraints S (lam0: the previous round's
    duals on S, zero for new members; None in the first round; tight: to the final accuracy,
    else loosely; always tight unless `loose`) and returns (W, λ_S), or anything else to stop
    with (a decided subproblem or None); all m margins of W in one product; members with zero
    dual leave S (W stays optimal without them) and the violated constraints (margin < 1 −
    tol), the smallest first, up to grow(kept, |S|) of them (kept: the members that stay)
    join it, topped up to that count by the non-members of margin < 1 + `near`, smallest
    first (the likeliest to be violated next round); once none is violated, S is solved
    tightly (if it was not) and checked again, so the W returned is optimal for all m
    constraints with the duals zero outside S. Returns (W, λ (m,)), the stop value, or None
    after `max_rounds`."""
    lam, tight = None, not loose
    for _ in range(max_rounds):
        out = solve(S, None if lam is None else lam[S], tight)
        if not isinstance(out, tuple):
            return out
        W, lam_S = out
        lam = np.zeros(P.m)
        lam[S] = lam_S
        marg = P.margins(W)
        viol = np.flatnonzero(marg < 1 - tol)
        viol = viol[~np.isin(viol, S)]
        if not viol.size:
            if tight:
                return W, lam
            tight = True
            continue
        tight = not loose
        kept = S[lam_S > 0]
        if near > 0:
            viol = np.flatnonzero(marg < 1 + near)
            viol = viol[~np.isin(viol, kept)]
        S = np.union1d(kept, viol[np.argsort(marg[viol])][: grow(kept.size, S.size)])
    return None


def _solve_ws(P: Pairs, tol: float = 1e-10, max_rounds: int = 60) -> PairSolution:
    """Frobenius by `_working_set` around the LDP (in Gram form, `_ldp_gram`, up to GRAM_MAX
    members; else or where it does not certify, Lawson–Hanson's NNLS on the rows), started
    from each query's longest D_j and growing by max(64, |S|/2); an infeasible S makes the
    whole problem infeasible (its Farkas vector, zero outside S). For low-rank inputs with
    many redundant constraints."""

    def ldp(S, lam0, _tight):  # always to the final accuracy
        sub = P.subset(S)
        status = "inaccurate"
        if S.size <= GRAM_MAX:
            u0 = None if lam0 is None else lam0 / (1.0 + lam0.sum())
            lam, status, farkas = _ldp_gram(sub.gram_matrix(), u0)
            if status == "optimal":
                return sub.combine(lam), lam
            zz = np.einsum("kb,kb->k", sub.Z, sub.Z)[sub.query]
            amax = float(np.sqrt(np.max(np.einsum("ja,ja->j", sub.D, sub.D) * zz)))
            nb = float(np.linalg.norm(sub.combine(farkas))) if status == "infeasible" else 0.0
            if nb > FARKAS_GRAM * amax:  # the exact LDP on μ's support alone (few rows)
                on = np.flatnonzero(farkas > 0)
                exact = _solve_ldp(sub.subset(on), "fro")
                status = "inaccurate" if exact.feasible or exact.farkas is None else status
                if exact.farkas is not None:
                    farkas = np.zeros(S.size)
                    farkas[on] = exact.farkas
                    nb = float(np.linalg.norm(sub.combine(farkas)))
        if status == "inaccurate":  # the exact LDP on the rows (Lawson–Hanson's NNLS)
            if S.size * min(P.d, S.size) * min(P.d2, P.q) > 4 * LDP_MAX_ENTRIES:
                return None  # undecided: its rows would not fit
            sol = _solve_ldp(sub, "fro")
            if sol.feasible:
                return sol.W, sol.duals
            reason, farkas = sol.reason, sol.farkas
        else:
            reason = (
                "Farkas: a convex combination μ of the constraints has "
                f"‖Σ μ_j A_j‖_F = {nb:.2e}, so every feasible W has "
                f"‖W‖_F ≥ {1 / max(nb, 1e-300):.2e}"
            )
        mu = None
        if farkas is not None:
            mu = np.zeros(P.m)
            mu[S] = farkas
        return _infeasible(reason, "ws", "fro", farkas=mu)

    S = np.array(
        [
            int(js[np.argmax(np.einsum("ja,ja->j", P.D[js], P.D[js]))])
            for js in np.split(P._order, P._indptr[1:-1])
            if js.size
        ]
    )
    out = _working_set(P, S, ldp, tol, lambda _, k: max(64, k // 2), max_rounds, loose=False)
    if isinstance(out, tuple):
        return _solution(P, *out, "fro", "ws")
    return out or _infeasible(
        "undecided: the working set did not settle", "ws", "fro", status="inaccurate"
    )


def _solve_wsnewton(
    P: Pairs, tol: float = 1e-11, max_rounds: int = 60, init_per_query: int = 4
) -> PairSolution | None:
    """Frobenius by `_working_set` around the projected Newton–PCG (`_fro_newton`), warm
    started from the previous round's duals, started from each query's `init_per_query`
    constraints that the mean direction W₀ = Σ_j A_j separates least (smallest ⟨A_j, W₀⟩ /
    ‖D_j‖) and growing by max(1024, |S|). For m ≫ d·d2 (sequence problems), where the
    full dual Gram is rank deficient and Newton on all m constraints needs many more CG
    steps. A subproblem the dual Newton does not certify goes to Lawson–Hanson's bounded form
    (K + 11ᵀ), whose Farkas vector on S decides the whole problem infeasible. Returns None when
    a subproblem is undecided (the caller then solves the whole set)."""

    def newton(S, lam0, tight):
        sub = P.subset(S)
        gap = 1e-12 if tight else WS_LOOSE_GAP
        lam, status, _ = _fro_newton(sub, ldp=False, lam0=lam0, gap_tol=gap)
        if status != "optimal":  # the bounded form decides: a Farkas vector of S is one of all
            lam, status, farkas = _fro_newton(sub, ldp=True, gap_tol=gap)
            if status == "infeasible":
                mu = np.zeros(P.m)
                mu[S] = farkas
                return _farkas(P, mu, "wsnewton")
        return (sub.combine(lam), lam) if status == "optimal" else None

    dd = np.einsum("ja,ja->j", P.D, P.D)
    score = P.margins(P.combine(np.ones(P.m))) / np.sqrt(np.maximum(dd, 1e-300))
    S = np.unique(
        np.concatenate(
            [
                js[np.argsort(score[js], kind="stable")[:init_per_query]]
                for js in np.split(P._order, P._indptr[1:-1])
                if js.size
            ]
        )
    )
    out = _working_set(P, S, newton, tol, lambda k, _: max(1024, k), max_rounds, near=WS_NEAR)
    return _solution(P, *out, "fro", "wsnewton") if isinstance(out, tuple) else out


def _farkas(P: Pairs, mu: np.ndarray, solver: str) -> PairSolution:
    """Infeasible, by the Farkas vector μ (m,) ≥ 0, 1ᵀμ = 1, Σ μ_j A_j ≈ 0 (module doc)."""
    nb = float(np.linalg.norm(P.combine(mu)))
    return _infeasible(
        "Farkas: a convex combination μ of the constraints has "
        f"‖Σ μ_j A_j‖_F = {nb:.2e}, so every feasible W has "
        f"‖W‖_F ≥ {1 / max(nb, 1e-300):.2e}",
        solver,
        "fro",
        farkas=mu,
    )


def _solve_fro(P: Pairs, solver: str) -> PairSolution:
    """The Frobenius SVM by `solver` ("ldp", "ws", "wsnewton", "newton"); "auto" chains
    them: `pick_solver`'s method (the LDP where small, the working-set Newton where m ≫ d·d2),
    then Newton on the dual, then on the LDP form (which also decides infeasible data), then
    Clarabel where affordable."""
    choice = pick_solver(P.m, P.d, P.d2, P.q, "fro") if solver == "auto" else solver
    if choice == "ldp":
        return _solve_ldp(P, "fro")
    if choice == "ws":
        with blas.one_thread():  # its Cholesky factors and products are small
            return _solve_ws(P)
    if choice == "wsnewton":
        sol = _solve_wsnewton(P)
        if sol is not None:
            return sol
    for ldp in (False, True):
        lam, status, farkas = _fro_newton(P, ldp=ldp)
        if status == "optimal":
            return _solution(P, P.combine(lam), lam, "fro", "newton")
        if status == "infeasible":
            return _farkas(P, farkas, "newton")
        if solver == "newton":
            break
    if solver == "auto" and P.m <= CLARABEL_MAX_M:
        return _solve_clarabel(P, "fro")
    return _infeasible(
        "undecided: the projected Newton method did not reach a certified gap",
        "newton",
        "fro",
        status="inaccurate",
    )


def _solve_nuc(P: Pairs, solver: str, fro: PairSolution | None = None) -> PairSolution:
    """The nuclear SVM by Burer–Monteiro ALM from the Frobenius solution (which decides
    feasibility), Clarabel where the ALM's gap stays above NUC_GAP and Clarabel is cheap
    (`limits.nuc_fallback`; its cost, not m, decides: at (32, 32, 64) it would take 100 s)."""
    if fro is None:  # "auto"'s method, but Newton before the exact LDP (which costs more
        # and, where Newton does not certify, decides: its Farkas vector is the exact one)
        ldp = pick_solver(P.m, P.d, P.d2, P.q, "fro") == "ldp"
        fro = _solve_fro(P, "newton" if ldp else "auto")
        if ldp and fro.status != "optimal":
            fro = _solve_fro(P, "auto")
    if not fro.feasible:
        return PairSolution(**{**fro.__dict__, "norm": "nuc"})
    with blas.one_thread():  # the ALM's products are small: a second BLAS thread costs time
        W, lam, _ = _nuc_alm(P, fro.W, fro.duals, refine=lambda W, y: _nuc_kkt(P, W, y))
    mu = float(P.margins(W).min())
    if 0 < mu < 1:
        W = W / mu  # feasible exactly; the certificate accounts for it
    sol = _solution(P, W, lam, "nuc", "alm")
    if sol.gap > NUC_GAP and solver == "auto" and nuc_fallback(m=P.m, d=P.d, d2=P.d2, q=P.q):
        ref = _solve_clarabel(P, "nuc")
        if ref.feasible and ref.gap < sol.gap:
            return ref
    if sol.gap > NUC_GAP:
        return PairSolution(**{**sol.__dict__, "status": "optimal_inaccurate"})
    return sol


NUC_GAP = 1e-6  # the nuclear solutions' certified relative gap, at most


def _trivial(P: Pairs, norm: str) -> PairSolution | None:
    """The answer without a solver: W = 0 for no constraints; infeasible for a zero one."""
    if P.m == 0:
        return PairSolution(
            W=np.zeros((P.d, P.d2)),
            duals=np.zeros(0),
            feasible=True,
            status="optimal",
            objective=0.0,
            min_margin=np.inf,
            gap=0.0,
            dual_residual=0.0,
            solver="none",
            norm=norm,
        )
    zero = (np.linalg.norm(P.D, axis=1) == 0) | (np.linalg.norm(P.Z, axis=1) == 0)[P.query]
    if not zero.any():
        return None
    j = int(np.argmax(zero))
    mu = np.zeros(P.m)
    mu[j] = 1.0
    return _infeasible(
        f"constraint {j} is zero (a token equal to the selected one along "
        "its query, or a zero query)",
        "check",
        norm,
        farkas=mu,
    )


def solve_pairs(
    D,
    Z,
    query,
    norm: str = "fro",
    *,
    solver: str = "auto",
    tokens: Tokens | None = None,
    products: str = "auto",
) -> PairSolution:
    """min ‖W‖ (norm "fro" or "nuc") s.t. D_jᵀ W Z[query[j]] ≥ 1, with its certificate.

    Args:
        D: (m, d) key differences x_α − x_s, one row per constraint.
        Z: (q, d2) the distinct queries.
        query: (m,) int, the row of Z of constraint j's query.
        norm: "fro" or "nuc".
        solver: "auto" (by size, `pick_solver`), "CLARABEL" (the reference), "ldp"
            (Frobenius, exact, small sizes), "ws" (Frobenius, the LDP by constraint
            generation: low-rank inputs), "newton" (Frobenius) or "alm" (nuclear).
        tokens: optionally, where the D_j come from (`Tokens`; checked against D), for
            cheaper products; the answer is the same.
        products: where the products run: "auto" (JAX on an accelerator for large
            problems, else numpy; `pairjax.pick`), "numpy" or "jax" (float64 either way).
    Returns a `PairSolution`; infeasible data is a result (feasible=False, with `reason`).
    """
    if norm not in NORMS:
        raise ValueError(f"`norm` must be one of {list(NORMS)}; got {norm!r}")
    if solver not in SOLVERS:
        raise ValueError(f"`solver` must be one of {list(SOLVERS)}; got {solver!r}")
    fro_only = ("ldp", "ws", "wsnewton", "newton")
    if (solver in fro_only and norm != "fro") or (solver == "alm" and norm != "nuc"):
        raise ValueError(f"solver={solver!r} does not solve norm={norm!r}")
    D, Z, query = _check(D, Z, query)
    P = Pairs(D, Z, query, _check_tokens(tokens, D, Z, query), products)
    trivial = _trivial(P, norm)
    if trivial is not None:
        return trivial
    if solver == "CLARABEL":
        return _solve_clarabel(P, norm)
    return _solve_fro(P, solver) if norm == "fro" else _solve_nuc(P, solver)
