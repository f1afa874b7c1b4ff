"""Rank from small initialization: the measures of a (K, Q) run (docs/staircase.md).

For GD on K, Q ∈ R^{d×m} (W = K Qᵀ) started at K₀, Q₀ (`training.scaled_init`, scale α):

- ΔW(k) = K(k)Q(k)ᵀ − K₀Q₀ᵀ, its singular values σ₁ ≥ σ₂ ≥ … and its stable rank
  ‖ΔW‖_F² / ‖ΔW‖₂² (arXiv 2306.07042 plots both);
- the take-off step of σ_j: the first recorded step at which σ_j(ΔW) ≥ `TAKEOFF_FRAC`·σ₁(ΔW)
  at the end of the run (NaN if never): a scale-free "this direction has been learned";
- rescaled time t / log(1/α), t = η k the gradient-flow time of k steps of step size η
  (the plateaus of arXiv 2306.07042 line up in it as α → 0; NaN for α ≥ 1);
- the balancedness gap (‖K‖_F² + ‖Q‖_F²)/2 − ‖K Qᵀ‖_* ≥ 0 (‖ABᵀ‖_* ≤ ‖A‖_F‖B‖_F ≤ the mean
  of squares) and the imbalance ‖KᵀK − QᵀQ‖_F, at `segments` checkpoints. With weight decay λ,
  gradient flow gives d/dt (KᵀK − QᵀQ) = −2λ (KᵀK − QᵀQ) exactly (docs/staircase.md §3), so
  the imbalance decays as e^{−2ληk}, and so does the gap once K Qᵀ has lower rank than
  the factors (`predicted_rates`);
- which selection the run reached (`studies.classify_runs` with the nuclear-norm Att-SVM)
  and the rank of that selection's nuclear-norm SVM.

The trajectory records W every `record_every` steps but K, Q only at its end, so a run is
cut into `segments` calls of `train_batch`, each continuing exactly from the previous one's
final (K, Q) (plain and normalized GD keep no state between steps).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import fastsvm
from .limits import MAX_D
from .metrics import RANK_RTOL, numerical_rank
from .problems import check_choice, check_float, check_int
from .studies import classify_runs
from .training import INIT_KINDS, MAX_INIT_SCALE, scaled_init, train_batch

TAKEOFF_FRAC = 0.1  # σ_j has taken off once it reaches this share of the final σ₁(ΔW)
STAIR_RTOL = 1e-2  # ΔW is "numerically rank r" when σ_{r+1}/σ₁ < this
RULES = ("gd", "ngd")  # stateless rules: a run cut into segments is the same run


@dataclass(frozen=True, eq=False)
class StairRuns:
    """Measures of B runs (leading axis B).

    Attributes:
        steps: (k,) recorded steps; W: (B, k, d, d) K Qᵀ; loss: (B, k) risk without the ridge.
        sv: (B, k, d) singular values of ΔW(k); stable_rank: (B, k).
        rescaled: (k,) t / log(1/α), t = η·step (NaN for α ≥ 1).
        takeoff: (B, d) take-off step of each σ_j (NaN: not taken off).
        checkpoints: (c,) steps with factor norms; sq_norm: (B, c) ‖K‖² + ‖Q‖²;
        nuclear: (B, c) ‖K Qᵀ‖_*; gap: (B, c) sq_norm/2 − nuclear; imbalance: (B, c).
        K, Q: final factors (B, d, m); alpha: (B, n) final selections.
        settings: what produced them.
    """

    steps: np.ndarray
    W: np.ndarray
    loss: np.ndarray
    sv: np.ndarray
    stable_rank: np.ndarray
    rescaled: np.ndarray
    takeoff: np.ndarray
    checkpoints: np.ndarray
    sq_norm: np.ndarray
    nuclear: np.ndarray
    gap: np.ndarray
    imbalance: np.ndarray
    K: np.ndarray
    Q: np.ndarray
    alpha: np.ndarray
    settings: dict

    @property
    def rel_gap(self) -> np.ndarray:
        """gap / ‖K Qᵀ‖_* (B, c)."""
        return self.gap / np.maximum(self.nuclear, np.finfo(float).tiny)

    def ratio(self, j: int = 1) -> np.ndarray:
        """σ_{j+1}/σ₁ of ΔW, (B, k) (0 where ΔW = 0)."""
        s1 = self.sv[..., 0]
        return np.divide(self.sv[..., j], s1, out=np.zeros_like(s1), where=s1 > 0)

    def ratio_at(self, step: int, j: int = 1) -> np.ndarray:
        """σ_{j+1}/σ₁ of ΔW at the last record at or before `step`, (B,)."""
        i = int(np.searchsorted(self.steps, step, side="right")) - 1
        return self.ratio(j)[:, max(i, 0)]


def stable_rank(A) -> np.ndarray:
    """‖A‖_F² / ‖A‖₂² over the last two axes (0 for the zero matrix)."""
    s = np.linalg.svd(np.asarray(A, float), compute_uv=False)
    top = s[..., 0] ** 2
    return np.divide(np.sum(s * s, -1), top, out=np.zeros_like(top), where=top > 0)


def takeoff_steps(steps, sv, frac: float = TAKEOFF_FRAC) -> np.ndarray:
    """First step with σ_j ≥ frac·σ₁(final), per j: sv (…, k, d) → (…, d) (NaN: never)."""
    sv = np.asarray(sv, float)
    level = frac * sv[..., -1:, :1]  # (…, 1, 1)
    hit = (sv >= level) & (level > 0)
    first = np.argmax(hit, axis=-2)
    return np.where(hit.any(-2), np.asarray(steps, float)[first], np.nan)


def rescaled_time(steps, lr: float, init_scale: float) -> np.ndarray:
    """t / log(1/α) with t = η·step (NaN for α ≥ 1, where log(1/α) ≤ 0)."""
    t = np.asarray(steps, float) * lr
    return t / math.log(1.0 / init_scale) if init_scale < 1 else np.full(t.shape, np.nan)


def factor_measures(K, Q):
    """(‖K‖² + ‖Q‖², ‖K Qᵀ‖_*, gap, ‖KᵀK − QᵀQ‖_F) for stacks of factors (…, d, m)."""
    K, Q = np.asarray(K, float), np.asarray(Q, float)
    sq = np.sum(K * K, (-2, -1)) + np.sum(Q * Q, (-2, -1))
    nuc = np.sum(np.linalg.svd(K @ np.swapaxes(Q, -1, -2), compute_uv=False), -1)
    D = np.swapaxes(K, -1, -2) @ K - np.swapaxes(Q, -1, -2) @ Q
    return sq, nuc, sq / 2 - nuc, np.linalg.norm(D, axis=(-2, -1))


def _check_segments(steps, segments, record_every) -> tuple[int, int]:
    """`steps` and `segments`, checked: equal segments, each a multiple of `record_every`."""
    steps = check_int("steps", steps, 1, 1_000_000)
    segments = check_int("segments", segments, 1, steps)
    if steps % segments or (steps // segments) % record_every:
        raise ValueError(
            f"`segments` must cut `steps` ({steps}) into equal parts that are "
            f"multiples of `record_every` ({record_every}); got {segments}"
        )
    return steps, segments


def _train_segments(probs, init, segments: int, seg: int, kw: dict):
    """`segments` calls of `train_batch` of `seg` steps each, each starting where the last
    ended: (W (B, k, d, d), loss (B, k), [K₀, K at each checkpoint], [Q₀, …], the last
    trajectory)."""
    K0 = np.stack([k for k, _ in init])
    Q0 = np.stack([q for _, q in init])
    Ws, losses, Ks, Qs = [], [], [K0], [Q0]
    params = init
    for j in range(segments):
        tr = train_batch(probs, steps=seg, init=params, **kw)
        Ws.append(tr.W if j == 0 else tr.W[:, 1:])
        losses.append(tr.loss if j == 0 else tr.loss[:, 1:])
        Ks.append(tr.K)
        Qs.append(tr.Q)
        params = list(zip(tr.K, tr.Q, strict=True))
    return np.concatenate(Ws, 1), np.concatenate(losses, 1), Ks, Qs, tr


def run_staircase(
    probs,
    *,
    init_scale: float,
    init_kind: str = "gaussian",
    weight_decay: float | None = None,
    steps: int = 2000,
    lr: float = 0.5,
    optimizer: str = "gd",
    seed: int = 0,
    record_every: int = 10,
    segments: int = 1,
    m: int | None = None,
) -> StairRuns:
    """GD on (K, Q) from `scaled_init` for B problems of one shape, with the measures above.

    Args:
        probs: problems (as `train_batch`); init_scale α, init_kind, seed: the start
            (`training.scaled_init`, run b drawn with index b); weight_decay: λ (None: the
            vanishing ridge); steps, lr, record_every, m: as `train_batch`;
        optimizer: "gd" (plain) or "ngd" (normalized);
        segments: number of checkpoints of the factor norms (must divide steps/record_every).

    Long because the record it returns names each of its measures and settings.
    """
    probs = list(probs)
    check_choice("optimizer", optimizer, RULES)
    steps, segments = _check_segments(steps, segments, record_every)
    seg = steps // segments
    m = probs[0].d if m is None else m
    init = [
        scaled_init(p, init_scale=init_scale, init_kind=init_kind, m=m, seed=seed, index=b)
        for b, p in enumerate(probs)
    ]
    kw = dict(
        param="KQ",
        lr=lr,
        optimizer=optimizer,
        normalized=optimizer == "ngd",
        m=m,
        weight_decay=weight_decay,
        record_every=record_every,
    )
    W, loss, Ks, Qs, tr = _train_segments(probs, init, segments, seg, kw)
    K0, Q0 = Ks[0], Qs[0]
    rec = np.arange(0, steps + 1, record_every)
    dW = W - (K0 @ np.swapaxes(Q0, -1, -2))[:, None]
    sv = np.linalg.svd(dW, compute_uv=False)
    sq, nuc, gap, imb = factor_measures(np.stack(Ks, 1), np.stack(Qs, 1))
    return StairRuns(
        steps=rec,
        W=W,
        loss=loss,
        sv=sv,
        stable_rank=stable_rank(dW),
        rescaled=rescaled_time(rec, lr, init_scale),
        takeoff=takeoff_steps(rec, sv),
        checkpoints=np.arange(0, steps + 1, seg),
        sq_norm=sq,
        nuclear=nuc,
        gap=gap,
        imbalance=imb,
        K=tr.K,
        Q=tr.Q,
        alpha=tr.alpha,
        settings=dict(
            init_scale=init_scale,
            init_kind=init_kind,
            weight_decay=weight_decay,
            steps=steps,
            lr=lr,
            optimizer=optimizer,
            seed=seed,
            record_every=record_every,
            segments=segments,
            m=m,
        ),
    )


def verdicts(probs, runs: StairRuns) -> list[dict]:
    """Per run: the selection's class (`studies.classify_runs`, nuclear-norm Att-SVM: kind
    "global" / "local" / "feasible" / "infeasible"), the rank of its nuclear-norm SVM
    (`RANK_RTOL`; None if infeasible), ΔW's final numerical rank (`STAIR_RTOL`) and stable
    rank, and K Qᵀ's final rank (`RANK_RTOL`)."""
    probs = list(probs)
    alphas = list(runs.alpha)
    rows = classify_runs(probs, alphas, "nuc")
    svm = fastsvm.solve_many(probs, alphas, "nuc")
    out = []
    for b, r in enumerate(rows):
        feas = bool(svm["feasible"][b])
        out.append(
            dict(
                r,
                svm_rank=numerical_rank(svm["W"][b]) if feas else None,
                delta_rank=int(np.sum(runs.sv[b, -1] > STAIR_RTOL * runs.sv[b, -1, 0])),
                stable_rank=float(runs.stable_rank[b, -1]),
                rank=numerical_rank(runs.W[b, -1], rtol=RANK_RTOL),
                loss=float(runs.loss[b, -1]),
            )
        )
    return out


