"""Both CPU cores: importing attsvm exposes one CPU device per core unless the user chose
(sweeps then deal their chunks to the cores; tests/test_experiments.py checks that the
numbers do not depend on the device count), and a plain batch still runs on one."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

COUNT = """
import json, jax, attsvm
from attsvm.batching import place, padded_batch
probs = [attsvm.random_problem(3, 4, 5, seed=s) for s in range(3)]
data, _ = place(*padded_batch(probs, [attsvm.default_init(p) for p in probs], param="W", m=5))
print(json.dumps(dict(devices=len(jax.devices()), batch_on=len(data.X.devices()))))
"""


def _run(script, **env_changes) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "PYTEST_XDIST_WORKER")}
    env.update(env_changes, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_attsvm_exposes_a_device_per_core_except_in_xdist_workers():
    assert _run(COUNT) == dict(devices=os.cpu_count() or 1, batch_on=1)
    assert _run(COUNT, PYTEST_XDIST_WORKER="gw0")["devices"] == 1
    assert _run(COUNT, XLA_FLAGS="--xla_force_host_platform_device_count=3")["devices"] == 3
