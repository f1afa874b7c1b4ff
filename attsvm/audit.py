"""Audit an attention head against the Att-SVM of the tokens it selects.

For a head with bilinear form W (score[t, s] = k_sᵀ W q_t), on keys k_s and queries q_t of
some sequences, with its softmax weights (docs/pretrained.md; arXiv 2308.16898 eq. Att-SVM,
the sequence form of §2):

* selection: query t selects α_t = argmax_s A[t, s] (over the allowed keys), kept when
  A[t, α_t] ≥ τ; coverage = kept / queries;
* constraints: A_j = (k_α − k_s) q_tᵀ for every kept t and every other allowed key s,
  ⟨A_j, W⟩ ≥ 1 (exact duplicates removed);
* W^mm = argmin ‖W‖_F under them (`attsvm.pairsvm.solve_pairs`, with its certificate);
* cos = ⟨W_h, W^mm⟩ / (‖W_h‖‖W^mm‖) and cos_span = ⟨W_h, W^mm⟩ / (‖P_S W_h‖‖W^mm‖), P_S the
  orthogonal projection onto S = span{A_j} (W^mm ∈ S by the KKT conditions): the part of
  W_h outside S is invisible to these constraints. ‖P_S W‖² = bᵀK⁺b with b_j = ⟨A_j, W⟩ and
  K_jk = ⟨A_j, A_k⟩; computed in orthonormal per-group coordinates (`Span`), which removes
  repeated and rank-deficient constraints (layer-0 inputs are low rank).

The head satisfies its own constraints up to scale by construction (α_t is its own argmax,
so every ⟨A_j, W_h⟩ > 0): the fraction of constraints satisfied means something only for
the baselines (random matrices of the head's rank, shuffled selections, other heads).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.linalg

SPAN_RTOL = 1e-10  # singular values of a group's tokens/queries kept above this × largest
PINV_RTOL = 1e-10  # the span Gram's ridge, × its largest diagonal (`Span.solve`)
DENSE_MAX = 16_000  # span coordinates up to which the Gram is formed (N² floats) and factored
CG_RTOL = 1e-10  # relative residual at which the matrix-free projection stops
CG_MAXITER = 2000
QUANTILES = (0.0, 0.05, 0.25, 0.5)


@dataclass(frozen=True)
class Constraints:
    """Constraint j: D[j] @ W @ Z[query[j]] ≥ 1 (the `solve_pairs` layout), with where it
    came from: sequence `seq[j]`, query row `row[j]`, selected key `sel[j]`, other key
    `other[j]`."""

    D: np.ndarray
    Z: np.ndarray
    query: np.ndarray
    seq: np.ndarray
    row: np.ndarray
    sel: np.ndarray
    other: np.ndarray

    @property
    def m(self) -> int:
        return int(self.D.shape[0])

    def margins(self, W: np.ndarray) -> np.ndarray:
        """⟨A_j, W⟩ = D_jᵀ W z_j for every constraint, (m,)."""
        WZ = W @ self.Z.T  # (d, q)
        return np.einsum("jd,dj->j", self.D, WZ[:, self.query]) if self.m else np.zeros(0)


def _check_inputs(keys, queries, attention, query_rows):
    n = len(keys)
    if not (len(queries) == len(attention) == n) or n == 0:
        raise ValueError("keys, queries and attention must be non-empty lists of equal length")
    if query_rows is not None and len(query_rows) != n:
        raise ValueError("query_rows must have one entry per sequence")
    out = []
    for i in range(n):
        K = np.asarray(keys[i], dtype=np.float64)
        Q = np.asarray(queries[i], dtype=np.float64)
        A = np.asarray(attention[i], dtype=np.float64)
        T = K.shape[0]
        if K.ndim != 2 or Q.ndim != 2 or Q.shape[0] != T or A.shape != (T, T):
            raise ValueError(
                f"sequence {i}: keys (T, d), queries (T, d2), attention (T, T) "
                f"expected, got {K.shape}, {Q.shape}, {A.shape}"
            )
        rows = (
            np.arange(T)
            if query_rows is None
            else np.unique(np.asarray(query_rows[i], dtype=np.int64))
        )
        if rows.size and (rows.min() < 0 or rows.max() >= T):
            raise ValueError(f"sequence {i}: query rows must be in 0..{T - 1}")
        out.append((K, Q, A, rows))
    return out


def select(attention, *, tau: float = 0.5, query_rows=None, causal: bool = False):
    """α per sequence ((T_i,) int, −1 where not kept or not a query row), and the number of
    query rows. α_t = argmax over the allowed keys (s ≤ t if causal), kept when ≥ τ."""
    alpha, n_queries = [], 0
    for i, A in enumerate(attention):
        A = np.asarray(A, dtype=np.float64)
        T = A.shape[0]
        rows = np.arange(T) if query_rows is None else np.unique(np.asarray(query_rows[i]))
        a = np.full(T, -1, dtype=np.int64)
        for t in rows:
            w = A[t, : t + 1] if causal else A[t]
            s = int(np.argmax(w))
            if w[s] >= tau and w.size > 1:
                a[t] = s
        alpha.append(a)
        n_queries += rows.size
    return alpha, n_queries


def assemble(keys, queries, alpha, *, causal: bool = False) -> Constraints:
    """The constraints of selections `alpha` (module docstring), duplicates removed (the same
    key difference with the same query vector), queries deduplicated into Z."""
    Ds, Qs, seq, row, sel, oth = [], [], [], [], [], []
    for i, a in enumerate(alpha):
        K = np.asarray(keys[i], dtype=np.float64)
        Q = np.asarray(queries[i], dtype=np.float64)
        for t in np.flatnonzero(a >= 0):
            allowed = np.arange(t + 1 if causal else K.shape[0])
            s = allowed[allowed != a[t]]
            Ds.append(K[a[t]] - K[s])
            Qs.append(np.broadcast_to(Q[t], (s.size, Q.shape[1])))
            seq.append(np.full(s.size, i))
            row.append(np.full(s.size, t))
            sel.append(np.full(s.size, a[t]))
            oth.append(s)
    d, d2 = np.asarray(keys[0]).shape[1], np.asarray(queries[0]).shape[1]
    if not Ds:
        z = np.zeros(0, dtype=np.int64)
        return Constraints(np.zeros((0, d)), np.zeros((0, d2)), z, z, z, z, z)
    D, Qall = np.concatenate(Ds), np.concatenate(Qs)
    Z, query = np.unique(Qall, axis=0, return_inverse=True)
    query = query.reshape(-1)
    both = np.concatenate([D, query[:, None].astype(np.float64)], axis=1)
    _, first = np.unique(both, axis=0, return_index=True)
    keep = np.sort(first)
    cat = lambda xs: np.concatenate(xs)[keep]
    return Constraints(
        D=D[keep], Z=Z, query=query[keep], seq=cat(seq), row=cat(row), sel=cat(sel), other=cat(oth)
    )


def _basis(M: np.ndarray) -> np.ndarray:
    """Orthonormal basis of the row space of M (k, p) as columns (p, r)."""
    if M.shape[0] == 0:
        return np.zeros((M.shape[1], 0))
    _, s, Vt = np.linalg.svd(M, full_matrices=False)
    r = int(np.sum(s > SPAN_RTOL * s[0])) if s.size and s[0] > 0 else 0
    return Vt[:r].T


class Span:
    """S = span{A_j} as a sum of product subspaces span(U_g) ⊗ span(V_g), one per group g of
    constraints sharing their key differences' span: a sequence's kept queries when every key
    is allowed (then span{k_α − k_s : s ≠ α} is the same for every α), else one query.
    Elements: Σ_g U_g C_g V_gᵀ; the Gram of these coordinates has identity diagonal blocks
    and G_gh = (U_gᵀU_h) ⊗ (V_gᵀV_h). ‖P_S W‖² = bᵀG⁺b with b_g = U_gᵀ W V_g."""

    def __init__(self, c: Constraints, *, by_sequence: bool):
        keys = c.seq if by_sequence else c.seq * (int(c.row.max(initial=0)) + 1) + c.row
        self.groups = []
        for g in np.unique(keys):
            j = np.flatnonzero(keys == g)
            U = _basis(c.D[j])
            V = _basis(c.Z[np.unique(c.query[j])])
            if U.shape[1] and V.shape[1]:
                self.groups.append((U, V))
        self.sizes = [U.shape[1] * V.shape[1] for U, V in self.groups]
        self.N = int(sum(self.sizes))
        self._chol = None

    def coefficients(self, W: np.ndarray) -> np.ndarray:
        if not self.groups:
            return np.zeros(0)
        return np.concatenate([(U.T @ W @ V).ravel() for U, V in self.groups])

    def _split(self, c: np.ndarray):
        return np.split(c, np.cumsum(self.sizes)[:-1])

    def matrix(self, c: np.ndarray) -> np.ndarray:
        """Σ_g U_g C_g V_gᵀ."""
        U0, V0 = self.groups[0]
        M = np.zeros((U0.shape[0], V0.shape[0]))
        for (U, V), cg in zip(self.groups, self._split(c), strict=True):
            M += (U @ cg.reshape(U.shape[1], V.shape[1])) @ V.T
        return M

    def gram_apply(self, c: np.ndarray) -> np.ndarray:
        return self.coefficients(self.matrix(c))

    def _dense(self):
        """The Cholesky factor of G + δI, δ = PINV_RTOL × G's largest diagonal (LAPACK dpotrf
        in place, about N³/3 flops: fewer than the rank-revealing pivoted Cholesky's, and far
        fewer than an eigendecomposition's; docs/pretrained.md has the timings)."""
        if self._chol is None:
            G = np.zeros((self.N, self.N))
            off = np.concatenate([[0], np.cumsum(self.sizes)])
            for a, (Ua, Va) in enumerate(self.groups):
                for b in range(a, len(self.groups)):
                    Ub, Vb = self.groups[b]
                    G[off[a] : off[a + 1], off[b] : off[b + 1]] = np.kron(Ua.T @ Ub, Va.T @ Vb)
            G.flat[:: self.N + 1] += PINV_RTOL * float(G.diagonal().max())
            # G's upper triangle is the lower one of Gᵀ, which is in Fortran order: factored
            # in place (G itself would be copied, N² more floats)
            L, info = scipy.linalg.lapack.dpotrf(G.T, lower=1, overwrite_a=1, clean=0)
            if info != 0:
                raise np.linalg.LinAlgError(f"the span's Gram lost positive definiteness ({info})")
            self._chol = L
        return self._chol

    def solve(self, b: np.ndarray) -> np.ndarray:
        """c = (G + δI)⁻¹ b (`_dense`) up to DENSE_MAX coordinates: for b = Bᵀw in G's range,
        bᵀc = Σ_v (b·v)²/(λ_v + δ) over G's eigenpairs, and since (b·v)² ≤ λ_v‖w‖² it differs
        from bᵀG⁺b only by w's energy along directions of S whose Gram eigenvalue is ≲ δ
        (those a pseudo-inverse's cut at δ would drop or keep whole). Beyond, conjugate
        gradients: NaN where they did not reach CG_RTOL in CG_MAXITER steps (the projections
        built on it are then not known, and say so)."""
        if self.N == 0:
            return np.zeros_like(b)
        if self.N <= DENSE_MAX:
            return scipy.linalg.cho_solve((self._dense(), True), b, check_finite=False)
        if b.ndim == 2:
            return np.stack([self.solve(col) for col in b.T], axis=1)
        c, converged = _cg(self.gram_apply, b)
        return c if converged else np.full_like(c, np.nan)

    def project(self, W: np.ndarray) -> np.ndarray:
        """P_S W."""
        if self.N == 0:
            return np.zeros_like(W)
        return self.matrix(self.solve(self.coefficients(W)))

    def norm(self, W: np.ndarray) -> float:
        """‖P_S W‖_F = √(bᵀG⁺b)."""
        return float(self.norms([W])[0])

    def norms(self, Ws) -> np.ndarray:
        """‖P_S W‖_F for each W of `Ws`, with one solve for all (the factor is read once)."""
        if self.N == 0 or not len(Ws):
            return np.zeros(len(Ws))
        b = np.stack([self.coefficients(W) for W in Ws], axis=1)
        bGb = np.einsum("nk,nk->k", b, self.solve(b))
        return np.where(np.isfinite(bGb), np.sqrt(np.maximum(bGb, 0.0)), np.nan)


