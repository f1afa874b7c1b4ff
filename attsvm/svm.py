"""The attention SVMs (docs/theory.md §2), every one a cvxpy problem with a pinned solver.

Att-SVM_α (Frobenius; the W-parameterization's limit) and Att-SVM*_α (nuclear; (K, Q)):

    W^mm_α = argmin ‖W‖   s.t.   (x_{iα_i} − x_it)ᵀ W z_i ≥ 1   ∀ i, ∀ t ≠ α_i,

i.e. ⟨W, (x_{iα_i} − x_it) z_iᵀ⟩_F ≥ 1: one row of A vec(W) ≥ 1 per (sequence, token),
built at once by broadcasting (no loop over tokens). Sequence/causal problems add one block
per (sequence, query) over the tokens the query may attend to.

Solver: Clarabel (interior point) with tight tolerances for both norms, so that margins
are accurate to ~1e-9 and numerical ranks are trustworthy. Both are solved through their
duals, which are much smaller than the primal problems (m = #constraints multipliers λ ≥ 0):

    Frobenius:  max_λ 1ᵀλ − ½ λᵀ(A Aᵀ)λ,  W = Σ_j λ_j A_j                          (a QP in m)
    nuclear:    max_λ 1ᵀλ  s.t. ‖Σ_j λ_j B_j‖₂ ≤ 1, i.e. [[I, B(λ)], [B(λ)ᵀ, I]] ⪰ 0,

with B_j = U_Dᵀ A_j U_Z the constraint matrices in orthonormal bases U_D of their column
spaces (span of the differences x_iα − x_it) and U_Z of their row spaces (span of the
queries). Restricting W to U_D M U_Zᵀ loses nothing: the constraints only see P_D W P_Z,
and projecting does not increase any unitarily invariant norm (docs/theory.md §2.6). W^mm_⋆ is
read off the multiplier of the LMI, M = −2·Y₁₂. At (n, T, d) = (20, 16, 32) this is ~18×
(Frobenius) and ~4× (nuclear) faster than the primal problems, with the same solutions
(≈1e-8 and ≈1e-6 relative, the nuclear solution being only weakly unique).

Other norms (the optimizer → implicit-bias map of arXiv 2410.14581 §3 and the steepest-descent
conjectures for sign/spectral descent; docs/followups.md §5): the same constraints with

    "lp":       ‖W‖_p = (Σ_jk |W_jk|^p)^{1/p}, entrywise ℓp of vec W, 1 ≤ p ≤ 1000
                (ℓp-AttSVM of mirror descent with ψ = ‖W‖_p^p/p, arXiv 2410.14581)
    "max":      ‖W‖_max = max_jk |W_jk| (entrywise ℓ∞; signGD/Adam — a conjecture for attention)
    "spectral": ‖W‖_2 = σ_max(W) (spectral descent/Muon — a conjecture for attention)

solved as primal conic problems min ‖W‖ s.t. A vec(W) ≥ 1 (Clarabel; ℓp through exact power
cones, `pnorm(approx=False)`, not a rational approximation of p). Their multipliers λ are those of
min ‖W‖ itself, so they certify optimality as the nuclear ones do: λ ≥ 0, λ_j (⟨A_j, W⟩ − 1) = 0,
‖Σ_j λ_j A_j‖_dual ≤ 1 and Σ_j λ_j = ‖W‖ (zero gap of the dual max 1ᵀλ s.t.
‖Σ_j λ_j A_j‖_dual ≤ 1), the dual norms being ℓq (1/p + 1/q = 1), entrywise ℓ1 and nuclear.
(The Frobenius multipliers belong to ½‖W‖²: W = Σ_j λ_j A_j and Σ_j λ_j = ‖W‖².) The ℓ∞ and
spectral (and ℓ1) solutions need not be unique: an interior-point solution lies, up to its
tolerance, in the relative interior of the optimal set, so its support tokens are those active
at every optimum — local optimality in these norms is judged with that set. The ℓp solutions,
1 < p < ∞, are unique (accurate to ~√gap ≈ 1e-5 in W; value and certificate to ~1e-10).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from . import pairsvm
from .conic import SOLVER, SOLVER_OPTS, cp
from .conic import dual_nuc_problem as _dual_nuc_problem
from .conic import dual_status as _dual_status
from .problems import Problem, check_alpha, check_choice, check_float, optimal_tokens, token_scores

NORMS = ("fro", "nuc")  # the paper's two (generalized SVM too)
SVM_NORMS = NORMS + ("lp", "max", "spectral")  # solve_att_svm's `norm`
MAX_P = 1e3  # ℓp exponents above this: use "max"
SOLVERS = ("auto", "CLARABEL", "SCS", "pairs")
SUPPORT_TOL = 1e-6  # a constraint with margin ≤ 1 + SUPPORT_TOL is active
MAX_SELECTIONS = 4096  # enumeration limit of `locally_optimal_selections`


@dataclass(frozen=True, eq=False)
class SvmSolution:
    """Result of an attention SVM.

    Attributes:
        W: (d, d) solution, or None when infeasible / failed.
        feasible: True iff the solver found an optimal W.
        status: the solver's status ("optimal", "infeasible", "solver_error: …", …).
        support: (n, T) bool, tokens whose constraint is active (margin ≤ 1 + tol).
        margins: (n, T) (x_{iα_i} − x_it)ᵀ W z_i (0 at α_i, NaN where masked); None if infeasible.
        duals: (n, T) Lagrange multipliers λ_it of the margin constraints as the solver
            returns them (≥ 0 up to its tolerance), or None.
        alpha: the selection solved for. norm: one of `SVM_NORMS`. objective: ‖W‖ in that norm.
        p: the exponent of norm="lp", else None.
        solver: the method that solved it ("CLARABEL", "SCS", or `attsvm.pairsvm`'s
            "ldp", "newton", "alm").
        min_margin: the smallest constraint margin of W (≥ 1 up to rounding).
        gap: relative duality gap of (W, duals) (`attsvm.pairsvm.certify`; Frobenius and
            nuclear only, else None).
        dual_residual: Frobenius ‖W − Σ λ_j A_j‖_F/‖W‖_F, nuclear max(0, ‖Σ λ_j A_j‖₂ − 1).
    """

    W: np.ndarray | None
    feasible: bool
    status: str
    support: np.ndarray
    margins: np.ndarray | None
    duals: np.ndarray | None
    alpha: np.ndarray
    norm: str
    objective: float | None
    solver: str = SOLVER
    p: float | None = None
    min_margin: float | None = None
    gap: float | None = None
    dual_residual: float | None = None

    @property
    def margin(self) -> float | None:
        """The SVM margin 1/‖W‖ (in the solution's norm)."""
        return None if not self.feasible or not self.objective else 1.0 / self.objective


def constraint_rows(prob: Problem, alpha) -> tuple[np.ndarray, np.ndarray]:
    """A: (m, d·d) rows vec((x_{iα} − x_it) z_iᵀ) (row-major vec), and their (i, k, t) index.

    One row per attendable token t ≠ α of every (sequence i, query k).
    """
    Q, _, mask = prob.query_view()  # (n, K, d), (K, T)
    A = np.asarray(alpha).reshape(prob.n, -1)  # (n, K)
    Xsel = np.take_along_axis(prob.X, A[:, :, None], axis=1)  # (n, K, d)
    D = Xsel[:, :, None, :] - prob.X[:, None, :, :]  # (n, K, T, d)
    rows = np.einsum("nktd,nke->nktde", D, Q).reshape(*D.shape[:3], -1)
    valid = prob.token_mask() & (np.arange(prob.T)[None, None, :] != A[:, :, None])
    idx = np.argwhere(valid)
    return rows[valid], idx


def problem_pairs(prob: Problem, alpha):
    """Att-SVM_α's constraints as pairs (`attsvm.pairsvm`): D (m, d) rows x_{iα} − x_it,
    Z (n·K, d) the queries, query (m,) the row of Z of each, and idx (m, 3) their (i, k, t),
    in `constraint_rows`' order (⟨A_j, W⟩ = D_jᵀ W Z[query_j])."""
    Q, _, _ = prob.query_view()  # (n, K, d)
    A = np.asarray(alpha).reshape(prob.n, -1)  # (n, K)
    valid = prob.token_mask() & (np.arange(prob.T)[None, None, :] != A[:, :, None])
    idx = np.argwhere(valid)
    i, k, t = idx.T
    D = prob.X[i, A[i, k]] - prob.X[i, t]
    return D, Q.reshape(-1, prob.d), i * Q.shape[1] + k, idx


def problem_tokens(prob: Problem, alpha, idx) -> pairsvm.Tokens:
    """The token form (`attsvm.pairsvm.Tokens`) of `problem_pairs`' constraints at `idx`."""
    A = np.asarray(alpha).reshape(prob.n, -1)  # (n, K)
    return pairsvm.Tokens(
        prob.X, A, np.ravel_multi_index(tuple(idx.T), (prob.n, *A.shape[1:], prob.T))
    )


def _unflatten(prob: Problem, idx, values, fill):
    K = 1 if prob.queries == "single" else prob.T
    dtype = np.asarray(values).dtype if fill is not np.nan else float
    out = np.full((prob.n, K, prob.T), fill, dtype=dtype)
    out[idx[:, 0], idx[:, 1], idx[:, 2]] = values
    return out[:, 0, :] if prob.queries == "single" else out


def margins_and_support(prob: Problem, rows, idx, W, alpha, *, support_tol: float = SUPPORT_TOL):
    """Token margins (x_{iα_i} − x_it)ᵀ W z_i and support tokens of a solution W.

    rows, idx: `constraint_rows(prob, alpha)`. Returns margins (n, T) ((n, T, T) in sequence
    modes; 0 at α_i, NaN where masked) and support (same shape, bool): margin ≤ 1 +
    support_tol, never the selected token.
    """
    return margins_support_from(
        prob, idx, rows @ np.asarray(W).reshape(-1), alpha, support_tol=support_tol
    )


def margins_support_from(prob: Problem, idx, marg, alpha, *, support_tol: float = SUPPORT_TOL):
    """`margins_and_support` from the constraint margins `marg` (m,) at `idx`."""
    margins = _unflatten(prob, idx, marg, np.nan)
    sel = np.asarray(alpha).reshape(prob.n, -1)
    M = margins if margins.ndim == 3 else margins[:, None, :]
    np.put_along_axis(M, sel[:, :, None], 0.0, axis=-1)
    support = np.nan_to_num(margins, nan=np.inf) <= 1.0 + support_tol
    support &= ~np.isnan(margins)
    if margins.ndim == 2:
        support[np.arange(prob.n), np.asarray(alpha)] = False
    else:
        support[np.arange(prob.n)[:, None], np.arange(prob.T)[None, :], sel] = False
    return margins, support


_COMPILED_LOCK = threading.Lock()


@lru_cache(maxsize=64)
def _compiled(m: int, d: int, norm: str):
    """One parameterized problem per (rows, d, norm): min ‖W‖ s.t. A vec(W) ≥ 1."""
    A = cp.Parameter((m, d * d), name="A")
    w = cp.Variable(d * d, name="w")
    cons = [A @ w >= 1]
    if norm == "fro":
        obj = cp.Minimize(0.5 * cp.sum_squares(w))
    else:
        obj = cp.Minimize(cp.normNuc(cp.reshape(w, (d, d), order="C")))
    return cp.Problem(obj, cons), A, w, cons[0]


def _span(M: np.ndarray, rtol: float = 1e-12) -> np.ndarray:
    """Orthonormal basis (d, r) of the column space of M (d, k)."""
    U, sv, _ = np.linalg.svd(M, full_matrices=False)
    return U[:, : max(1, int(np.sum(sv > rtol * sv[0])))]


def _solve_dual_fro(rows: np.ndarray, d: int):
    G = rows @ rows.T  # (m, m) Gram matrix ⟨A_j, A_k⟩
    lam = cp.Variable(rows.shape[0], name="lambda")
    prob = cp.Problem(
        cp.Minimize(0.5 * cp.quad_form(lam, cp.psd_wrap(G)) - cp.sum(lam)), [lam >= 0]
    )
    prob.solve(solver=SOLVER, **SOLVER_OPTS)
    status = _dual_status(prob.status)
    if status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) or lam.value is None:
        return status, None, None
    duals = np.asarray(lam.value)
    return status, (rows.T @ duals).reshape(d, d), duals


