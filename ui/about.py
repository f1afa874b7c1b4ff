"""“What am I looking at?”: one short explanation per chart of the app — its marks, axes and
colours in the page's own words — drawn in a collapsed expander under the chart.

`chart(where, spec, key)` draws an Altair chart and its explanation; `explain(where, key)`
adds the explanation to a chart drawn elsewhere. tests/app/test_about.py checks that every
page draws one explanation per chart.
"""

from __future__ import annotations

LABEL = "What am I looking at?"
ABOUT = {
    "hero": "Each line is the path of W(k) z_i, the key-query matrix times one sequence's "
    "query, over the gradient-descent steps k; blue for GD on W, red for GD on K Qᵀ. "
    "The dashed rays are W^mm z_i (Frobenius SVM, blue) and W^mm_* z_i (nuclear SVM, "
    "red): each path bends onto the ray of its own colour. Grey marks are the tokens, "
    "scaled to fit; ● is each sequence's optimal token.",
    "playground-margins": "One cell per token (column) of each sequence (row): its margin "
    "(x_iα − x_it)ᵀ W z_i / ‖W‖ at the step shown. The selected token "
    "has none (blank). Positive means the selected token beats it; "
    "the support tokens of the SVM (○) sit at the smallest margin.",
    "playground-selected_weight": "Softmax weight of GD's selected token in each sequence "
    "(one line per sequence) against the step: it climbs to 1 "
    "as attention concentrates on one token.",
    "playground-other_mass": "The softmax mass left on all the other tokens, per sequence, on "
    "a log axis: it falls exponentially while ‖W‖ grows.",
    "playground-correlation": "corr(W(k), ·) = ⟨W, W^mm⟩/(‖W‖‖W^mm‖) against the SVM "
    "solutions for GD's selection: Frobenius (the W limit) and "
    "nuclear (the K Qᵀ limit). 1 means the same direction.",
    "playground-norm": "‖W(k)‖_F against the step: normalized GD grows it linearly (η per "
    "step); the direction, not the size, converges.",
    "playground-loss": "The training loss L(W(k)) on a log axis: it keeps falling toward its "
    "infimum as the softmax saturates.",
    "geometry-tokens": "The 2-D tokens of each sequence (colour = sequence), the optimal ★ "
    "and support ○ tokens, the queries' arrows, and the dotted lines that "
    "the SVM's W puts between each optimal token and the others.",
    "geometry-paths": "W(k) z_i for each query over the steps: solid for GD on W, dashed for "
    "GD on K Qᵀ; thin rays are the SVM directions W^mm z_i and W^mm_* z_i. "
    "Each path turns onto the ray of its own norm.",
    "basins-bar": "For each selection α that some start reached: how many of the random "
    "starts ended there (bar length) and what kind of selection it is "
    "(colour: global, locally optimal, other).",
    "basins-map": "A plane of initializations W(0) = a·A + b·B around the origin: each cell "
    "is one GD start, coloured by the selection it reached. Regions of one "
    "colour are basins of attraction.",
    "overparam-bars": "For each dimension d (x axis): the share of random problems where GD "
    "reached the global selection, a locally optimal one, and where the SVM "
    "for α = opt is feasible (colours). Higher d, higher bars.",
    "rank-singular": "Singular values of W(k) divided by the largest, per step (one line per "
    "singular value), for GD on W and on K Qᵀ: under K Qᵀ the small ones "
    "die off — rank collapse.",
    "rank-rank": "Numerical rank of W(k) (singular values above the threshold) over the "
    "steps, for each parameterization.",
    "rank-lines": "Mean rank of the two SVM solutions over feasible random instances, against "
    "d (x axis), one line per n and norm: the nuclear one stays lower.",
    "nonlinear-gaps": "1 − corr of W(k) with three candidates, on a log axis: the generalized "
    "SVM fit W^fin + R_k W^dir (several tokens kept), W^dir alone, and the "
    "one-token SVM. Lower is closer.",
    "nonlinear-probs": "The final softmax of each sequence (row) over its tokens (columns): "
    "□ marks the tokens kept (O_i), ★ the best single token.",
    "sequences-probs": "Per query (row) of the shown sequence, the softmax over the tokens it "
    "may attend to (columns; causal: only those up to the query). ★ marks "
    "the optimal attendable token.",
    "sequences-corr": "corr(W(k), SVM solution) over the steps for the per-query SVM(s): "
    "how close the direction of W is to the max-margin solution.",
    "sequences-weight": "Softmax weight of each query's selected token over the steps (one "
    "line per query): climbing to 1 means a hard selection.",
    "ntp-graphs": "One adjacency map per last token k: a cell (row a, column b) is filled "
    "when a sequence ending in k has label a and contains b (a has priority "
    "over b). Rows and columns are ordered by strongly connected component, "
    "top priority first; colour = SCC.",
    "ntp-runs": "During normalized GD on next-token data: corr of W(τ) with the Graph-SVM "
    "W^svm and with W^fin + R·W^svm, the attention mass on the top SCC, and "
    "‖Π_S W − W^fin‖ with R(τ) (the finite and the growing parts of W).",
    "ntp-attention": "The final attention of each sequence (one group of bars) over its "
    "tokens; red bars are tokens of the sequence's top SCC, which attention "
    "retrieves and mixes.",
    "optimizers-heat": "Rows: optimizers; columns: the norm of the Att-SVM; each cell is the "
    "correlation (or margin ratio) of the final W with that SVM at the "
    "run's own selection. Where theory pairs an optimizer with a norm (the "
    "diagonal) the cell should be brightest.",
    "optimizers-growth": "‖W(k)‖_F of each optimizer over the steps, on a log axis: every "
    "one grows without bound; the direction is what converges.",
    "joint-paths": "The path of W(k) z₁ (red: the attention applied to sequence 1's query; "
    "for the MMTS presets the prompt p) and of the head v(k) (blue), one "
    "point per recorded step, with their SVM rays from the origin: dashed "
    "W^relax z₁ and v^mm, dotted W^tight z₁. Black marks are the tokens (the "
    "selected ones filled); the orange ring is a sequence that is not a "
    "support vector of v's SVM.",
    "joint-curves": "For the random instances, 1 − the median over instances of "
    "corr(W(k), ·) with the relaxed, tight and balanced Att-SVMs of the final "
    "selection, and of corr(v(k), v^mm), against the step, on a log axis: "
    "lower means closer to that direction.",
    "joint-scatter": "One point per random instance: its final corr with the relaxed "
    "Att-SVM (x) against the tight one (y). Points below the dashed "
    "diagonal are explained better by the relaxed SVM.",
    "reproduce": "The experiment's figure as the paper draws it: see the card's title and "
    "axes; our statistic is next to the paper's above, and the data behind the "
    "chart downloads as CSV below.",
    "stair-spectrum": "The largest singular values of ΔW = K(k)Q(k)ᵀ − K₀Q₀ᵀ on a log axis, "
    "against the step (left) and against t / log(1/α) with t = η·k (right): "
    "from a small start they rise one at a time, each after a plateau.",
    "stair-loss": "The loss L(K Qᵀ) over the steps: flat stretches (plateaus near a saddle) "
    "and drops, each drop where one more singular value of ΔW rises.",
    "stair-gap": "(‖K‖² + ‖Q‖²)/2 − ‖K Qᵀ‖_* relative to ‖K Qᵀ‖_*, log axis, at 50 "
    "checkpoints. With λ > 0 it falls exponentially (dashed: rate 2ηλ per step). "
    "With λ = 0 the gap itself stays near its start, of order α²: small next to "
    "a grown K Qᵀ from a small start, large from α = 1.",
    "words-sentences": "One row per sentence (its number and label), one cell per word, "
    "shaded by the word's softmax weight at the iteration shown: darker "
    "blue, more attention. GD's selected word is bold; the word the "
    "sentence was written around (bundled tasks) is red.",
    "words-margins": "The same grid coloured by each word's Att-SVM margin "
    "(x_iα − x_it)ᵀ W^mm z_i for GD's selection α: 0 at the selected word, "
    "1 (darkest orange) at the support words, paler above, white from 4 on. "
    "No margins when that Att-SVM is infeasible.",
    "words-corr": "corr(W(k), W^mm_α) over the iterations: how closely the direction of W "
    "(or K Qᵀ) matches the Att-SVM of the words GD ends up selecting (nuclear "
    "norm for K Qᵀ). Theory says it tends to 1 where that SVM is feasible.",
    "words-plane": "Every distinct word as a point: x along the SVM's direction W^mm z̄ "
    "(z̄ the mean query), so a word's attention logit grows to the right; y "
    "along the words' top principal direction across it. Red: selected by GD "
    "in some sentence.",
    "words-feasibility": "For each dimension d after PCA: the bar's height is the share of "
    "sentences whose optimal word is the same as at d = 50, its colour "
    "whether the Att-SVM at the optimal words is feasible (green), "
    "infeasible (red) or undefined because two words tie (grey).",
    "hierarchy-live": "One small chart per head: rows are layers, columns heads. The line is "
    "the head's mean top attention weight over the rows it is read at "
    "(the last layer at the query token, earlier layers at every token): "
    "it reaches 1 once every row has settled on one key. The chart grows "
    "as the run advances, chunk by chunk.",
    "hierarchy-cos": "One small chart per head (rows: layers, columns: heads): the cosine "
    "between the head's W^{l,h}(k) and the Att-SVM of the keys that head "
    "selects at the end, on its own layer's final inputs h^{l−1}. A line "
    "rising to 1 means the head's direction becomes its own SVM. The SVM "
    "is solved once, at the end: early steps compare with where the head "
    "ends up.",
    "hierarchy-last": "One panel per head of the last layer: rows are sequences, columns "
    "the keys (token positions), colour the final attention of the query "
    "token (the last one). The black ring is the key the head selects; "
    "the red cross is the optimal token of the paper's one-layer "
    "picture, argmax_t Y_i vᵀ x_it on the raw tokens.",
    "hierarchy-early": "One panel per head of an earlier layer: every token is a query of "
    "the next layer, so every row selects. Cell (t, s): the share of the "
    "sequences in which query token t selects key s. Two heads with the "
    "same picture do the same work; different pictures split it.",
}


def explain(where, key: str) -> None:
    """Draw the explanation `key` in a collapsed expander in `where` (st or a column)."""
    where.expander(LABEL, icon=":material/help:").markdown(ABOUT[key])


def chart(where, spec, key: str) -> None:
    """Draw Altair chart `spec` in `where`, then its explanation."""
    where.altair_chart(spec)
    explain(where, key)


__all__ = ["ABOUT", "LABEL", "chart", "explain"]