def _cg(apply, b: np.ndarray) -> tuple[np.ndarray, bool]:
    """Conjugate gradients on the PSD system G c = b (b in its range; from c = 0 the iterates
    stay in the range, Hestenes & Stiefel 1952): (c, whether ‖G c − b‖ ≤ CG_RTOL·‖b‖)."""
    x = np.zeros_like(b)
    r = b.copy()
    p = r.copy()
    rr = r @ r
    stop = (CG_RTOL * np.linalg.norm(b)) ** 2
    for _ in range(CG_MAXITER):
        if rr <= stop:
            return x, True
        Gp = apply(p)
        pGp = p @ Gp
        if pGp <= 0:
            return x, bool(rr <= stop)
        a = rr / pGp
        x += a * p
        r -= a * Gp
        rr, rr_old = r @ r, rr
        p = r + (rr / rr_old) * p
    return x, bool(rr <= stop)


@dataclass(frozen=True)
class Baseline:
    """A matrix compared with W^mm on the same constraints (or, for "shuffled", the head
    compared with the SVM of shuffled selections). satisfied: share of ⟨A_j, B⟩ > 0."""

    kind: str  # "random" | "shuffled" | "other"
    label: str
    cos: float
    cos_span: float
    satisfied: float


@dataclass(frozen=True)
class HeadAudit:
    coverage: float  # kept / query rows
    alpha: list  # [i] (T_i,) selected key per row, −1: not kept / no query
    cos: float
    cos_span: float
    span_fraction: float  # ‖P_S W‖ / ‖W‖
    svm: object  # PairSolution (attsvm.pairsvm) of the Frobenius Att-SVM
    n_constraints: int
    n_queries: int = 0
    n_kept: int = 0
    span_dim: int = 0  # coordinates of S before the pseudo-inverse (≥ dim S)
    margins_head: dict = field(default_factory=dict)  # quantile → margin of W_h·‖W^mm‖/‖W_h‖
    margins_svm: dict = field(default_factory=dict)  # quantile → margin of W^mm (min 1)
    ranks: dict = field(default_factory=dict)  # "head" | "svm" | "svm_nuc" → rank
    energy: dict = field(default_factory=dict)  # share of σ² in the head-rank top
    svm_nuc: object = None
    baselines: tuple | None = None

    def baseline_range(self) -> tuple[float, float] | None:
        """(min, max) of the baselines' cos_span, or None."""
        v = [b.cos_span for b in self.baselines or () if np.isfinite(b.cos_span)]
        return (min(v), max(v)) if v else None


