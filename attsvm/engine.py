"""The compiled GD engine: one jitted program runs a whole batch of runs.

Normalized GD (arXiv 2308.16898 §2, Algorithm "normalized GD"; docs/theory.md §A.1):
    W ← W − η ∇L(W) / (‖∇L(W)‖_F + ε₀)                                   (param="W")
    K ← K − η ∇_K / (‖∇_K‖_F + ε₀),  Q ← Q − η ∇_Q / (‖∇_Q‖_F + ε₀)      (param="KQ")
with ε₀ = `eps` (`optimizers.DEFAULT_EPS`: 0 for the linear head; 2⁻⁵², the authors') and,
for (K, Q), the objective L(K Qᵀ) + ε (‖K‖_F² + ‖Q‖_F²), ε = `ridge`: exactly
`model.objective`, which the gradient tests check. Every other rule of `attsvm.optimizers`
(plain GD, Polyak steps, ℓp mirror descent, sign and spectral descent; docs/followups.md
§2, §4, §5) runs in the same engine:
the rule is static (one program each), its step size, p and ε traced. `centred=True`
differentiates the centred form of the attention (`model.outputs`), exact far into
saturation (docs/followups.md §4b): the default (`optimizers.DEFAULT_CENTRED`); a zero (or
subnormal) gradient takes no step, so ε₀ = 0 never divides by 0.

A loop over the steps whose body is the step `vmap`ped over runs, writing each record in
place. The step size, the ridge, p, ε and `record_every` are traced (a new value never
recompiles; the number of records and the rule are part of the program).

Overflow (docs/theory.md §A.3): a run stops at its last finite state and reports
the step; its records stay finite.

`head="stack"` runs a stack of attention layers (`hierarchy`, docs/hierarchy.md): params
are a tuple with one leaf per head (W, or a pair (K, Q)), so every rule acts on each head
by itself (ngd: each W^{l,h} by its own gradient's norm); records W (L, H, d, d) and the
attention of every layer and head.

`train_v=True` also trains the linear head: params are (attention params, v), v replaces
`data.v` in the head (`model.joint_objective`) and is one more leaf of the rule (its own
normalization for ngd/nmd, as the joint-training code of arXiv 2306.13596 and 2410.14581
does); records add v; Polyak's L* is then 0 (L → 0 along separating directions of both).
"""

from __future__ import annotations

from functools import partial

from . import hierarchy, model
from .model import Data, jax, jnp
from .optimizers import NORM_EPS, OPTIMIZERS, Hyper, _tree_norm, loss_gap, make_optimizer

__all__ = ["NORM_EPS", "RULES", "TraceCounter", "compile_count", "simulate", "simulate_split"]
RULES = {name: make_optimizer(name) for name in OPTIMIZERS}
SCALE_FREE = ("ngd", "nmd", "sign", "spectral")  # steps that use only ∇L's direction


class TraceCounter:
    """How often jit has traced a function: its Python body runs once per trace, never when
    a compiled program is reused, so each count is one program built (one per new static
    signature; the same program placed on another device compiles again without a trace).
    Public API only (JAX's own cache size is private)."""

    def __init__(self):
        self.count = 0

    def tick(self) -> None:
        self.count += 1


TRACES = TraceCounter()  # of `simulate`


def compile_count() -> int:
    """How many programs the engine has compiled in this process (one per new static
    signature: sizes after padding, head, loss, parameterization, number of records)."""
    return TRACES.count


# -- the compiled engine ------------------------------------------------------------------
_STATIC = ("rule", "param", "head", "loss", "centred", "n_records", "train_v", "value_and_grad")


def _record_buffers(model_of, params0, data, n_records: int, *, train_v: bool):
    """Zeroed buffers for `n_records` + 1 records of every run, (n_records + 1, B, ...) each,
    shaped by one record of `simulate`'s model."""

    def record_of(params, data):
        # a step's record from the objective alone (no gradient: tracing the whole step for
        # the shapes costs a cold call 0.17 s of its 1.2); ‖∇L‖ has exp(logscale)'s type
        aux = model_of(data)[0](params)[1]
        return _record(aux, jnp.exp(aux[3]), params, train_v=train_v)

    shapes = jax.eval_shape(jax.vmap(record_of), params0, data)
    return tuple(jnp.zeros((n_records + 1,) + a.shape, a.dtype) for a in shapes)


