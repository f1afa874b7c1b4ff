"""One BLAS thread for the library's own numpy work; a module of its own so that the
runtime, the experiments' helper processes and the cluster's workers can all import it."""

from __future__ import annotations


def one_thread():
    """One BLAS thread: a context manager, or, called alone, the rest of the process. The
    library's matrices are small (d up to a few hundred), where BLAS threads only add
    synchronization; parallelism comes from JAX's devices and fastsvm's own threads."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")
