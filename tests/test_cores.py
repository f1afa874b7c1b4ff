"""Both CPU cores: importing attsvm exposes one CPU device per core unless the user chose,
and `train_batch` then runs its batch in one part per device with the numbers of one
device (W bit for bit; K Qᵀ to rounding)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from attsvm.batching import populated_empty

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import json, numpy as np, jax, attsvm
from attsvm.batching import cpu_parts
probs = [attsvm.random_problem(3, 4, 5, seed=s) for s in range(5)]
out = dict(devices=len(jax.devices()), parts=[p[:2] for p in cpu_parts(5) or []])
for param in ("W", "KQ"):
    every = attsvm.train_batch(probs, param=param, steps=30, record_every=3)
    one = attsvm.train_batch(probs, param=param, steps=30, record_every=3,
                             devices=jax.devices()[:1])
    out[param] = dict(W=float(np.max(np.abs(every.W - one.W))),
                      probs=float(np.max(np.abs(every.probs - one.probs))),
                      loss=float(np.max(np.abs(every.loss - one.loss))),
                      shape=list(every.W.shape), overflow=every.overflow_at.tolist(),
                      K=None if one.K is None else float(np.max(np.abs(every.K - one.K))))
print(json.dumps(out))
"""


COUNT = "import json, jax, attsvm; print(json.dumps(dict(devices=len(jax.devices()))))"


def _run(script=SCRIPT, **env_changes) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PYTEST_XDIST_WORKER")}
    env.update(env_changes, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_batch_in_parts_on_three_devices_gives_one_devices_numbers():
    res = _run(XLA_FLAGS="--xla_force_host_platform_device_count=3")
    assert res["devices"] == 3                       # the user's choice is kept
    assert res["parts"] == [[0, 2], [2, 4], [4, 5]]  # equal parts, the last one short
    assert res["W"]["W"] == 0.0 and res["W"]["probs"] == 0.0 and res["W"]["loss"] == 0.0
    assert res["W"]["shape"] == [5, 11, 5, 5] and res["W"]["overflow"] == [-1] * 5
    assert res["KQ"]["W"] < 1e-12 and res["KQ"]["K"] < 1e-12


def test_importing_attsvm_exposes_a_device_per_core_except_in_xdist_workers():
    assert _run(COUNT)["devices"] == (os.cpu_count() or 1)
    assert _run(COUNT, PYTEST_XDIST_WORKER="gw0")["devices"] == 1


def test_populated_empty_is_a_writable_array_of_the_shape():
    a = populated_empty((3, 1000, 100), np.float64)  # 2.4 MB: mapped
    a[...] = 1.5
    assert a.shape == (3, 1000, 100) and a.dtype == np.float64 and a.sum() == 1.5 * a.size
    b = populated_empty((4, 5), np.int64)            # small: plain np.empty
    b[...] = 7
    assert b.shape == (4, 5) and int(b.sum()) == 140
