"""Joint training of the head v and the attention W, and the two SVMs it reaches
(docs/joint.md).

MMTS (Tarzanagh, Li, Zhang, Oymak, arXiv 2306.13596, joint (v, p)) and MD-Att (Julistiono,
Tarzanagh, Azizan, arXiv 2410.14581, joint (W, v) ℓp mirror descent): with the selection α
that training reaches,

    v^mm     = argmin ‖v‖       s.t.  Y_i vᵀ x_{iα_i} ≥ 1                  (head SVM)
    S        = {i : Y_i v^mmᵀ x_{iα_i} = 1}                   (its support sequences)
    W^relax  = argmin ‖W‖       s.t.  (x_{iα_i} − x_it)ᵀ W z_i ≥ 1 (i ∈ S), ≥ 0 (i ∉ S)
    W^tight  = argmin ‖W‖       s.t.  (x_{iα_i} − x_it)ᵀ W z_i ≥ 1 for every i (Att-SVM_α)

‖·‖ Frobenius/ℓ2 ("fro") or entrywise ℓp ("lp", both tensors). A sequence whose selected
token has v-margin > 1 contributes a loss gradient exponentially smaller in ‖v‖ than the
support sequences, so W only has to keep its selection there (≥ 0) — the relaxed SVM
(arXiv 2306.13596). The MD-Att code solves the tight one for W; both are reported.

Also here: the MMTS presets and the MD-Att toy (`joint_problem`), and `authors_loop`, a numpy
port of the authors' loop in float32 or float64 (plain softmax Jacobian, ε in the
normalizers) — the GD engine is float64 only and always exact; this path exists to show
the authors' figure next to the true limit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .limits import MAX_D, MAX_N, MAX_T
from .problems import (
    Problem,
    check_alpha,
    check_choice,
    check_float,
    check_int,
    optimal_tokens,
    random_problem,
)
from .svm import (
    MAX_P,
    SOLVER,
    SOLVER_OPTS,
    SUPPORT_TOL,
    SvmSolution,
    constraint_rows,
    cp,
    margins_and_support,
    solve_att_svm,
)
from .training import MAX_STEPS, train, train_batch

JOINT_NORMS = ("fro", "lp")
JOINT_PRESETS = ("mmts-relaxed", "mmts-tight", "mdatt-toy")
AUTHORS_EPS = (1e-19, 1e-9)  # MMTS notebook: ε of p's and v's normalizers


@dataclass(frozen=True, eq=False)
class JointSvm:
    """The SVMs of joint (v, W) training at a selection α.

    Attributes:
        v: (d,) v^mm, or None if the head SVM is infeasible; v_status: its solver status.
        v_margins: (n,) Y_i vᵀ x_{iα_i} (None if infeasible).
        support: (n,) bool, the support sequences S of the head SVM (margin ≤ 1 + tol).
        W: (d, d) the relaxed Att-SVM (≥ 1 on S, ≥ 0 elsewhere), or None; W_status.
        W_margins: (n, T) its token margins; W_duals: (n, T) their multipliers.
        W_tight: (d, d) the Att-SVM with every constraint ≥ 1, or None; tight: its full
            `SvmSolution`.
        alpha, norm, p: the selection and norm solved for.
    """

    v: np.ndarray | None
    v_status: str
    v_margins: np.ndarray | None
    v_duals: np.ndarray | None
    support: np.ndarray
    W: np.ndarray | None
    W_status: str
    W_margins: np.ndarray | None
    W_duals: np.ndarray | None
    W_tight: np.ndarray | None
    tight: SvmSolution
    alpha: np.ndarray
    norm: str
    p: float | None

    @property
    def feasible(self) -> bool:
        return self.v is not None and self.W is not None and self.W_tight is not None

    @property
    def differ(self) -> bool:
        """Some sequence is not a support vector of the head SVM: relaxed ≠ tight problem."""
        return self.v is not None and not bool(np.all(self.support))


def _ok(status) -> bool:
    return status in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE)


def _min_norm(A: np.ndarray, b: np.ndarray, norm: str, p):
    """min ‖w‖ s.t. A w ≥ b (Clarabel): (status, w or None, multipliers or None). Frobenius
    as ½‖w‖² (multipliers of that: w = Aᵀλ), ℓp as ‖w‖_p with exact power cones."""
    w = cp.Variable(A.shape[1], name="w")
    obj = 0.5 * cp.sum_squares(w) if norm == "fro" else cp.pnorm(w, p, approx=False)
    con = A @ w >= b
    prob = cp.Problem(cp.Minimize(obj), [con])
    try:
        prob.solve(solver=SOLVER, **SOLVER_OPTS)
    except cp.error.SolverError as exc:
        return f"solver_error: {exc}".splitlines()[0][:200], None, None
    if _ok(prob.status) and w.value is not None and con.dual_value is not None:
        return prob.status, np.asarray(w.value), np.asarray(con.dual_value)
    return prob.status, None, None


def head_svm(prob: Problem, alpha, norm: str = "fro", p: float | None = None):
    """v^mm = argmin ‖v‖ s.t. Y_i vᵀ x_{iα_i} ≥ 1: (status, v or None, margins, duals)."""
    A = prob.Y[:, None] * prob.X[np.arange(prob.n), np.asarray(alpha)]  # (n, d)
    status, v, lam = _min_norm(A, np.ones(prob.n), norm, p)
    return status, v, (None if v is None else A @ v), lam


def _relaxed_att_svm(prob: Problem, alpha, support, norm: str, p, *, solved: bool) -> tuple:
    """The relaxed Att-SVM of W at α: margin 1 on support sequences, 0 elsewhere; (status, W,
    margins, duals (n, T)), None fields when the head SVM was not `solved`."""
    W = W_marg = W_duals = None
    W_status = "not solved (head SVM infeasible)"
    if solved:
        rows, idx = constraint_rows(prob, alpha)
        b = support[idx[:, 0]].astype(float)  # 1 on support sequences, 0 elsewhere
        if rows.shape[0] == 0:
            W_status, W = "optimal", np.zeros((prob.d, prob.d))
        else:
            W_status, w, lam = _min_norm(rows, b, norm, p)
            if w is not None:
                W = w.reshape(prob.d, prob.d)
                W_marg, _ = margins_and_support(prob, rows, idx, W, alpha)
                W_duals = np.full((prob.n, prob.T), np.nan)
                W_duals[idx[:, 0], idx[:, 2]] = lam
    return W_status, W, W_marg, W_duals


def solve_joint_svm(
    prob: Problem,
    alpha=None,
    norm: str = "fro",
    p: float | None = None,
    *,
    support_tol: float = SUPPORT_TOL,
) -> JointSvm:
    """The head SVM v^mm, its support sequences, and the relaxed and tight Att-SVMs of W at α.

    Args:
        prob: a single-query problem (its own v is not used: v is trained).
        alpha: (n,) the selection reached by training; None: the optimal tokens of prob.v.
        norm: "fro" (GD/NGD/Polyak: ℓ2 for v, Frobenius for W) or "lp" (ℓp mirror descent:
            entrywise ℓp for both), with p in (1, `svm.MAX_P`].
        support_tol: sequence i is a support vector when Y_i v^mmᵀ x_{iα_i} ≤ 1 + support_tol.

    Infeasible data is a result (None fields with the solver's status), not an error.
    """
    if not isinstance(prob, Problem):
        raise ValueError(f"`prob` must be an attsvm.Problem; got {type(prob).__name__}")
    if prob.queries != "single":
        raise ValueError(
            f"`prob` must have single queries for the joint SVMs; got queries={prob.queries!r}"
        )
    check_choice("norm", norm, JOINT_NORMS)
    if norm == "lp":
        if p is None:
            raise ValueError("`p` must be given for norm='lp' (a number in (1, 1000]); got None")
        p = check_float("p", p, 1.0, MAX_P, lo_open=True)
    elif p is not None:
        raise ValueError(f"`p` must be None unless norm='lp'; got p={p!r}")
    support_tol = check_float("support_tol", support_tol, 0.0, 1.0)
    alpha = optimal_tokens(prob) if alpha is None else check_alpha(prob, alpha)
    v_status, v, v_marg, v_duals = head_svm(prob, alpha, norm, p)
    support = np.zeros(prob.n, bool) if v is None else v_marg <= 1.0 + support_tol
    tight_norm, tight_p = ("fro", None) if norm == "fro" or p == 2.0 else ("lp", p)
    tight = solve_att_svm(prob, alpha, tight_norm, p=tight_p, support_tol=support_tol)
    W_status, W, W_marg, W_duals = _relaxed_att_svm(
        prob, alpha, support, norm, p, solved=v is not None
    )
    return JointSvm(
        v=v,
        v_status=v_status,
        v_margins=v_marg,
        v_duals=v_duals,
        support=support,
        W=W,
        W_status=W_status,
        W_margins=W_marg,
        W_duals=W_duals,
        W_tight=tight.W,
        tight=tight,
        alpha=alpha,
        norm=norm,
        p=p if norm == "lp" else None,
    )


# -- the presets ---------------------------------------------------------------------------
# MMTS joint_training.ipynb (ucr-optml/max_margin_attention, MaxMarginTokenSelection/;
# docs/joint.md): keys = values = X, W = I, query = the trainable prompt p. Written as
# W z_i with z_i = e₁, so p = W e₁ (the first column of W; the other one gets no gradient).
_MMTS_THIRD = {"mmts-tight": [(0.0, 0.0), (0.5, 1.0)], "mmts-relaxed": [(0.0, 0.0), (0.5, 1.5)]}
# MD-Att synthetic-data/joint_training.py (aaronk2002/AttentionMD): z_i = x_i0 (self-attention).
_MDATT_X = [[(-2.7, 1.2), (1.4, 2.1), (1.3, -0.1)], [(0.4, -2.2), (-1.1, -0.4), (0.9, 0.1)]]


@dataclass(frozen=True)
class JointPreset:
    """A joint-training instance: problem, W₀, v₀ and the authors' settings."""

    prob: Problem
    W0: np.ndarray
    v0: np.ndarray
    optimizer: str  # "ngd" (MMTS) or "nmd" (MD-Att: normalized ℓp MD on both)
    lr: float
    steps: int
    description: str
    authors_eps: tuple  # ε of the authors' normalizers (W's, v's)


def joint_problem(name: str) -> JointPreset:
    """One of `JOINT_PRESETS`: the MMTS tight/relaxed instances (arXiv 2306.13596) or the
    MD-Att 2 × 3 × 2 toy (arXiv 2410.14581)."""
    check_choice("name", name, JOINT_PRESETS)
    if name == "mdatt-toy":
        prob = Problem(
            X=np.array(_MDATT_X), Y=np.array([1.0, -1.0]), v=np.array([1.0, 0.0]), name=name
        )
        return JointPreset(
            prob,
            np.zeros((2, 2)),
            np.zeros(2),
            "nmd",
            0.1,
            2000,
            "MD-Att toy: n=2, T=3, d=2, z_i = first token, W₀ = 0, v₀ = 0, "
            "normalized ℓp mirror descent on both, lr 0.1",
            (2.0**-52,) * 2,
        )
    X = np.array([[(0.0, 0.0), (1.0, 1.0)], [(0.0, 0.0), (1.0, -1.0)], _MMTS_THIRD[name]])
    W0 = np.zeros((2, 2))
    W0[:, 0] = (0.0, -1.0)
    prob = Problem(
        X=X,
        Y=np.array([1.0, -1.0, 1.0]),
        Z=np.tile([1.0, 0.0], (3, 1)),
        v=np.array([-1.0, 0.0]),
        name=name,
    )
    kind = name.split("-")[1]
    return JointPreset(
        prob,
        W0,
        np.array([-1.0, 0.0]),
        "ngd",
        0.1,
        1000,
        f"MMTS {kind}: n=3, T=2, d=2, p₀ = (0, −1), v₀ = (−1, 0), normalized GD on each, lr 0.1",
        AUTHORS_EPS,
    )


def first_query_path(prob: Problem, W) -> np.ndarray:
    """W z₁ for W (…, d, d): the first sequence's query mapped by W (the MMTS prompt p when
    z_i = e₁), the 2-D path the joint-training page draws."""
    z = prob.Z[0] if prob.Z is not None else prob.X[0, prob.query_index]
    return np.asarray(W) @ z


# -- the authors' loop, in float32 or float64 -------------------------------------------


def authors_loop(
    prob: Problem,
    W0,
    v0,
    *,
    steps: int,
    lr: float,
    dtype: str = "float32",
    eps=AUTHORS_EPS,
    p: float = 2.0,
):
    """Joint normalized steps as the authors' torch code computes them, in numpy: the plain
    softmax Jacobian (diag(s) − s sᵀ) c, whose diagonal s_t (1 − s_t) cancels once
    1 − s_max < machine ε (docs/followups.md §4b), ℓ'(u) = −1/(1 + e^u), and g/(‖g‖_q + ε)
    per tensor with the dual variable of ℓp mirror descent recomputed from the weights as
    their `SMD` does (p = 2: normalized GD). Every array and operation is in `dtype`
    ("float32", torch's default and the MMTS notebook's, or "float64").

    Returns (Ws (steps+1, d, d), vs (steps+1, d)). Single-query, linear-head problems.
    """
    check_choice("dtype", dtype, ("float32", "float64"))
    steps = check_int("steps", steps, 1, 100_000)
    dt = np.dtype(dtype).type
    X, Y = prob.X.astype(dt), prob.Y.astype(dt)
    Z = (prob.X[:, prob.query_index] if prob.Z is None else prob.Z).astype(dt)
    W, v = np.asarray(W0, dt), np.asarray(v0, dt)
    lr, e_W, e_v, p = dt(lr), dt(eps[0]), dt(eps[1]), dt(p)
    q = p / (p - dt(1))
    n = dt(prob.n)
    Ws, vs = [W], [v]

    def step(w, g, e):
        gn = np.sum(np.abs(g) ** q) ** (dt(1) / q)
        u = np.sign(w) * np.abs(w) ** (p - dt(1)) - lr * g / (gn + e)
        return (np.sign(u) * np.abs(u) ** (dt(1) / (p - dt(1)))).astype(dt)

    with np.errstate(all="ignore"):
        for _ in range(steps):
            a = np.einsum("ntd,de,ne->nt", X, W, Z)
            ex = np.exp(a - a.max(-1, keepdims=True))
            s = ex / ex.sum(-1, keepdims=True)
            r = np.einsum("nt,ntd->nd", s, X)
            df = -Y / (dt(1) + np.exp(Y * (r @ v))) / n
            h = X @ v
            J = s[:, :, None] * np.eye(s.shape[1], dtype=dt) - s[:, :, None] * s[:, None, :]
            ga = df[:, None] * np.einsum("ntu,nu->nt", J, h)  # (diag(s) − s sᵀ) h
            gW = np.einsum("nt,ntd,ne->de", ga, X, Z)
            W, v = step(W, gW, e_W), step(v, df @ r, e_v)
            Ws.append(W)
            vs.append(v)
    return np.array(Ws, np.float64), np.array(vs, np.float64)


def balanced_att_svm(prob: Problem, sv: JointSvm, ratio: float | None = None, *, iters: int = 30):
    """The Att-SVM of W when v and W grow at a fixed norm ratio (each tensor's normalized
    step has the same length, so ‖v_k‖ ≈ ‖W_k‖): with v ≈ R_v v^mm and W ≈ R_W W^b, the
    non-support sequence i's loss weight e^{−m_i R_v} beats a support one's e^{−R_v} by
    e^{−(m_i − 1) R_v}, which buys it (m_i − 1) R_v / R_W of margin:

        W^b = argmin ‖W‖  s.t.  (x_{iα_i} − x_it)ᵀ W z_i ≥ b_i,
        b_i = 1 (i ∈ S),  b_i = max(0, 1 − (m_i − 1) ρ) (i ∉ S),   ρ = R_v / R_W,

    m_i = Y_i v^mmᵀ x_{iα_i} the head margins. `ratio` = ρ, or None: the fixed point
    ρ = ‖W^b(ρ)‖ / ‖v^mm‖ of ‖v_k‖ = ‖W_k‖ (unique: ρ increases, ‖W^b(ρ)‖ decreases;
    found by bisection between ‖W^relax‖ and ‖W^tight‖ over ‖v^mm‖). ρ → ∞ is W^relax,
    ρ = 0 is W^tight. Frobenius only. Returns (W^b or None, ρ). A heuristic derived here
    (docs/joint.md), not a theorem of either paper.
    """
    if sv.norm != "fro" or not sv.feasible:
        return None, np.nan
    rows, idx = constraint_rows(prob, sv.alpha)
    if rows.shape[0] == 0:
        return np.zeros((prob.d, prob.d)), np.nan
    m = sv.v_margins
    nv = float(np.linalg.norm(sv.v))

    def solve(rho):
        b = np.where(sv.support, 1.0, np.maximum(0.0, 1.0 - (m - 1.0) * rho))
        _, w, _ = _min_norm(rows, b[idx[:, 0]], "fro", None)
        return None if w is None else w.reshape(prob.d, prob.d)

    if ratio is not None:
        return solve(check_float("ratio", ratio, 0.0, 1e12)), float(ratio)
    lo, hi = np.linalg.norm(sv.W) / nv, np.linalg.norm(sv.W_tight) / nv
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        Wm = solve(mid)
        if Wm is None:
            return None, np.nan
        if mid < np.linalg.norm(Wm) / nv:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-4 * hi:
            break
    rho = 0.5 * (lo + hi)
    return solve(rho), float(rho)


# -- what the joint-training page shows -----------------------------------------------------
def _unit(a):
    a = np.asarray(a, float)
    n = np.linalg.norm(a)
    return a / n if n > 0 else a


def cosine(A, B) -> float:
    """⟨A, B⟩ / (‖A‖ ‖B‖) of two arrays of any shape (W's or v's); NaN where either is
    missing (an infeasible SVM) or zero, so tables and curves keep a row for every run."""
    if A is None or B is None:
        return np.nan
    A, B = np.ravel(A), np.ravel(B)
    den = np.linalg.norm(A) * np.linalg.norm(B)
    return float(A @ B / den) if den > 0 else np.nan


def _authors_run(pre, steps: int, every: int, p: float) -> tuple:
    """`authors_loop` in float32 with the preset's ε, recorded every `every` steps:
    (W's, v's, steps)."""
    Ws, vs = authors_loop(
        pre.prob, pre.W0, pre.v0, steps=steps, lr=pre.lr, dtype="float32", eps=pre.authors_eps, p=p
    )
    return Ws[::every], vs[::every], np.arange(0, steps + 1, every)


def _paths_and_table(prob, runs: dict, sv) -> tuple[list, list]:
    """Per run {label: (W's, v's, steps)}: the paths of W z₁ and v (one frame per run and
    tensor) and a table row with the final directions and their correlations with `sv`."""
    paths, table = [], []
    for label, (Ws, vs, st) in runs.items():
        Wz = first_query_path(prob, Ws)
        for tensor, P in (("W z₁", Wz), ("v", vs)):
            paths.append(
                pd.DataFrame(dict(step=st, run=label, tensor=tensor, x=P[:, 0], y=P[:, 1]))
            )
        table.append(
            dict(
                run=label,
                W_z1=f"({_unit(Wz[-1])[0]:.4f}, {_unit(Wz[-1])[1]:.4f})",
                v=f"({_unit(vs[-1])[0]:.4f}, {_unit(vs[-1])[1]:.4f})",
                corr_relaxed=cosine(Ws[-1], sv.W),
                corr_tight=cosine(Ws[-1], sv.W_tight),
                corr_v=cosine(vs[-1], sv.v),
                norm_W=float(np.linalg.norm(Ws[-1])),
                norm_v=float(np.linalg.norm(vs[-1])),
            )
        )
    return paths, table


def _svm_rays(prob, sv) -> list[dict]:
    """The unit directions of the SVMs' W z₁ (relaxed and tight, where solved) and v^mm."""
    rays = []
    for svm, W in (("W^relax z₁", sv.W), ("W^tight z₁", sv.W_tight)):
        if W is not None:
            u = _unit(first_query_path(prob, W))
            rays.append(dict(svm=svm, tensor="W z₁", x=u[0], y=u[1]))
    if sv.v is not None:
        u = _unit(sv.v)
        rays.append(dict(svm="v^mm", tensor="v", x=u[0], y=u[1]))
    return rays


def _token_frame(prob, alpha, sv) -> pd.DataFrame:
    """Every token's 2-D position, label, whether it is selected (α) and a support token."""
    T = prob.T
    return pd.DataFrame(
        [
            dict(
                seq=i + 1,
                token=t,
                label=int(prob.Y[i]),
                x=prob.X[i, t, 0],
                y=prob.X[i, t, 1],
                selected=bool(t == alpha[i]),
                support=bool(sv.support[i]),
            )
            for i in range(prob.n)
            for t in range(T)
        ]
    )


@dataclass(frozen=True, kw_only=True)
class PresetSettings:
    """A joint-training preset's run (`preset_study`; hashable: the app's cache key).
    name: one of `JOINT_PRESETS`; p: the ℓp geometry of both tensors (2: normalized GD);
    dtype: "float32" also runs the authors' loop; steps: None for the preset's own."""

    name: str
    p: float = 2.0
    dtype: str = "float64"
    steps: int | None = None

    def __post_init__(self):
        check_choice("name", self.name, JOINT_PRESETS)
        check_choice("dtype", self.dtype, ("float64", "float32"))
        object.__setattr__(self, "p", check_float("p", self.p, 1.01, 100.0))
        if self.steps is not None:
            object.__setattr__(self, "steps", check_int("steps", self.steps, 1, 100_000))


def preset_study(s: PresetSettings) -> dict:
    """A preset trained jointly, as paths and SVM rays (the joint-training page).

    Always runs the exact float64 engine (`train(train_v=True)`: ngd, or nmd with this p on
    both tensors when p ≠ 2 or for the MD-Att toy); dtype "float32" also runs
    `authors_loop` in float32 with the authors' ε and draws that path. The SVMs are solved at
    the engine's final selection ("lp" when p ≠ 2).

    Returns {"paths": step, run, tensor, x, y; "rays": svm, tensor, x, y (unit directions);
    "tokens": seq, token, x, y, selected, support; "table": one row per run; "svm":
    JointSvm; "run": the engine's Trajectory; "preset": JointPreset}.
    """
    pre = joint_problem(s.name)
    p = s.p
    steps = pre.steps if s.steps is None else s.steps
    every = max(1, steps // 200)
    while steps % every:
        every -= 1
    rule = dict(optimizer="nmd", p=p) if pre.optimizer == "nmd" or p != 2.0 else {}
    tr = train(
        pre.prob,
        steps=steps,
        lr=pre.lr,
        init=pre.W0,
        train_v=True,
        init_v=pre.v0,
        record_every=every,
        **rule,
    )
    lp = p != 2.0
    sv = solve_joint_svm(pre.prob, tr.alpha, "lp" if lp else "fro", p=p if lp else None)
    runs = {"float64, exact (attsvm)": (tr.W, tr.v, tr.steps)}
    if s.dtype == "float32":
        runs["float32, authors' loop"] = _authors_run(pre, steps, every, p)
    prob = pre.prob
    paths, table = _paths_and_table(prob, runs, sv)
    rays = _svm_rays(prob, sv)
    tokens = _token_frame(prob, tr.alpha, sv)
    return {
        "paths": pd.concat(paths, ignore_index=True),
        "rays": pd.DataFrame(rays),
        "tokens": tokens,
        "table": pd.DataFrame(table),
        "svm": sv,
        "run": tr,
        "preset": pre,
    }


FINAL_COLUMNS = {
    "corr(W, W^relax)": "corr_relaxed",
    "corr(W, W^tight)": "corr_tight",
    "corr(W, W^bal)": "corr_balanced",
    "corr(v, v^mm)": "corr_v",
}


@dataclass(frozen=True, kw_only=True)
class RandomSettings:
    """Joint NGD on random instances (`random_study`; hashable: the app's cache key):
    `runs` problems random_problem(n, T, d, seed + i), `steps` steps of size `lr`."""

    n: int = 6
    T: int = 4
    d: int = 4
    seed: int = 0
    runs: int = 8
    steps: int = 1000
    lr: float = 0.1

    def __post_init__(self):
        runs = check_int("runs", self.runs, 1, 100_000)
        fields = dict(
            n=check_int("n", self.n, 1, MAX_N),
            T=check_int("T", self.T, 1, MAX_T),
            d=check_int("d", self.d, 1, MAX_D),
            seed=check_int("seed", self.seed, 0, 2**63 - runs),
            runs=runs,
            steps=check_int("steps", self.steps, 1, MAX_STEPS),
            lr=check_float("lr", self.lr, 0.0, 1e3, lo_open=True),
        )
        for k, v in fields.items():  # plain ints and floats: equal settings, one cache key
            object.__setattr__(self, k, v)


def random_study(s: RandomSettings) -> dict:
    """Joint NGD on `s.runs` random instances (random_problem(n, T, d, seed + i), default
    init, v₀ = the instance's v), and at every record the correlations with the SVMs of its
    final selection: {"curves": step, instance, measure, corr; "final": one row per
    instance, with the last correlations as `FINAL_COLUMNS`}."""
    n, T, d, seed, steps = s.n, s.T, s.d, s.seed, s.steps
    probs = [random_problem(n, T, d, seed=seed + i) for i in range(s.runs)]
    every = max(1, steps // 50)
    while steps % every:
        every -= 1
    tr = train_batch(probs, steps=steps, lr=s.lr, train_v=True, record_every=every, seed=seed)
    curves, final = [], []
    for i, prob in enumerate(probs):
        sv = solve_joint_svm(prob, tr[i].alpha)
        Wb, rho = balanced_att_svm(prob, sv)
        Ws, vs = tr[i].W, tr[i].v
        cs = {
            "corr(W, W^relax)": [cosine(W, sv.W) for W in Ws],
            "corr(W, W^tight)": [cosine(W, sv.W_tight) for W in Ws],
            "corr(W, W^bal)": [cosine(W, Wb) for W in Ws],
            "corr(v, v^mm)": [cosine(v, sv.v) for v in vs],
        }
        for measure, c in cs.items():
            curves.append(pd.DataFrame(dict(step=tr.steps, instance=i, measure=measure, corr=c)))
        final.append(
            dict(
                instance=i,
                seed=seed + i,
                alpha=" ".join(map(str, tr[i].alpha)),
                support=" ".join(str(int(x)) for x in sv.support),
                rho=rho,
                **{FINAL_COLUMNS[k]: v[-1] for k, v in cs.items()},
            )
        )
    return {"curves": pd.concat(curves, ignore_index=True), "final": pd.DataFrame(final), "run": tr}
