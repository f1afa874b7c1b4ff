"""Next-token prediction with one self-attention layer (Li, Huang, Ildiz, Rawat, Oymak,
*Mechanics of Next Token Prediction with Self-Attention*, arXiv 2403.08081, AISTATS 2024).

The query is the last token; trained on next-token data, the layer learns one
token-priority graph (TPG) per last token, retrieves the tokens of the highest-priority
strongly connected component (SCC) in the context ("hard retrieval") and mixes them softly
("soft composition"):  W(τ) ≈ W^fin + R(τ)·W^svm,  W^svm the Graph-SVM direction (order
between SCCs, margin ≥ 1; equality inside), W^fin a finite part in the cyclic subspace.

    prob = random_ntp_problem(6, 4, 6, 8, seed=0)
    svm = solve_graph_svm(prob);  tr = train(prob);  fin = solve_wfin(prob)
    decomposition(prob, tr.W, fin.W, svm.W)["corr_svm"][-1]
"""

from .gd import NTPTrajectory, decomposition, default_init, fit_R, loss_floor, solve_wfin, train
from .graph import (
    PriorityGraphs,
    cyclic_basis,
    local_graphs,
    priority_graphs,
    project,
    reduced_mask,
    scc_ids,
    selection_sets,
    top_scc_mass,
    top_scc_tokens,
)
from .problem import NTPProblem, random_ntp_problem
from .svm import GraphSvm, kkt_residuals, solve_graph_svm

__all__ = [
    "NTPProblem",
    "random_ntp_problem",
    "PriorityGraphs",
    "priority_graphs",
    "scc_ids",
    "local_graphs",
    "selection_sets",
    "reduced_mask",
    "cyclic_basis",
    "project",
    "top_scc_mass",
    "top_scc_tokens",
    "GraphSvm",
    "solve_graph_svm",
    "kkt_residuals",
    "NTPTrajectory",
    "train",
    "solve_wfin",
    "fit_R",
    "decomposition",
    "default_init",
    "loss_floor",
]
