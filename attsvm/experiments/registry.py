"""The registry: every experiment's record (`core.Experiment`), by name, in the order the
command line lists them. Adding an experiment is one line in `_RECORDS` (docs/library.md,
"Adding a theory")."""

from __future__ import annotations

from . import (
    adaptive_steps,
    geometry,
    joint_training,
    local_convergence,
    lp_mirror_descent,
    multi_token,
    ntp,
    overparameterization,
    pretrained_heads,
    rank_staircase,
    real_words,
    regularization_path,
    sequence_causal,
    svm_hierarchy,
    svm_rank,
    weight_decay,
)
from .core import Experiment

# One record per experiment (`core.Experiment`), in the order the CLI lists them.
_RECORDS = (
    *geometry.RECORDS,
    local_convergence.RECORD,
    multi_token.RECORD,
    svm_rank.RECORD,
    overparameterization.RECORD,
    regularization_path.RECORD,
    sequence_causal.RECORD,
    # follow-up papers: next-token prediction (arXiv 2403.08081); optimizers (arXiv
    # 2410.14581, 2402.05738, 2306.13596); rank from small init and weight decay (arXiv
    # 2306.07042, 2410.23819); real word vectors (attsvm.text)
    *ntp.RECORDS,
    lp_mirror_descent.RECORD,
    adaptive_steps.RECORD,
    joint_training.RECORD,
    rank_staircase.RECORD,
    weight_decay.RECORD,
    real_words.RECORD,
    svm_hierarchy.RECORD,  # several layers and heads (open; attsvm.stack)
    pretrained_heads.RECORD,  # a pretrained transformer's heads (open; attsvm.pretrained)
)
REGISTRY: dict[str, Experiment] = {r.name: r for r in _RECORDS}
# The paper's experiments (`reproduce all`); the follow-ups are run by name or together
# (`reproduce followups`), and on the Reproduce page's "Follow-up papers" section.
EXPERIMENTS = tuple(r.name for r in _RECORDS if not r.followup)
FOLLOWUPS = tuple(r.name for r in _RECORDS if r.followup)


def record(name: str) -> Experiment:
    """The experiment's record: name, title, paper, Settings, run, price, chart, …"""
    if name not in REGISTRY:
        raise ValueError(f"`name` must be one of {list(REGISTRY)}; got {name!r}")
    return REGISTRY[name]