DPP_MAX_ENTRIES = 4096  # nuclear duals with at most this many constraint-matrix entries are cached


@lru_cache(maxsize=32)
def _compiled_dual_nuc(m: int, rD: int, rZ: int):
    """The nuclear dual of a small shape with its constraint matrices as a Parameter: cvxpy
    canonicalizes it once (DPP) and later solves only substitute the data — the same conic
    problem (bit-identical solutions on the instances compared), in a third of the time at
    (n, T, d) = (5, 5, 3). A cached problem keeps about 0.6 KB per entry of B, hence the size
    cap `DPP_MAX_ENTRIES` (≤ 2.5 MB each; larger problems spend their time in the solver)."""
    B = cp.Parameter((rD * rZ, m), name="B")
    return (B, *_dual_nuc_problem(B, m, rD, rZ))


def _solve_dual_nuc(rows: np.ndarray, d: int):
    R = rows.reshape(-1, d, d)  # (m, d, d) matrices A_j
    UD = _span(R.transpose(1, 0, 2).reshape(d, -1))  # (d, rD) column spaces
    UZ = _span(R.transpose(2, 0, 1).reshape(d, -1))  # (d, rZ) row spaces
    rD, rZ, m = UD.shape[1], UZ.shape[1], rows.shape[0]
    Bv = np.einsum("da,mde,eb->abm", UD, R, UZ).reshape(rD * rZ, -1)  # columns vec(B_j)

    def solve(prob, lam, lmi):
        prob.solve(solver=SOLVER, **SOLVER_OPTS)
        status = _dual_status(prob.status)
        if (
            status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
            or lam.value is None
            or lmi.dual_value is None
        ):
            return status, None, None
        M = -2.0 * np.asarray(lmi.dual_value)[:rD, rD:]  # the primal variable in (U_D, U_Z)
        return status, UD @ M @ UZ.T, np.asarray(lam.value)

    if Bv.size > DPP_MAX_ENTRIES:
        return solve(*_dual_nuc_problem(Bv, m, rD, rZ))
    # shared by every caller of this shape: hold it while it is set, solved and read
    with _COMPILED_LOCK:
        B, *compiled = _compiled_dual_nuc(m, rD, rZ)
        B.value = Bv
        return solve(*compiled)


