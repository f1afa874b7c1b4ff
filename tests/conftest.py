"""Shared test setup for the library tests.

Silent broadcasting between arrays of different rank is an error in every test
(`jax_numpy_rank_promotion="raise"`, as equinox's tests do): a shape bug in the engine must
fail loudly rather than broadcast into a wrong but finite answer.
"""
from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import pytest
from hypothesis import settings

import attsvm

jax.config.update("jax_numpy_rank_promotion", "raise")

# Property tests: fixed shapes, few examples, no per-example deadline (the first example of a
# property that trains pays for one compilation).
settings.register_profile("attsvm", deadline=None, max_examples=15, derandomize=True,
                          print_blob=True)
settings.load_profile("attsvm")

FIXTURE = Path(__file__).parents[2] / "shared" / "fixtures" / "official_local_converge_seed0.npz"


@pytest.fixture(scope="session")
def fixture_npz():
    """The paper authors' own numbers for one instance (see shared/fixtures/README.md)."""
    if not FIXTURE.exists():
        pytest.skip(f"reference fixture not found at {FIXTURE} (needs the shared/ checkout "
                    "next to the repository)")
    with np.load(FIXTURE) as F:
        return {k: F[k] for k in F.files}


@pytest.fixture(scope="session")
def fixture_problem(fixture_npz):
    F = fixture_npz
    return attsvm.Problem(X=F["X"], Y=F["Y"], Z=F["Z"], v=F["v"])