def decay_rate(steps, values, lo: float = 1e-12, hi: float = 1e-2) -> float:
    """−slope of log(values) against steps, least squares over the points in [lo, hi]
    (NaN with fewer than 3 such points): the measured exponential decay rate per step."""
    steps, values = np.asarray(steps, float), np.asarray(values, float)
    ok = (values >= lo) & (values <= hi)
    if ok.sum() < 3:
        return float("nan")
    return float(-np.polyfit(steps[ok], np.log(values[ok]), 1)[0])


def predicted_rates(lr: float, weight_decay: float) -> dict:
    """Decay rates per GD step predicted from gradient flow (docs/staircase.md §3).

    Gradient flow on L(K Qᵀ) + λ/2 (‖K‖² + ‖Q‖²) gives d/dt (KᵀK − QᵀQ) = −2λ (KᵀK − QᵀQ),
    so the imbalance decays at 2λη per step of size η. The gap splits into factor mass that
    K Qᵀ does not use (when its rank is below m; first order in the imbalance: rate 2λη) and
    mismatched singular values in the used directions (second order: 4λη); the slower one,
    2λη, is the prediction. GD's own per-step factor on the unused part is (1 − ηλ)²:
    `gap_gd` = −2 log(1 − ηλ)."""
    lam, eta = float(weight_decay), float(lr)
    return dict(
        imbalance=2 * lam * eta,
        gap=2 * lam * eta,
        gap_used=4 * lam * eta,
        gap_gd=-2 * math.log1p(-lam * eta) if lam * eta < 1 else float("nan"),
    )


