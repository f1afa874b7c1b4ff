"""The conic solver the SVMs share: cvxpy (imported on first use), Clarabel pinned with tight
tolerances, and the nuclear-norm dual both `attsvm.svm` and `attsvm.pairsvm` solve as their
reference (docs/theory.md §2; docs/svm-solvers.md)."""

from __future__ import annotations

import numpy as np


class _Cvxpy:
    """cvxpy, imported on first use: its import takes ≈ 1.5 s on the 2-core machine (scipy.stats
    and a probe of every installed solver), which every first script run of a fresh
    `streamlit run app.py` waited for before drawing anything, SVM or not."""

    def __getattr__(self, name):
        import cvxpy

        return getattr(cvxpy, name)


cp = _Cvxpy()  # `cp.X` as with `import cvxpy as cp` (attsvm.joint and attsvm.ntp use it too)

SOLVER = "CLARABEL"
SOLVER_OPTS = dict(
    tol_gap_abs=1e-10, tol_gap_rel=1e-10, tol_feas=1e-10, tol_ktratio=1e-8, max_iter=400
)


def dual_status(status: str) -> str:
    """The primal's status from its dual's: an unbounded dual means an infeasible SVM."""
    if status in (cp.UNBOUNDED, cp.UNBOUNDED_INACCURATE):
        return "infeasible" if status == cp.UNBOUNDED else "infeasible_inaccurate"
    return status


def dual_nuc_problem(B, m: int, rD: int, rZ: int):
    """max 1ᵀλ s.t. λ ≥ 0, [[I, B(λ)], [B(λ)ᵀ, I]] ⪰ 0, B(λ) = Σ_j λ_j B_j, for B
    (rD·rZ, m) holding vec(B_j) as columns: an array, or a cvxpy Parameter."""
    lam = cp.Variable(m, name="lambda")
    Bl = cp.reshape(B @ lam, (rD, rZ), order="C")
    S = cp.bmat([[np.eye(rD), Bl], [Bl.T, np.eye(rZ)]])
    lmi = 0.5 * (S + S.T) >> 0
    return cp.Problem(cp.Maximize(cp.sum(lam)), [lam >= 0, lmi]), lam, lmi