def _cosines(W, Wmm, nS: float) -> tuple[float, float, float]:
    """cos, cos_span and ‖P_S W‖/‖W‖ of W against Wmm, from nS = ‖P_S W‖ (`Span.norms`)."""
    nW, nM = np.linalg.norm(W), np.linalg.norm(Wmm)
    inner = float(np.sum(W * Wmm))
    cos = inner / (nW * nM) if nW > 0 and nM > 0 else np.nan
    cos_span = inner / (nS * nM) if nS > 0 and nM > 0 else np.nan
    return cos, cos_span, (nS / nW if nW > 0 else np.nan)


def _spectrum(W: np.ndarray, k: int) -> tuple[int, float]:
    from .metrics import numerical_rank

    s = np.linalg.svd(W, compute_uv=False)
    return numerical_rank(W), float(np.sum(s[:k] ** 2) / np.sum(s**2)) if s[0] > 0 else np.nan


WS_MAX = 60_000  # constraints up to which "auto" here uses the working-set LDP (see `solve`)


def solve(c: Constraints, norm: str = "fro", solver: str = "auto"):
    """The Att-SVM of constraints `c` (`attsvm.pairsvm.solve_pairs`). "auto" here: the exact
    LDP where `pairsvm` picks it, the LDP by constraint generation ("ws") up to WS_MAX
    constraints (layer-0 inputs are low rank and their constraints largely redundant, where the
    matrix-free Newton stalls), else `pairsvm`'s choice."""
    from .pairsvm import pick_solver, solve_pairs

    if solver == "auto" and norm == "fro" and c.m <= WS_MAX:
        d, d2 = c.D.shape[1], c.Z.shape[1]
        if pick_solver(c.m, d, d2, c.Z.shape[0], norm) != "ldp":
            solver = "ws"
    return solve_pairs(c.D, c.Z, c.query, norm, solver=solver)