def _solve_rows(rows: np.ndarray, d: int, norm: str, solver: str = SOLVER):
    """Solve min ‖W‖ s.t. rows @ vec(W) ≥ 1; returns (status, W or None, duals or None).

    Clarabel solves the duals (module doc). `solver` other than Clarabel runs the primal
    problem at that solver's default settings (used only to reproduce the authors'
    SCS-based numbers)."""
    try:
        if solver == SOLVER:
            return (_solve_dual_fro if norm == "fro" else _solve_dual_nuc)(rows, d)
        # The compiled problem is shared by every caller of this shape: hold it while its
        # parameter is set, solved and read (threads of a server would otherwise swap
        # answers between problems).
        with _COMPILED_LOCK:
            prob, A, w, con = _compiled(rows.shape[0], d, norm)
            A.value = rows
            prob.solve(solver=solver)
            status = prob.status
            if status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) and w.value is not None:
                return status, np.asarray(w.value).reshape(d, d), np.asarray(con.dual_value)
            return status, None, None
    except cp.error.SolverError as exc:
        return f"solver_error: {exc}".splitlines()[0][:200], None, None


def check_norm(norm, p=None):
    """Validate (norm, p) of an SVM; returns p as a float (norm="lp") or None."""
    check_choice("norm", norm, SVM_NORMS)
    if norm != "lp":
        if p is not None:
            raise ValueError(f"`p` must be None unless norm='lp'; got p={p!r} with norm={norm!r}")
        return None
    if p is None:
        raise ValueError("`p` must be given for norm='lp' (a number in [1, 1000]); got None")
    return check_float("p", p, 1.0, MAX_P)