STUDY_POINTS = 200  # records of a page run
STUDY_SEGMENTS = 50  # factor-norm checkpoints of a page run


@dataclass(frozen=True, kw_only=True)
class StudySettings:
    """The "Rank from small init" view's run (hashable: the app's cache key).

    init_scale α, init_kind, seed: the start (`training.scaled_init`); weight_decay: λ
    (None: the vanishing ridge; 0: no ridge at all); steps (a multiple of `STUDY_POINTS`),
    lr, optimizer ("gd" plain or "ngd" normalized): the GD run; top: how many σ_j(ΔW) the
    spectrum keeps.
    """

    init_scale: float
    init_kind: str = "gaussian"
    weight_decay: float | None = None
    steps: int = 2000
    lr: float = 0.5
    optimizer: str = "gd"
    seed: int = 0
    top: int = 4

    def __post_init__(self):
        steps = check_int("steps", self.steps, STUDY_POINTS, 100_000)
        if steps % STUDY_POINTS:
            raise ValueError(f"`steps` must be a multiple of {STUDY_POINTS}; got {steps}")
        wd = self.weight_decay
        fields = dict(
            init_scale=check_float(
                "init_scale", self.init_scale, 0.0, MAX_INIT_SCALE, lo_open=True
            ),
            init_kind=check_choice("init_kind", self.init_kind, INIT_KINDS),
            weight_decay=None if wd is None else check_float("weight_decay", wd, 0.0, 2.0),
            steps=steps,
            lr=check_float("lr", self.lr, 0.0, 1e3, lo_open=True),
            optimizer=check_choice("optimizer", self.optimizer, RULES),
            seed=check_int("seed", self.seed, 0, 2**63 - 1),
            top=check_int("top", self.top, 1, MAX_D),
        )
        for k, v in fields.items():  # plain ints and floats: equal settings, one cache key
            object.__setattr__(self, k, v)

    @property
    def record_every(self) -> int:
        """Steps between records: `STUDY_POINTS` records per run."""
        return self.steps // STUDY_POINTS


