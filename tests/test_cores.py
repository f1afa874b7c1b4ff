"""Both CPU cores: importing attsvm changes nothing in the process; `runtime.configure`
exposes one CPU device per core unless the user chose (sweeps then deal their chunks to the
cores; tests/test_experiments.py checks that the numbers do not depend on the device
count), and a plain batch is placed on one; a batch of
`batching.SPLIT_MIN` runs per device or more is split over them (`engine.simulate_split`)
and gives every run's numbers to rounding."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]

COUNT = """
import json, os, sys, jax, attsvm, attsvm.runtime
from attsvm.batching import place, padded_batch
if sys.argv[1:] == ["pure"]:
    print(json.dumps(dict(flags=os.environ.get("XLA_FLAGS"), devices=len(jax.devices()),
                          init=attsvm.model.jnp.zeros(2).dtype.name)))
    raise SystemExit
attsvm.runtime.configure(compile_cache=False)
probs = [attsvm.random_problem(3, 4, 5, seed=s) for s in range(3)]
data, _ = place(*padded_batch(probs, [attsvm.default_init(p) for p in probs], param="W", m=5))
print(json.dumps(dict(devices=len(jax.devices()), batch_on=len(data.X.devices()))))
"""


def _run(script, *args, **env_changes) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("XLA_FLAGS", "PYTEST_XDIST_WORKER", "ATTSVM_MALLOC")
    }
    env.update(env_changes, PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_attsvm_leaves_xla_flags_and_one_cpu_device():
    assert _run(COUNT, "pure") == dict(flags=None, devices=1, init="float64")


def test_configure_exposes_a_device_per_core_except_in_xdist_workers():
    assert _run(COUNT) == dict(devices=os.cpu_count() or 1, batch_on=1)
    assert _run(COUNT, PYTEST_XDIST_WORKER="gw0")["devices"] == 1
    assert _run(COUNT, XLA_FLAGS="--xla_force_host_platform_device_count=3")["devices"] == 3


SPLIT = """
import json, numpy as np, jax, attsvm
from attsvm.batching import cpu_split
probs = [attsvm.random_problem(3, 4, 5, seed=s) for s in range(50)]
out = dict(devices=len(jax.devices()), split=len(cpu_split(50) or []),
           small=cpu_split(31) is None, given=cpu_split(50, jax.devices()[:1]) is None)
big = probs[-1].with_(v=2000 * probs[-1].v)
cases = dict(W=dict(param="W"), KQ=dict(param="KQ", m=3), v=dict(param="W", train_v=True),
             gd=dict(param="W", normalized=False, lr=1.0, loss="exponential"))
for name, kw in cases.items():
    ps = probs[:-1] + [big] if name == "gd" else probs
    a = attsvm.train_batch(ps, steps=60, record_every=3, **kw)
    b = attsvm.train_batch(ps, steps=60, record_every=3, devices=jax.devices()[:1], **kw)
    rel = lambda x, y: float(np.max(np.abs(x - y)) / max(np.max(np.abs(y)), 1e-300))
    diffs = [rel(a.W, b.W), rel(a.probs, b.probs), rel(a.loss, b.loss),
             rel(a.grad_norm, b.grad_norm)]
    diffs += [rel(a.K, b.K), rel(a.Q, b.Q)] if name == "KQ" else []
    diffs += [rel(a.v, b.v)] if name == "v" else []
    out[name] = dict(diff=max(diffs), shape=list(a.W.shape) == list(b.W.shape),
                     overflow=a.overflow_at.tolist() == b.overflow_at.tolist(),
                     overflowed=int((a.overflow_at >= 0).sum()))
print(json.dumps(out))
"""


def test_a_batch_split_over_three_devices_gives_each_run_to_rounding():
    """50 runs on 3 devices: blocks of 17, the last padded; W, K Qᵀ, a trained head and an
    overflowing plain-GD run against the same batch in one program on one device (31 runs:
    one block each would be under SPLIT_MIN; devices given: never split)."""
    res = _run(SPLIT, XLA_FLAGS="--xla_force_host_platform_device_count=3")
    assert (res["devices"], res["split"], res["small"], res["given"]) == (3, 3, True, True)
    for name in ("W", "KQ", "v", "gd"):
        assert res[name]["shape"] and res[name]["overflow"], (name, res[name])
        assert res[name]["diff"] < 1e-10, (name, res[name])
    assert res["gd"]["overflowed"] >= 1


WHOLE = """
import json, numpy as np, jax, attsvm
from attsvm import training
probs = [attsvm.random_problem(3, 4, 5, seed=s) for s in range(50)]
a = attsvm.train_batch(probs, steps=30, record_every=3)
simulate = training._simulate

