"""Real words: attention on GloVe word vectors settles on the word that decides the label."""

import numpy as np
import streamlit as st

from attsvm import limits, text
from attsvm.experiments import real_words
from ui import cache
from ui.views import words as view
from ui.widgets import BOUND, explained

view.intro()
L = limits.current()
c = st.columns([2, 2, 2, 1, 1, 1, 1])
source = (
    c[0].segmented_control(
        "Sentences", ["bundled task", "my own"], key="words_src", default="bundled task", **BOUND
    )
    or "bundled task"
)
query = c[2].selectbox(
    "query z_i",
    ["mean", "first", "word"],
    key="words_query",
    **BOUND,
    help="mean: the sentence's mean vector; first: self-attention on the "
    "first word; word: one chosen word as every sentence's query.",
)
d = c[3].number_input("d (PCA)", 2, 50, 50, key="words_d", **BOUND)
param = c[4].segmented_control("train", ["W", "KQ"], key="words_param", default="W", **BOUND) or "W"
steps = c[5].selectbox("steps", [500, 1000, 2000, 5000], index=2, key="words_steps", **BOUND)
lr = c[6].number_input("lr", 0.001, 10.0, 0.1, key="words_lr", **BOUND)
if query == "word":
    word = st.text_input("query word", "review", key="words_qword", max_chars=40, **BOUND)
    query = f"word:{word}"
keys = None
if source == "bundled task":
    task = c[1].selectbox(
        "task", list(text.TASKS), key="words_task", **BOUND, format_func=lambda t: text.TASKS[t][0]
    )
    st.caption(text.TASKS[task][2])
    sents, labels, keys = text.task(task)
    most = min(len(sents), L.max_n)
    n = st.slider(
        "sentences used (the first n; labels alternate)",
        2,
        most,
        min(24, most),
        key="words_n",
        **BOUND,
    )
    sents, labels, keys, head = sents[:n], labels[:n], keys[:n], text.TASKS[task][1]
else:
    head = c[1].selectbox("lexicon head", list(text.LEXICONS), key="words_head", **BOUND)
    typed = st.text_area(
        "One sentence per line, starting with its label (+ or -)",
        view.EXAMPLE,
        key="words_text",
        height=160,
        **BOUND,
    )
    with explained():
        sents, labels = text.parse_labelled(typed)

with explained():
    study = real_words.Study(
        sentences=tuple(sents),
        labels=tuple(float(y) for y in labels),
        keys=None if keys is None else tuple(keys),
        query=query,
        head=head,
        d=int(d),
        param=param,
        steps=int(steps),
        lr=float(lr),
    )
    view.check_price(study)
    res = cache.words(study)
view.unknown_note(res.tp)
view.watch_live(res.tp, study)
view.verdict(res, param)
run = res.fit.run
k = st.select_slider(
    "iteration shown",
    options=[int(s) for s in run.steps],
    value=int(run.steps[-1]),
    key="words_k",
    **BOUND,
)
view.export(res, view.panels(res, int(np.searchsorted(run.steps, k))), param)
view.limitation()