def study(prob, s: StudySettings) -> dict:
    """One run with everything the "Rank from small init" view shows, as tidy frames.

    Returns: dict(spectrum: step, rescaled, j, sigma (the top `s.top` σ_j(ΔW)); loss: step,
    rescaled, loss, stable_rank; gap: step, sq_half, nuclear, gap, rel_gap, imbalance;
    takeoff: j, step (NaN: not taken off); verdict: `verdicts`' row; predicted: the gap's
    predicted rate per step (None without weight decay); runs: the `StairRuns`), from
    `STUDY_POINTS` records and `STUDY_SEGMENTS` checkpoints.

    Long because it builds the view's five tidy frames from the run, one after another.
    """
    r = run_staircase(
        [prob],
        init_scale=s.init_scale,
        init_kind=s.init_kind,
        weight_decay=s.weight_decay,
        steps=s.steps,
        lr=s.lr,
        optimizer=s.optimizer,
        seed=s.seed,
        record_every=s.record_every,
        segments=STUDY_SEGMENTS,
    )
    top = min(s.top, r.sv.shape[-1])
    k = len(r.steps)
    spec = pd.DataFrame(
        dict(
            step=np.repeat(r.steps, top),
            rescaled=np.repeat(r.rescaled, top),
            j=np.tile(np.arange(1, top + 1), k),
            sigma=r.sv[0, :, :top].reshape(-1),
        )
    )
    loss = pd.DataFrame(
        dict(step=r.steps, rescaled=r.rescaled, loss=r.loss[0], stable_rank=r.stable_rank[0])
    )
    gap = pd.DataFrame(
        dict(
            step=r.checkpoints,
            sq_half=r.sq_norm[0] / 2,
            nuclear=r.nuclear[0],
            gap=r.gap[0],
            rel_gap=r.rel_gap[0],
            imbalance=r.imbalance[0],
        )
    )
    take = pd.DataFrame(dict(j=np.arange(1, top + 1), step=r.takeoff[0, :top]))
    lam = s.weight_decay or 0.0
    return dict(
        spectrum=spec,
        loss=loss,
        gap=gap,
        takeoff=take,
        verdict=verdicts([prob], r)[0],
        predicted=predicted_rates(s.lr, lam)["gap"] if lam > 0 and s.optimizer == "gd" else None,
        runs=r,
    )