def audit_attention(
    keys,
    queries,
    W,
    attention,
    *,
    tau: float = 0.5,
    query_rows=None,
    causal: bool = False,
    baselines: bool = False,
    seed: int = 0,
    others=None,
    n_random: int = 4,
    n_shuffled: int = 2,
    nuclear: bool = False,
    solver: str = "auto",
) -> HeadAudit:
    """Audit one head (module docstring). `others`: {label: (d, d2) matrix} of other heads on
    the same inputs, used as baselines when `baselines`. Random baselines: Gaussian matrices
    of the head's numerical rank; shuffled: each kept query's α replaced by a uniformly drawn
    other allowed key, the head against that SVM."""
    W = np.asarray(W, dtype=np.float64)
    data = _check_inputs(keys, queries, attention, query_rows)
    keys = [k for k, _, _, _ in data]
    queries = [q for _, q, _, _ in data]
    if W.shape != (keys[0].shape[1], queries[0].shape[1]):
        raise ValueError(f"W must be {(keys[0].shape[1], queries[0].shape[1])}, got {W.shape}")
    rows = None if query_rows is None else [r for *_, r in data]
    alpha, n_queries = select([a for _, _, a, _ in data], tau=tau, query_rows=rows, causal=causal)
    n_kept = int(sum((a >= 0).sum() for a in alpha))
    cons = assemble(keys, queries, alpha, causal=causal)
    span = Span(cons, by_sequence=not causal)
    sol = solve(cons, solver=solver) if cons.m else None
    Wmm = None if sol is None or not sol.feasible else sol.W
    nS = span.norm(W) if Wmm is not None else float("nan")
    stats = _against_svm(W, Wmm, cons, nS, nuclear=nuclear)
    base = None
    if baselines and Wmm is not None:
        draws = dict(seed=seed, n_random=n_random, n_shuffled=n_shuffled, solver=solver)
        inputs = (keys, queries, alpha, causal)
        rank = stats["ranks"]["head"]
        base = _baselines(W, nS, Wmm, cons, span, inputs, others or {}, rank, draws)
    counts = dict(n_constraints=cons.m, n_queries=int(n_queries), n_kept=n_kept)
    cov = n_kept / n_queries if n_queries else float("nan")
    return HeadAudit(
        coverage=cov, alpha=alpha, svm=sol, span_dim=span.N, baselines=base, **counts, **stats
    )


