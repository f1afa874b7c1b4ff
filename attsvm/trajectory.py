"""The record of a GD run (or a batch of runs): `Trajectory`.

Entries are recorded after 0, r, 2r, …, steps iterations (r = record_every); the derived
quantities (selection α, saturation, singular values) are the ones arXiv 2308.16898 §3-§4
plot against the iteration count.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

# Non-selected softmax mass below which GD's direction stops moving in float64
# (docs/followups.md §4b). The authors' loop (plain autodiff, ‖∇L‖ + 2⁻⁵²) loses the selected
# token's gradient term from ~1e-13 on and freezes; the exact (centred, ε = 0) default keeps
# converging until the non-selected weights underflow.
SATURATION_TOL = 1e-13
UNDERFLOW_TOL = 1e-300


def saturation_tol_for(*, centred: bool, eps: float) -> float:
    """The mass at which a run with these gradient settings stops: UNDERFLOW_TOL for the
    exact gradient (centred, ε = 0), SATURATION_TOL otherwise."""
    return UNDERFLOW_TOL if centred and eps == 0 else SATURATION_TOL


def saturation_message(tol: float) -> str:
    """What `Trajectory.saturated_at` means for a run whose threshold is `tol`."""
    if tol < 1e-200:
        return (
            f"the non-selected softmax mass fell below {tol:.0e}: those weights underflow "
            "in float64, the gradient is then exactly 0 and W stops moving — its "
            "direction is as converged as float64 can make it."
        )
    return (
        f"the non-selected mass fell below {tol:.0e}, so with the authors' normalizer "
        "‖∇L‖ + 2⁻⁵² (their loop; also the default for nonlinear heads) the step shrinks "
        "to nothing, and with plain autodiff the selected token's term is rounding noise. "
        "W(k)'s direction is then **frozen, not converged** — correlations after that "
        "measure where GD stopped. With the linear head the default exact gradient keeps "
        "converging."
    )


@dataclass(frozen=True, eq=False)
class Trajectory:
    """Records of GD after steps 0, r, 2r, …, `steps` (one run, or a batch of runs).

    Attributes (a batch adds a leading run axis B to every array):
        W: (k, d, d) the combined matrix W(j) (K Qᵀ for the (K, Q)-parameterization).
        probs: (k, n, T) softmax weights s_it at W(j) ((k, n, T, T) for sequence modes:
            query k's weights over tokens).
        loss: (k,) the risk L(W(j)) without the ridge.
        grad_norm: (k,) ‖∇‖ of the objective GD followed, at W(j).
        steps: (k,) iteration numbers.
        K, Q: (d, m) final factors (param="KQ"), else None.
        final_params: W (d, d) or the pair (K, Q) after the last step: pass it as `init`
            to continue the run exactly where it stopped.
        overflow_at: the last finite step, where GD was stopped because the next update
            (or the objective at the state it led to) was not finite; that state is kept and
            every later record repeats it. -1 if nothing overflowed.
        settings: the call's settings; backend: the JAX platform that ran it.
        v: (k, d) the head v(j) when it was trained too (train_v=True), else None;
            `final_v` is the last one (pass it as `init_v` to continue).
    """

    W: np.ndarray
    probs: np.ndarray
    loss: np.ndarray
    grad_norm: np.ndarray
    steps: np.ndarray
    K: np.ndarray | None
    Q: np.ndarray | None
    overflow_at: np.ndarray
    settings: dict = field(repr=False)
    backend: str = "cpu"
    batched: bool = False
    v: np.ndarray | None = None

    # -- batches ------------------------------------------------------------------------
    def __len__(self):
        if not self.batched:
            raise TypeError("a single run has no len(); Trajectory.batched is False")
        return self.W.shape[0]

    def __getitem__(self, b):
        """Run b of a batch (a single-run Trajectory), or, for a slice, a smaller batch."""
        if not self.batched:
            raise TypeError("index a batch of runs (from train_batch), not a single run")
        return self.runs(b)

    def runs(self, index) -> "Trajectory":
        """The runs at `index` (an int: one run; a slice or index array: a batch)."""
        per_run = ("W", "probs", "loss", "grad_norm", "K", "Q", "overflow_at", "v")
        return replace(
            self,
            batched=not isinstance(index, (int, np.integer)),
            **{k: None if getattr(self, k) is None else getattr(self, k)[index] for k in per_run},
        )

    @classmethod
    def from_records(
        cls,
        *,
        W,
        probs,
        loss,
        grad_norm,
        steps,
        overflow_at=-1,
        saturation_tol: float = UNDERFLOW_TOL,
    ) -> "Trajectory":
        """A single run from recorded arrays (e.g. a run assembled chunk by chunk); the
        default threshold is the library default's (exact gradient)."""
        return cls(
            W=W,
            probs=probs,
            loss=loss,
            grad_norm=grad_norm,
            steps=steps,
            K=None,
            Q=None,
            overflow_at=np.asarray(overflow_at),
            settings={"saturation_tol": saturation_tol},
        )

    # -- derived ---------------------------------------------------------------------------
    @property
    def final_params(self):
        if self.K is None:
            return self.W[..., -1, :, :]
        return (self.K, self.Q)

    @property
    def final_v(self):
        """The trained head after the last step (None when v was fixed)."""
        return None if self.v is None else self.v[..., -1, :]

    @property
    def alpha(self) -> np.ndarray:
        """The selection at the end: argmax_t of the final softmax, (n,) (or (B, n))."""
        return np.take(self.probs, -1, axis=int(self.batched)).argmax(-1)

    @cached_property
    def selected_prob(self) -> np.ndarray:
        """max_t s_it(j): (k, n) ((k, n, K) in sequence modes)."""
        return self.probs.max(-1)

    @cached_property
    def tail_mass(self) -> np.ndarray:
        """Σ_{t ≠ argmax} s_it(j), summed over the other tokens only (neither 1 − max nor
        sum − max: both round every mass below 1e-16 to 0)."""
        P = self.probs
        top = np.argmax(P, axis=-1)[..., None]
        return np.sum(np.where(np.arange(P.shape[-1]) == top, 0.0, P), axis=-1)

    @property
    def saturation_tol(self) -> float:
        """The threshold of `saturated_at` (settings' `saturation_tol`; 1e-13 if unset)."""
        return float(self.settings.get("saturation_tol", SATURATION_TOL))

    @cached_property
    def saturated_at(self) -> np.ndarray:
        """Per sequence (and query), the first recorded step at which the non-selected
        softmax mass fell below the run's `saturation_tol` (`saturation_tol_for` its
        gradient settings): 1e-300 for the exact default, where the weights underflow and
        W stops; 1e-13 for the authors' gradient, where float64 cannot resolve the selected
        token's term and the direction freezes, not converged (`saturation_message`).
        -1 where it never happened. Shape (n,) (or (B, n), (…, n, K)).
        A causal query that can attend to one token only (query 0) has nothing to saturate: -1.
        """
        sat = self.tail_mass < self.saturation_tol
        axis = 1 if self.batched else 0
        first = np.argmax(sat, axis=axis)
        hit = np.any(sat, axis=axis)
        out = np.where(hit, self.steps[first], -1)
        if self.settings.get("queries") == "causal":
            out[..., 0] = -1
        return out

    @cached_property
    def singular_values(self) -> np.ndarray:
        """σ(W(j)): (k, d), descending (computed on first use)."""
        return np.linalg.svd(self.W, compute_uv=False)

    @property
    def norms(self) -> np.ndarray:
        """‖W(j)‖_F: (k,)."""
        return np.linalg.norm(self.W, axis=(-2, -1))