def _loop_body(k, c, *, vstep, data, record_every):
    """Step k of `simulate`'s loop: every run's step, its record written to slot ⌈k / r⌉."""
    params, state, prev, bad_at, bufs = c
    # the record step k − 1 wrote (its own: a run that rolled back has stopped), which
    # a rollback at step k records again
    prev_rec = tuple(
        jax.lax.dynamic_index_in_dim(b, (k + record_every - 2) // record_every, 0, keepdims=False)
        for b in bufs
    )
    (params, state, prev, bad_at), rec = vstep(params, state, prev, prev_rec, bad_at, data, k)
    slot = (k + record_every - 1) // record_every
    bufs = tuple(
        jax.lax.dynamic_update_index_in_dim(b, r, slot, 0) for b, r in zip(bufs, rec, strict=True)
    )
    return params, state, prev, bad_at, bufs


def _rolled_back(params, prev, bad_at):
    """The final parameters: a run that rolled back (bad_at ≥ 0) keeps `prev`, the others
    `params` (leading run axis B on every leaf)."""
    B = bad_at.shape[0]
    return jax.tree_util.tree_map(
        lambda a, b: jnp.where((bad_at >= 0).reshape((B,) + (1,) * (a.ndim - 1)), a, b),
        params,
        prev,
    )


@partial(jax.jit, static_argnames=_STATIC)
def simulate(
    params0,
    data: Data,
    hyper: Hyper,
    ridge,
    record_every,
    *,
    rule,
    param,
    head,
    loss,
    centred,
    n_records,
    train_v=False,
    value_and_grad=None,
):
    """Batched GD. params0 and data carry a leading run axis; returns per-run records.

    value_and_grad: None for the attention model's objective (`model.objective_and_records`,
    differentiated by JAX); else another model's, a module-level function (static: one
    program each) `value_and_grad(data, head, loss)` → (params → ((objective, (L, s, W,
    logscale)), ∇)) on one run's `data` (any NamedTuple of arrays): the next-token model
    (`attsvm.ntp.gd`) runs this way, the same loop, rules and records.

    rule: a name of `optimizers.OPTIMIZERS`, or a module-level `optimizers.Optimizer` of
    another model's (static: one program per rule; a switch between rules inside the step
    loop costs the default rule 10–30 %); hyper: its traced
    hyperparameters (lr, p, ε, the Polyak caps). `record_every` (and so `steps`) is traced,
    like `lr` and `ridge`, so a new step count with the same number of records reuses the
    program. The step and its overflow rollback are `_make_step`.

    One loop over the steps, each step the vmapped step of every run, the records written in
    place: step k writes its record to slot ⌈k / r⌉ (r = `record_every`), so slot j ends up
    with the record of step j·r, the last to write it, and the extra last step (n·r + 1 steps
    in all) records the final state. The step appears once in the program (as XLA's compile
    time asks), and the loop carries no record: a scan over records around a loop of r steps
    would carry each step's record and the previous one and select at the chunk's first
    step, 13 copies in XLA's loop body for the benchmark's W workload (5 of W's size, 2 of
    the softmax's) against 5 here (3 of W's size), with the same bits (docs/performance.md).

    Long because the objective, the step, the records' buffers and the loop are one program,
    and its closures read the traced settings.
    """
    TRACES.tick()  # a Python side effect: runs at trace time only

    model_of = partial(
        _model,
        hyper=hyper,
        ridge=ridge,
        rule=rule,
        param=param,
        head=head,
        loss=loss,
        centred=centred,
        train_v=train_v,
        value_and_grad=value_and_grad,
    )

    def run_step(params, state, prev, prev_rec, bad_at, data, k):
        step = _make_step(
            model_of(data)[1], data, hyper, rule=rule, head=head, loss=loss, train_v=train_v
        )
        return step(params, state, prev, prev_rec, bad_at, k)

    vstep = jax.vmap(run_step, in_axes=(0, 0, 0, 0, 0, 0, None))
    init = jax.vmap(_rule(rule).init)
    B = jax.tree_util.tree_leaves(params0)[0].shape[0]
    state0, bad0 = init(params0), jnp.full((B,), -1)
    bufs0 = _record_buffers(model_of, params0, data, n_records, train_v=train_v)

    carry0 = (params0, state0, params0, bad0, bufs0)
    body = partial(_loop_body, vstep=vstep, data=data, record_every=record_every)
    params, _, prev, bad_at, recs = jax.lax.fori_loop(0, n_records * record_every + 1, body, carry0)
    bad_at = jnp.where(bad_at >= n_records * record_every, -1, bad_at)
    final = _rolled_back(params, prev, bad_at)
    # Records come out record-major, (k, B, ...), as the loop writes them: a run-major layout
    # would cost XLA a transposing copy of the whole history (≈ 40% of a 2000-step call).
    return recs, final, bad_at


@partial(jax.jit, static_argnames=_STATIC + ("mesh",))
def simulate_split(params0, data: Data, hyper: Hyper, ridge, record_every, *, mesh, **static):
    """`simulate` with the run axis split over the devices of `mesh` (one axis, "runs"): one
    program, compiled once, each device running `simulate` on its own block of runs
    (`jax.shard_map`; the CPU client runs the blocks in parallel, one core each). Records
    come out sharded on their run axis (axis 1), final params and bad_at on axis 0.
    (`check_vma=False`: the loop's carry mixes per-block and replicated values; every output
    is per-block by construction.) A sharded `simulate` without shard_map did every run's
    work on each device here (docs/performance.md)."""
    runs, rep = jax.sharding.PartitionSpec("runs"), jax.sharding.PartitionSpec()
    body = partial(simulate, **static)
    return jax.shard_map(
        body,
        mesh=mesh,
        in_specs=(runs, runs, rep, rep, rep),
        out_specs=(jax.sharding.PartitionSpec(None, "runs"), runs, runs),
        check_vma=False,
    )(params0, data, hyper, ridge, record_every)


def _model(data, *, hyper, ridge, rule, param, head, loss, centred, train_v, value_and_grad):
    """One run's (objective, value_and_grad of it), each params → (objective, (L, s, W,
    logscale)): the attention model's (`model.objective_and_records`, differentiated by JAX)
    or the caller's `value_and_grad` (`simulate`)."""
    if value_and_grad is not None:
        vg = value_and_grad(data, head, loss)
        return (lambda params: vg(params)[0]), vg
    if head == "stack":  # L layers × H heads (`hierarchy`): params one leaf per head
        obj = partial(
            hierarchy.objective_and_records,
            data=data,
            ridge=ridge,
            param=param,
            loss_kind=loss,
            centred=centred,
        )
        return obj, jax.value_and_grad(obj, has_aux=True)
    # the scale-free rules (a step that only uses the gradient's direction) take the
    # gradient divided by the largest non-selected softmax weight: it stays representable
    # after the weights underflow (ngd/nmd only when exact, ε = 0; model.centred_outputs)
    scaled = False
    if centred and param == "W" and rule in SCALE_FREE and not train_v:
        scaled = hyper.eps == 0 if rule in ("ngd", "nmd") else True
    obj = partial(
        model.objective_and_records,
        data=data,
        ridge=ridge,
        param=param,
        head_kind=head,
        loss_kind=loss,
        centred=centred,
        scaled=scaled,
    )
    if train_v:
        obj = partial(model.joint_objective, objective=obj, data=data)
    return obj, jax.value_and_grad(obj, has_aux=True)


def _rule(rule):
    """The update rule named `rule`, or `rule` itself (an `optimizers.Optimizer`)."""
    return RULES[rule] if isinstance(rule, str) else rule


def _record(aux, gnorm, params, *, train_v: bool) -> tuple:
    """A step's record from the objective's records `aux` = (L, s, W, logscale) and ‖∇L‖:
    W, the softmax, the loss, ‖∇L‖, and the head when it is trained."""
    L, s, W, _ = aux
    return (W, s, L, gnorm) + ((params[1],) if train_v else ())


def _make_step(vg, data: Data, hyper: Hyper, *, rule, head, loss, train_v):
    """The engine's step for `vg` = value_and_grad of the objective (traced inside
    `simulate`, one run): (params, state, previous params, previous record, bad_at, k) →
    ((next params, state, params, bad_at), record)."""
    leaves = jax.tree_util.tree_leaves
    tmap = jax.tree_util.tree_map

    def step(params, state, prev, prev_rec, bad_at, k):
        """One GD step from `params`; returns the record of the state it started from.

        Overflow: if this state's objective or gradient is not finite, the update that
        produced it (step k − 1) broke the run: go back to the previous state, record that
        one, and stop there. If this state is fine but its update is not (or ‖·‖² of the
        result overflows), stop here. Either way `bad_at` is the last good step.
        """
        (total, (L, s, W, logscale)), g = vg(params)
        # ‖∇L‖ itself (0 once it underflows), not the scaled gradient's
        gnorm = _tree_norm(g) * jnp.exp(logscale)
        gap = (
            L
            if train_v  # L* = 0 once v is trained too (train_v: module doc)
            else loss_gap(W, data, loss)
            if rule == "polyak" and head == "linear"
            else jnp.zeros((), W.dtype)
        )
        new, state_new = _rule(rule).update(g, state, params, hyper._replace(gap=gap))
        rec = _record((L, s, W, logscale), gnorm, params, train_v=train_v)
        here_ok = jnp.isfinite(total) & jnp.isfinite(gnorm)
        next_ok = jnp.isfinite(sum(jnp.sum(a * a) for a in leaves(new)))
        running = bad_at < 0
        back = running & ~here_ok & (k > 0)
        bad_at = jnp.where(
            running & ~here_ok, jnp.maximum(k - 1, 0), jnp.where(running & ~next_ok, k, bad_at)
        )
        rec_out = tmap(lambda a, b: jnp.where(back, a, b), prev_rec, rec)
        nxt = tmap(
            lambda a, b, c: jnp.where(back, a, jnp.where(bad_at >= 0, b, c)), prev, params, new
        )
        state = tmap(lambda b, c: jnp.where(bad_at >= 0, b, c), state, state_new)
        return (nxt, state, params, bad_at), rec_out

    return step