def one_record_on_one_device(*args, **kw):
    recs, final, bad_at = simulate(*args, **kw)
    assert len(recs[1].addressable_shards) == 3
    moved = jax.device_put(np.asarray(recs[1]), jax.devices()[0])
    return (recs[0], moved, *recs[2:]), final, bad_at

training._simulate = one_record_on_one_device
b = attsvm.train_batch(probs, steps=30, record_every=3)
same = all(np.array_equal(getattr(a, k), getattr(b, k))
           for k in ("W", "probs", "loss", "grad_norm", "final_params"))
print(json.dumps(dict(same=same, shape=list(b.probs.shape))))
"""


def test_a_split_record_without_a_shard_per_device_is_copied_whole():
    """`training._simulate_parts` copies each device's block of a record in its own thread,
    from shard lists taken beforehand; a record that comes back with another number of
    shards (here moved onto one device) is copied whole instead of failing, with the same
    numbers."""
    res = _run(WHOLE, XLA_FLAGS="--xla_force_host_platform_device_count=3")
    assert res == dict(same=True, shape=[50, 11, 3, 4]), res


EMITTERS = """
import json, os, numpy as np, attsvm, attsvm.runtime
attsvm.runtime.configure(compile_cache=False)
probs = [attsvm.random_problem(6, 8, 10, seed=s) for s in range(4)]
a = attsvm.train_batch(probs, steps=300)
b = attsvm.train_batch(probs, steps=300, param="KQ")
print(json.dumps(dict(flags=os.environ.get("XLA_FLAGS", ""), W=a.W[:, ::50].ravel().tolist(),
                      P=a.probs[:, -1].ravel().tolist(), KQ=b.W[:, ::50].ravel().tolist())))
"""


def test_configure_picks_the_faster_compiling_emitters_and_keeps_a_users_choice():
    """`runtime.use_fast_compile`: XLA's older CPU fusion emitters (the engine's programs
    compile in about half the time); a user's own setting of that flag is left alone, and
    the two code generators give the same runs to rounding (W and K Qᵀ, 300 steps)."""
    import jaxlib

    from attsvm.runtime import FAST_COMPILE_FLAG, FAST_COMPILE_JAXLIB

    ours = _run(EMITTERS)
    theirs = _run(EMITTERS, XLA_FLAGS="--xla_cpu_use_fusion_emitters=true")
    assert theirs["flags"] == "--xla_cpu_use_fusion_emitters=true"
    assert (FAST_COMPILE_FLAG in ours["flags"]) == jaxlib.__version__.startswith(
        FAST_COMPILE_JAXLIB
    )
    for key in ("W", "P", "KQ"):
        a, b = np.array(ours[key]), np.array(theirs[key])
        assert np.max(np.abs(a - b)) <= 1e-12 * np.max(np.abs(b)), key


HEAP = """
import json, sys, attsvm, attsvm.runtime, numpy as np
if sys.argv[1:] != ["pure"]:
    attsvm.runtime.configure(compile_cache=False)
a = np.empty(100 * 2**20 // 8)                  # 100 MB
where = [line.split()[-1] for line in open("/proc/self/maps")
         if int(line.split("-")[0], 16) <= a.ctypes.data < int(line.split()[0].split("-")[1], 16)]
print(json.dumps(dict(heap=where == ["[heap]"])))
"""


@pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or not sys.platform.startswith("linux"),
    reason="glibc's malloc on Linux only",
)
def test_configure_keeps_large_blocks_in_mallocs_heap_unless_told_not_to():
    """`runtime.keep_freed_memory`: after `configure` a 100 MB array comes from malloc's heap
    (reused by the next call once freed), not from a fresh mapping; ATTSVM_MALLOC=system
    (the app's setting) and the bare import leave glibc's default, which maps it."""
    assert _run(HEAP) == dict(heap=True)
    assert _run(HEAP, ATTSVM_MALLOC="system") == dict(heap=False)
    assert _run(HEAP, "pure") == dict(heap=False)
