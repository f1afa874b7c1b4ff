"""The Graph-SVM (arXiv 2403.08081, "Graph-SVM"; the authors' `W_svm_solver_cvxpy`): the max-margin
direction that enforces the priority order between SCCs and equal priority inside them.

    W^svm = argmin ‖W‖_F  s.t. for every sequence i (k = its last token), every winner
            y ∈ Y_i (the label; the selected set C_i for the local variant) and every other
            token j of X_i:
                (e_y − e_j)ᵀ W e_k  = 0    if y, j are in one SCC of G^(k)
                (e_y − e_j)ᵀ W e_k ≥ 1     otherwise.

Each constraint is a row ⟨(e_y − e_j) e_kᵀ, W⟩_F; duplicates are dropped. Solved as the QP
min ½‖w‖² with Clarabel at tight tolerances (the authors used SCS at its default ≈1e-5
accuracy; `solver="SCS"` reproduces that). KKT, with multipliers λ ≥ 0 (margins) and ν
(equalities): W = Σ λ_r A_r + Σ ν_q B_q, λ_r (⟨A_r, W⟩ − 1) = 0 — see `kkt_residuals`.

Feasibility: with linearly independent embeddings (K ≤ d) the data Graph-SVM is always
feasible (the SCC DAG can be ordered); with K > d, or for a local graph whose selected set
spans two local SCCs, it can be infeasible — a result (`feasible=False`), not an error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..problems import check_choice
from ..svm import SOLVER_OPTS, cp
from .graph import PriorityGraphs, priority_graphs
from .problem import NTPProblem

SOLVERS = ("CLARABEL", "SCS")


@dataclass(frozen=True, eq=False)
class GraphSvm:
    """Result of a Graph-SVM.

    Attributes:
        W: (d, d) solution, or None unless feasible.
        feasible: the solver found an optimal W.
        status: the solver's status, with a reason when infeasible.
        A_ineq: (m, d·d) margin rows vec((e_y − e_j) e_kᵀ) (row-major vec); keys_ineq (m, 3)
            their (y, j, k). A_eq, keys_eq: the equality rows.
        lam: (m,) multipliers of the margins, nu: multipliers of the equalities (or None).
        objective: ‖W‖_F (None unless feasible).
    """

    W: np.ndarray | None
    feasible: bool
    status: str
    A_ineq: np.ndarray
    keys_ineq: np.ndarray
    A_eq: np.ndarray
    keys_eq: np.ndarray
    lam: np.ndarray | None
    nu: np.ndarray | None
    objective: float | None
    solver: str = "CLARABEL"

    @property
    def margins(self) -> np.ndarray | None:
        """(m,) ⟨A_r, W⟩ of the margin rows (≥ 1 when feasible)."""
        return None if self.W is None else self.A_ineq @ self.W.ravel()

    @property
    def support(self) -> np.ndarray | None:
        """(m, 3) (y, j, k) of the active margin rows (margin ≤ 1 + 1e-6)."""
        return None if self.W is None else self.keys_ineq[self.margins <= 1 + 1e-6]


def constraint_rows(prob: NTPProblem, graphs: PriorityGraphs):
    """Margin and equality rows of the Graph-SVM for `graphs` (data or local TPGs).

    A winner absent from its sequence adds no rows, as it adds no edges to the graph. (The
    authors' `W_svm_solver_cvxpy` skips it in the graph but still adds its rows; their
    generator never produces one, so their numbers are unaffected.)"""
    E, scc = prob.E, graphs.scc
    ineq, eq = {}, {}
    for i in range(prob.n):
        k = int(prob.last[i])
        seq = prob.tokens[i].tolist()
        for y in graphs.winners[i]:
            if y not in seq:
                continue
            for j in seq:
                if j == y:
                    continue
                if scc[k, y] == scc[k, j]:
                    eq.setdefault((min(y, j), max(y, j), k), None)
                else:
                    ineq.setdefault((y, j, k), None)

    def rows(keys):
        if not keys:
            return np.zeros((0, prob.d * prob.d)), np.zeros((0, 3), np.int64)
        K3 = np.array(list(keys), np.int64)
        R = np.einsum("ma,mb->mab", E[K3[:, 0]] - E[K3[:, 1]], E[K3[:, 2]])
        return R.reshape(len(K3), -1), K3

    Ai, ki = rows(ineq)
    Ae, ke = rows(eq)
    return Ai, ki, Ae, ke


def _infeasible_reason(prob: NTPProblem) -> str:
    if np.linalg.matrix_rank(prob.E) < prob.K:
        return (
            f"the K = {prob.K} embeddings are linearly dependent"
            + (f" (K > d = {prob.d})" if prob.K > prob.d else "")
            + ", so some priority orders cannot all be enforced"
        )
    return "the priority orders contradict each other (e.g. a selected set spanning two SCCs)"


def _solve_qp(Ai, Ae, d: int, solver: str):
    """min ½‖w‖² s.t. Ai w ≥ 1, Ae w = 0 over w ∈ R^{d²}: (status, the variable, the
    constraints); a solver error is a status."""
    w = cp.Variable(d * d)
    cons = [Ai @ w >= 1]
    if len(Ae):
        cons.append(Ae @ w == 0)
    problem = cp.Problem(cp.Minimize(0.5 * cp.sum_squares(w)), cons)
    try:
        if solver == "CLARABEL":
            problem.solve(solver=cp.CLARABEL, **SOLVER_OPTS)
        else:
            problem.solve(solver=cp.SCS)
        status = problem.status
    except cp.error.SolverError as exc:
        status = f"solver_error: {exc}".splitlines()[0][:200]
    return status, w, cons


def solve_graph_svm(
    prob: NTPProblem, graphs: PriorityGraphs | None = None, *, solver: str = "CLARABEL"
) -> GraphSvm:
    """Solve the Graph-SVM of the data TPGs (or of `graphs`, e.g. `local_graphs(...)`).

    Args:
        prob: the data.
        graphs: the TPGs whose SCCs and winners define the constraints (default: the data's).
        solver: "CLARABEL" (tolerances 1e-10) or "SCS" (default accuracy, the authors').
    """
    if not isinstance(prob, NTPProblem):
        raise ValueError(f"`prob` must be an attsvm.ntp.NTPProblem; got {type(prob).__name__}")
    check_choice("solver", solver, SOLVERS)
    graphs = priority_graphs(prob) if graphs is None else graphs
    Ai, ki, Ae, ke = constraint_rows(prob, graphs)
    d = prob.d
    base = dict(A_ineq=Ai, keys_ineq=ki, A_eq=Ae, keys_eq=ke, solver=solver)
    if len(Ai) == 0:  # nothing to separate: W = 0 is optimal
        return GraphSvm(
            W=np.zeros((d, d)),
            feasible=True,
            status="optimal",
            lam=np.zeros(0),
            nu=np.zeros(len(Ae)),
            objective=0.0,
            **base,
        )
    if np.any(np.all(Ai == 0, axis=1)):
        return GraphSvm(
            W=None,
            feasible=False,
            status="infeasible (a margin row is zero: " + _infeasible_reason(prob) + ")",
            lam=None,
            nu=None,
            objective=None,
            **base,
        )
    status, w, cons = _solve_qp(Ai, Ae, d, solver)
    if status != cp.OPTIMAL or w.value is None:
        if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
            status = f"{status} ({_infeasible_reason(prob)})"
        return GraphSvm(
            W=None, feasible=False, status=status, lam=None, nu=None, objective=None, **base
        )
    W = np.asarray(w.value).reshape(d, d)
    lam = np.asarray(cons[0].dual_value, float)
    nu = np.asarray(cons[1].dual_value, float) if len(Ae) else np.zeros(0)
    return GraphSvm(
        W=W,
        feasible=True,
        status=status,
        lam=lam,
        nu=nu,
        objective=float(np.linalg.norm(W)),
        **base,
    )


def kkt_residuals(sol: GraphSvm) -> dict:
    """The KKT conditions of min ½‖w‖² s.t. A w ≥ 1, B w = 0, as residuals (all ≈ 0 at the
    optimum): stationarity ‖w − Aᵀλ − Bᵀν‖, primal feasibility, λ ≥ 0, complementarity."""
    if not sol.feasible:
        raise ValueError(f"`sol` must be feasible; got status {sol.status!r}")
    w = sol.W.ravel()
    # cvxpy's equality multiplier enters its Lagrangian with the opposite sign
    grad = w - sol.A_ineq.T @ sol.lam + (sol.A_eq.T @ sol.nu if len(sol.nu) else 0.0)
    m = sol.A_ineq @ w
    return dict(
        stationarity=float(np.abs(grad).max()),
        primal_ineq=float(max(0.0, (1 - m).max())) if len(m) else 0.0,
        primal_eq=float(np.abs(sol.A_eq @ w).max()) if len(sol.A_eq) else 0.0,
        dual=float(max(0.0, -sol.lam.min())) if len(sol.lam) else 0.0,
        complementarity=float(np.abs(sol.lam * (m - 1)).max()) if len(m) else 0.0,
    )