def matrix_norm(W, norm: str, p: float | None = None) -> float:
    """‖W‖ in one of `SVM_NORMS` ("lp": entrywise, computed scaled so it cannot overflow)."""
    p = check_norm(norm, p)
    W = np.asarray(W, dtype=np.float64)
    if norm == "fro":
        return float(np.linalg.norm(W))
    if norm == "nuc":
        return float(np.linalg.svd(W, compute_uv=False).sum())
    if norm == "spectral":
        return float(np.linalg.svd(W, compute_uv=False).max())
    a = np.abs(W).ravel()
    top = float(a.max()) if a.size else 0.0
    if norm == "max" or top == 0.0:
        return top
    return top * float(np.sum((a / top) ** p) ** (1.0 / p))


def _solve_primal_norm(rows: np.ndarray, d: int, norm: str, p, solver: str):
    """min ‖W‖ s.t. rows @ vec(W) ≥ 1 for norm in ("lp", "max", "spectral"), solved as written
    (multipliers of min ‖W‖, not of a square)."""
    w = cp.Variable(d * d, name="w")
    if norm == "lp":
        obj = cp.pnorm(w, p, approx=False)  # power cones: the exact p, no rounding
    elif norm == "max":
        obj = cp.norm_inf(w)
    else:
        obj = cp.sigma_max(cp.reshape(w, (d, d), order="C"))
    con = rows @ w >= 1
    prob = cp.Problem(cp.Minimize(obj), [con])
    try:
        if solver == SOLVER:
            prob.solve(solver=SOLVER, **SOLVER_OPTS)
        else:
            prob.solve(solver=solver)
    except cp.error.SolverError as exc:
        return f"solver_error: {exc}".splitlines()[0][:200], None, None
    if (
        prob.status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)
        and w.value is not None
        and con.dual_value is not None
    ):
        return prob.status, np.asarray(w.value).reshape(d, d), np.asarray(con.dual_value)
    return prob.status, None, None


