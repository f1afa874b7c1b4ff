"""attsvm: attention trained by gradient descent, and the SVMs it converges to.

Library for "Transformers as Support Vector Machines" (Tarzanagh, Li, Thrampoulidis,
Oymak, 2023). JAX runs gradient descent (float64: importing attsvm turns on
``jax_enable_x64``, and does nothing else; process tuning is `attsvm.runtime.configure`),
cvxpy solves the SVMs. The public API is `__all__` below.
"""

# ruff: noqa: I001, E402  (float64 before any submodule; the API in the order of docs/library.md)
import jax

jax.config.update("jax_enable_x64", True)

from .problems import Problem, random_problem, paper_problem, token_scores, optimal_tokens, PRESETS
from .training import train, train_batch, default_init, backend
from .trajectory import Trajectory
from .svm import (
    solve_att_svm,
    is_locally_optimal,
    SvmSolution,
    locally_optimal_selections,
    classify_selection,
    solve_generalized_svm,
    GeneralizedSvm,
)
from .metrics import correlation, token_margins, numerical_rank, norm_growth
from .joint import solve_joint_svm, JointSvm
from .stack import train_stack, StackRun, audit_stack, StackAudit
from . import text  # real word vectors (GloVe, loaded on first use)

__version__ = "0.1.0"

__all__ = [
    "Problem",
    "random_problem",
    "paper_problem",
    "token_scores",
    "optimal_tokens",
    "PRESETS",
    "train",
    "train_batch",
    "Trajectory",
    "default_init",
    "backend",
    "solve_att_svm",
    "is_locally_optimal",
    "SvmSolution",
    "locally_optimal_selections",
    "classify_selection",
    "solve_generalized_svm",
    "GeneralizedSvm",
    "correlation",
    "token_margins",
    "numerical_rank",
    "norm_growth",
    "solve_joint_svm",
    "JointSvm",
    "text",
    "train_stack",
    "StackRun",
    "audit_stack",
    "StackAudit",
    "__version__",
]