def _against_svm(W, Wmm, cons: Constraints, nS: float, *, nuclear: bool) -> dict:
    """cos, cos_span, span_fraction, margin quantiles, ranks, energies and the nuclear SVM of
    head W (nS = ‖P_S W‖) against its Att-SVM Wmm (NaN and empty where Wmm is None):
    `HeadAudit` fields."""
    nan = float("nan")
    out = dict(
        cos=nan,
        cos_span=nan,
        span_fraction=nan,
        margins_head={},
        margins_svm={},
        ranks={},
        energy={"head": 1.0},
        svm_nuc=None,
    )
    r_head, _ = _spectrum(W, 1)
    out["ranks"]["head"] = r_head
    if Wmm is None:
        return out
    out["cos"], out["cos_span"], out["span_fraction"] = _cosines(W, Wmm, nS)
    scale = np.linalg.norm(Wmm) / np.linalg.norm(W)
    bh, bm = cons.margins(W) * scale, cons.margins(Wmm)
    out["margins_head"] = {q: float(np.quantile(bh, q)) for q in QUANTILES}
    out["margins_svm"] = {q: float(np.quantile(bm, q)) for q in QUANTILES}
    out["ranks"]["svm"], out["energy"]["svm"] = _spectrum(Wmm, r_head)
    if nuclear:
        sol_nuc = solve(cons, "nuc")
        out["svm_nuc"] = sol_nuc
        if sol_nuc is not None and sol_nuc.feasible:
            out["ranks"]["svm_nuc"], out["energy"]["svm_nuc"] = _spectrum(sol_nuc.W, r_head)
    return out