def _solve_by_pairs(prob, alpha, norm, p, support_tol, pairs, infeasible) -> SvmSolution:
    """`solve_att_svm` by the certified solvers of `attsvm.pairsvm` (norm "fro" or "nuc")."""
    D, Z, query, idx = pairs
    if norm not in NORMS:
        raise ValueError(f"solver='pairs' solves norm 'fro' or 'nuc'; got {norm!r}")
    tokens = problem_tokens(prob, alpha, idx)
    sol = pairsvm.solve_pairs(D, Z, query, norm, tokens=tokens)
    if not sol.feasible:
        return infeasible(sol.status + (f" ({sol.reason})" if sol.reason else ""))
    marg = pairsvm.Pairs(D, Z, query, tokens).margins(sol.W)
    margins, support = margins_support_from(prob, idx, marg, alpha, support_tol=support_tol)
    return SvmSolution(
        W=sol.W,
        feasible=True,
        status=sol.status,
        support=support,
        margins=margins,
        duals=_unflatten(prob, idx, sol.duals, np.nan),
        alpha=alpha,
        norm=norm,
        objective=sol.objective,
        p=p,
        solver=sol.solver,
        min_margin=sol.min_margin,
        gap=sol.gap,
        dual_residual=sol.dual_residual,
    )


def solve_att_svm(
    prob: Problem,
    alpha=None,
    norm: str = "fro",
    *,
    support_tol: float = SUPPORT_TOL,
    solver: str = "auto",
    p: float | None = None,
) -> SvmSolution:
    """Solve Att-SVM_α (norm="fro") or Att-SVM*_α (norm="nuc").

    Args:
        prob: the problem.
        alpha: (n,) selection ((n, T) in sequence modes); None means α = opt.
        norm: "fro" (W-parameterization) or "nuc" ((K, Q)-parameterization; with m < d the
            paper adds rank(W) ≤ m, which is not convex: compare the solution's rank with m);
            "lp" (entrywise ℓp, needs `p`), "max" (entrywise ℓ∞) or "spectral" (σ_max).
        support_tol: a token is a support token when its margin is ≤ 1 + support_tol.
        solver: "auto" (default: Clarabel where it is fast, priced by `limits.clarabel_work`
            up to `limits.CLARABEL_MAX_WORK[norm]` (`limits.svm_route`), else the certified
            large-scale solvers of `attsvm.pairsvm` for "fro" and "nuc"), "CLARABEL" (the
            reference, tight tolerances), "pairs" (`attsvm.pairsvm` at any size; "fro" and
            "nuc") or "SCS" at its default accuracy (~1e-5; only to reproduce the authors'
            published numbers, docs/theory.md §7).
        p: the exponent of norm="lp", 1 ≤ p ≤ `MAX_P` (p = 2 is "fro"); None otherwise.

    It is long because this docstring documents every norm and solver it dispatches to.

    Infeasible data is a result (feasible=False with the solver's status), not an error.
    Frobenius and nuclear solutions carry their certificate (min_margin, gap,
    dual_residual; `attsvm.pairsvm`).
    """
    from .limits import svm_route

    if not isinstance(prob, Problem):
        raise ValueError(f"`prob` must be an attsvm.Problem; got {type(prob).__name__}")
    p = check_norm(norm, p)
    support_tol = check_float("support_tol", support_tol, 0.0, 1.0)
    check_choice("solver", solver, SOLVERS)
    alpha = optimal_tokens(prob) if alpha is None else check_alpha(prob, alpha)
    shape = (prob.n, prob.T) if prob.queries == "single" else (prob.n, prob.T, prob.T)
    D, Z, query, idx = problem_pairs(prob, alpha)

    def infeasible(status):
        return SvmSolution(
            W=None,
            feasible=False,
            status=status,
            support=np.zeros(shape, bool),
            margins=None,
            duals=None,
            alpha=alpha,
            norm=norm,
            objective=None,
            p=p,
            solver="check" if solver == "auto" else solver,
        )

    if D.shape[0] == 0:  # T = 1 (or nothing to separate): W = 0 is optimal
        return _nothing_to_separate(prob, alpha, norm, p, shape, idx)
    # Any token identical to the selected one (after the query) makes a zero row: infeasible.
    if np.any(np.all(D == 0, axis=1)):
        return infeasible("infeasible (a token equals the selected one along its query)")
    if solver == "auto":  # `svm_route` sends only "fro" and "nuc" past Clarabel
        route = svm_route(n=prob.n, T=prob.T, d=prob.d, norm=norm, queries=prob.queries)
        solver = "pairs" if route == "pairs" else SOLVER
    if solver == "pairs":
        return _solve_by_pairs(prob, alpha, norm, p, support_tol, (D, Z, query, idx), infeasible)
    return _solve_by_rows(prob, alpha, norm, p, solver, support_tol, (D, Z, query), infeasible)


