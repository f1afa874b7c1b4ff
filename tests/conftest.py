"""Shared test setup for the library tests.

Silent broadcasting between arrays of different rank is an error in every test
(`jax_numpy_rank_promotion="raise"`, as equinox's tests do): a shape bug in the engine must
fail loudly rather than broadcast into a wrong but finite answer.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# Tests never touch the user's results store, and no server they start fills one in the
# background unless the test asks (tests/test_store.py, tests/app/test_reproduce_store.py).
os.environ["ATTSVM_RESULTS"] = tempfile.mkdtemp(prefix="attsvm-test-results-")
os.environ["ATTSVM_FILL"] = "0"
# nor the user's compilation cache: the run's workers, and the CLIs and servers they start,
# share one of their own (one folder per pytest run: xdist gives its workers one run id)
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID") or str(os.getpid())
os.environ.setdefault(
    "ATTSVM_XLA_CACHE", os.path.join(tempfile.gettempdir(), f"attsvm-test-xla-{_RUN}")
)

import jax  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

import attsvm  # noqa: E402
from attsvm import runtime  # noqa: E402

# The tuned process the CLI and the app run in (one CPU device in a pytest-xdist worker: its
# siblings hold the other cores); compiled programs stay in memory.
runtime.configure(compile_cache=False)
jax.config.update("jax_numpy_rank_promotion", "raise")

# Property tests: fixed shapes, few examples, no per-example deadline (the first example of a
# property that trains pays for one compilation).
settings.register_profile(
    "attsvm", deadline=None, max_examples=15, derandomize=True, print_blob=True
)
settings.load_profile("attsvm")

FIXTURE = Path(__file__).parents[2] / "shared" / "fixtures" / "official_local_converge_seed0.npz"


@pytest.fixture(scope="session")
def fixture_npz():
    """The paper authors' own numbers for one instance (see shared/fixtures/README.md)."""
    if not FIXTURE.exists():
        pytest.skip(
            f"reference fixture not found at {FIXTURE} (needs the shared/ checkout "
            "next to the repository)"
        )
    with np.load(FIXTURE) as F:
        return {k: F[k] for k in F.files}


@pytest.fixture(scope="session")
def fixture_problem(fixture_npz):
    F = fixture_npz
    return attsvm.Problem(X=F["X"], Y=F["Y"], Z=F["Z"], v=F["v"])


@pytest.fixture(autouse=True)
def _main_module_kept():
    """Streamlit's AppTest runs a page as module `__main__` and leaves it in sys.modules; a
    later multiprocessing spawn in the same worker (a Dask LocalCluster's worker processes)
    would then re-run that page's temporary script and die. Each test gets the real one."""
    import sys

    main = sys.modules.get("__main__")
    yield
    if main is not None:
        sys.modules["__main__"] = main