def _baselines(W, nS, Wmm, cons, span, inputs, others, rank, draws) -> tuple:
    """The baselines (`audit_attention`): `rank`-r Gaussian matrices and `others` against
    Wmm on `cons`; W (nS = ‖P_S W‖) against the SVM of shuffled selections. inputs: (keys,
    queries, alpha, causal); draws: seed, n_random, n_shuffled, solver."""
    rng = np.random.default_rng(draws["seed"])
    out = []
    d, d2 = W.shape
    sat = lambda c, B: float(np.mean(c.margins(B) > 0))
    labeled = [
        (
            "random",
            f"random rank {rank} #{k + 1}",
            rng.standard_normal((d, rank)) @ rng.standard_normal((rank, d2)),
        )
        for k in range(draws["n_random"])
    ]
    labeled += [
        ("other", str(label), np.asarray(B, dtype=np.float64)) for label, B in others.items()
    ]
    for (kind, label, B), nB in zip(labeled, span.norms([B for *_, B in labeled]), strict=True):
        cos, cs, _ = _cosines(B, Wmm, nB)
        out.append(Baseline(kind, label, cos, cs, sat(cons, B)))
    keys, queries, alpha, causal = inputs
    for k in range(draws["n_shuffled"]):
        c2 = assemble(keys, queries, _shuffle(alpha, rng, causal), causal=causal)
        sol = solve(c2, solver=draws["solver"])
        if sol is None or not sol.feasible:
            label, cos, cs = f"shuffled #{k + 1} (infeasible)", np.nan, np.nan
        else:
            label = f"shuffled #{k + 1}"
            # by sequence, a sentence's differences span the same space whichever token is
            # selected, and the kept queries are the same: the same S
            nW = Span(c2, by_sequence=False).norm(W) if causal else nS
            cos, cs, _ = _cosines(W, sol.W, nW)
        out.append(Baseline("shuffled", label, cos, cs, sat(c2, W)))
    return tuple(out)


def _shuffle(alpha, rng, causal: bool) -> list:
    """Each kept α_t replaced by a uniformly drawn other allowed key (s ≤ t if causal)."""
    shuffled = []
    for a in alpha:
        b = a.copy()
        for t in np.flatnonzero(a >= 0):
            n_allowed = t + 1 if causal else a.size
            s = int(rng.integers(n_allowed - 1))
            b[t] = s + (s >= a[t])
        shuffled.append(b)
    return shuffled