def _nothing_to_separate(prob: Problem, alpha, norm: str, p, shape, idx) -> SvmSolution:
    """No constraint (T = 1): W = 0 is optimal, with a trivially exact certificate."""
    return SvmSolution(
        W=np.zeros((prob.d, prob.d)),
        feasible=True,
        status="optimal",
        support=np.zeros(shape, bool),
        margins=_unflatten(prob, idx, np.zeros(0), np.nan),
        duals=None,
        alpha=alpha,
        norm=norm,
        objective=0.0,
        p=p,
        min_margin=np.inf,
        gap=0.0,
        dual_residual=0.0,
    )


def _solve_by_rows(
    prob: Problem, alpha, norm: str, p, solver: str, support_tol: float, pairs, infeasible
) -> SvmSolution:
    """The (m, d²) constraint rows handed to cvxpy (Clarabel or SCS); Frobenius and nuclear
    solutions certified by `pairsvm.certify` on the same pairs (D, Z, query)."""
    D, Z, query = pairs
    rows, idx = constraint_rows(prob, alpha)
    if norm in NORMS:
        status, W, duals = _solve_rows(rows, prob.d, norm, solver)
    else:
        status, W, duals = _solve_primal_norm(rows, prob.d, norm, p, solver)
    if W is None:
        return infeasible(status)
    margins, support = margins_and_support(prob, rows, idx, W, alpha, support_tol=support_tol)
    obj = matrix_norm(W, norm, p)
    cert = (None, None, None)
    if norm in NORMS:
        cert = pairsvm.certify(pairsvm.Pairs(D, Z, query), W, duals, norm)[1:]
    return SvmSolution(
        W=W,
        feasible=True,
        status=status,
        support=support,
        margins=margins,
        duals=_unflatten(prob, idx, duals, np.nan),
        alpha=alpha,
        norm=norm,
        objective=float(obj),
        p=p,
        solver=solver,
        min_margin=cert[0],
        gap=cert[1],
        dual_residual=cert[2],
    )


def is_locally_optimal(
    prob: Problem,
    alpha,
    *,
    norm: str = "fro",
    solution: SvmSolution | None = None,
    p: float | None = None,
) -> bool:
    """α is locally optimal: Att-SVM_α is feasible and every support token t of sequence i
    scores below the selected one, γ_{iα_i} > γ_it (docs/theory.md §2.4) — the support set
    being that of the SVM in `norm` (with `p` for "lp"), or of `solution` when given."""
    alpha = check_alpha(prob, alpha)
    sol = solution if solution is not None else solve_att_svm(prob, alpha, norm, p=p)
    if not sol.feasible:
        return False
    return supports_score_lower(token_scores(prob), alpha, sol.support)


def supports_score_lower(scores: np.ndarray, alpha, support: np.ndarray) -> bool:
    """The local-optimality test of a feasible α (arXiv 2308.16898, Definition 2): every
    support token t of sequence i scores below the selected one, γ_{iα_i} > γ_it.

    scores: (n, T) γ (or (n, K, T)); alpha: (n,) (or (n, K)); support: same shape as scores.
    """
    alpha = np.asarray(alpha)
    sel = np.take_along_axis(scores, alpha[..., None], axis=-1)
    return bool(np.all(~support | (scores < sel)))


def classify_selection(
    prob: Problem,
    alpha,
    *,
    norm: str = "fro",
    solution: SvmSolution | None = None,
    p: float | None = None,
) -> str:
    """ "global" (α = opt, feasible), "local" (locally optimal), "feasible" (SVM feasible but
    not locally optimal) or "infeasible" — judged with the SVM in `norm` (`p` for "lp").
    `solution`: Att-SVM_α if already solved."""
    alpha = check_alpha(prob, alpha)
    sol = solution if solution is not None else solve_att_svm(prob, alpha, norm, p=p)
    if not sol.feasible:
        return "infeasible"
    if not is_locally_optimal(prob, alpha, solution=sol):
        return "feasible"
    try:
        opt = optimal_tokens(prob)
    except ValueError:
        return "local"
    return "global" if np.array_equal(opt, alpha) else "local"


def locally_optimal_selections(
    prob: Problem,
    *,
    norm: str = "fro",
    max_selections: int = MAX_SELECTIONS,
    p: float | None = None,
) -> list[dict]:
    """Every selection α (T^n of them; single-query problems) with its SVM status.

    Returns a list of dicts: alpha (tuple), status ("global" / "local" / "feasible" /
    "infeasible"), objective (‖W^mm_α‖ or None), solver_status. Support tokens (hence
    "local") are those of the SVM in `norm` (`p` for "lp").
    """
    p = check_norm(norm, p)
    if prob.queries != "single":
        raise ValueError(
            "`prob` must be a single-query problem to enumerate selections; "
            f"got queries={prob.queries!r}"
        )
    total = prob.T**prob.n
    if total > max_selections:
        raise ValueError(
            f"`prob` must have T**n ≤ {max_selections} selections to enumerate; "
            f"got {prob.T}**{prob.n} = {total}"
        )
    g = token_scores(prob)
    try:
        opt = tuple(int(a) for a in optimal_tokens(prob))
    except ValueError:
        opt = None
    out = []
    for a in itertools.product(range(prob.T), repeat=prob.n):
        alpha = np.array(a)
        sol = solve_att_svm(prob, alpha, norm, p=p)
        if not sol.feasible:
            status = "infeasible"
        else:
            local = supports_score_lower(g, alpha, sol.support)
            status = ("global" if a == opt else "local") if local else "feasible"
        out.append(dict(alpha=a, status=status, objective=sol.objective, solver_status=sol.status))
    return out


# -- generalized SVM for nonlinear heads (docs/theory.md §2.8) -------------------------------------
@dataclass(frozen=True, eq=False)
class GeneralizedSvm:
    """W^dir, W^fin and the prediction W^fin + R·W^dir fitted to a GD solution.

    Attributes:
        selected: (n, T) bool, O_i = {t : s_it > threshold} at the given W.
        W_dir: (d, d) separates O_i from the rest with margin 1, equal logits inside O_i.
        W_fin: (d, d) min-norm W reproducing the logit differences inside O_i.
        R: least-squares scale, argmin_R ‖W^fin + R W^dir − W‖_F.
        W_pred: W^fin + R·W^dir.  feasible / status: of the W^dir problem.
    """

    selected: np.ndarray
    W_dir: np.ndarray | None
    W_fin: np.ndarray | None
    R: float | None
    W_pred: np.ndarray | None
    feasible: bool
    status: str
    norm: str


def _pair_rows(prob: Problem, a_idx, b_idx, i_idx):
    """Rows vec((x_ia − x_ib) z_iᵀ) for index arrays (single-query problems)."""
    Q = prob.query_view()[0][:, 0, :]
    D = prob.X[i_idx, a_idx] - prob.X[i_idx, b_idx]
    return np.einsum("rd,re->rde", D, Q[i_idx]).reshape(len(i_idx), prob.d * prob.d)


def generalized_constraints(prob: Problem, selected: np.ndarray):
    """The generalized SVM's constraint rows for selected sets O_i (single-query problems).

    selected: (n, T) bool, O_i. Returns (first, ei, et, E, G): first (n,) a reference token
    of each O_i; E rows vec((x_i,first − x_it) z_iᵀ) for t ∈ O_i \\ {first} at (ei, et) (the
    equalities); G rows vec((x_it − x_iτ) z_iᵀ) for t ∈ O_i, τ ∉ O_i (the inequalities).
    """
    first = np.argmax(selected, axis=1)
    ei, et = np.nonzero(selected & (np.arange(prob.T)[None] != first[:, None]))
    E = _pair_rows(prob, first[ei], et, ei)
    ii, tt, uu = np.nonzero(selected[:, :, None] & ~selected[:, None, :])
    G = _pair_rows(prob, tt, uu, ii)
    return first, ei, et, E, G


def single_logits(prob: Problem, W) -> np.ndarray:
    """a_it = x_itᵀ W z_i: (n, T) (single-query problems)."""
    return np.einsum("ntd,de,ne->nt", prob.X, W, prob.query_view()[0][:, 0, :])


def least_norm_fin(E, a, first, ei, et, d: int) -> np.ndarray:
    """W^fin (Frobenius): the least-norm W with GD's logit differences inside each O_i,
    (x_it − x_i,first)ᵀ W z_i = a_it − a_i,first."""
    if len(E) == 0:
        return np.zeros((d, d))
    return np.linalg.lstsq(-E, a[ei, et] - a[ei, first[ei]], rcond=None)[0].reshape(d, d)


def fit_direction(W, W_fin, W_dir) -> tuple[float, np.ndarray]:
    """R = argmin_R ‖W^fin + R W^dir − W‖_F = ⟨W − W^fin, W^dir⟩ / ‖W^dir‖², and the
    prediction W^fin + R·W^dir."""
    nd = float(np.sum(W_dir * W_dir))
    R = float(np.sum((W - W_fin) * W_dir) / nd) if nd > 0 else 0.0
    return R, W_fin + R * W_dir


def solve_generalized_svm(
    prob: Problem, W, *, threshold: float = 1e-3, norm: str = "fro"
) -> GeneralizedSvm:
    """The generalized SVM of a (nonlinear-head) GD solution W (single-query problems).

    W^dir = argmin ‖W‖ s.t. (x_it − x_iτ)ᵀ W z_i = 0 (t, τ ∈ O_i), ≥ 1 (t ∈ O_i, τ ∉ O_i);
    W^fin = argmin ‖W‖ s.t. (x_iτ − x_it)ᵀ W z_i = a_iτ − a_it (t, τ ∈ O_i), a = logits of W
    (= log(s_iτ / s_it), computed from the logits, which is exact where the ratio is not).
    """
    if prob.queries != "single":
        raise ValueError(f"`prob` must be a single-query problem; got queries={prob.queries!r}")
    check_choice("norm", norm, NORMS)
    threshold = check_float("threshold", threshold, 0.0, 1.0, lo_open=True)
    W = np.asarray(W, dtype=np.float64)
    if W.shape != (prob.d, prob.d) or not np.all(np.isfinite(W)):
        raise ValueError(f"`W` must be a finite ({prob.d}, {prob.d}) array; got shape {W.shape}")
    a = single_logits(prob, W)
    s = np.exp(a - a.max(1, keepdims=True))
    s /= s.sum(1, keepdims=True)
    sel = s > threshold
    first, ei, et, E, G = generalized_constraints(prob, sel)
    d = prob.d
    w = cp.Variable(d * d)
    Wv = cp.reshape(w, (d, d), order="C")
    nrm = cp.sum_squares(w) if norm == "fro" else cp.normNuc(Wv)
    cons = ([E @ w == 0] if len(E) else []) + ([G @ w >= 1] if len(G) else [])
    pdir = cp.Problem(cp.Minimize(nrm), cons)
    try:
        pdir.solve(solver=SOLVER, **SOLVER_OPTS)
        status = pdir.status
    except cp.error.SolverError as exc:
        status = f"solver_error: {exc}".splitlines()[0][:200]
    ok = status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE) and w.value is not None
    W_dir = np.asarray(w.value).reshape(d, d) if ok else None
    W_fin = _finite_part(E, a, first, ei, et, d, norm)
    if not ok or W_fin is None:
        return GeneralizedSvm(
            selected=sel,
            W_dir=W_dir,
            W_fin=W_fin,
            R=None,
            W_pred=None,
            feasible=False,
            status=status,
            norm=norm,
        )
    R, W_pred = fit_direction(W, W_fin, W_dir)
    return GeneralizedSvm(
        selected=sel,
        W_dir=W_dir,
        W_fin=W_fin,
        R=R,
        W_pred=W_pred,
        feasible=True,
        status=status,
        norm=norm,
    )


def _finite_part(E, a, first, ei, et, d: int, norm: str) -> np.ndarray | None:
    """W^fin of `solve_generalized_svm`: the least-norm W whose logit gaps inside the
    selected sets equal GD's (least squares for "fro", a conic program for "nuc")."""
    if len(E) == 0 or norm == "fro":
        return least_norm_fin(E, a, first, ei, et, d)
    else:  # equality-constrained least nuclear norm
        wf = cp.Variable(d * d)
        pf = cp.Problem(
            cp.Minimize(cp.normNuc(cp.reshape(wf, (d, d), order="C"))),
            [-E @ wf == a[ei, et] - a[ei, first[ei]]],
        )
        pf.solve(solver=SOLVER, **SOLVER_OPTS)
        return np.asarray(wf.value).reshape(d, d) if wf.value is not None else None
