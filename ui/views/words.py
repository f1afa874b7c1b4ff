"""The Real words page's text and panels (Streamlit only; the numbers come from
`attsvm.experiments.real_words.study`, the charts from `attsvm_charts.words`)."""

from __future__ import annotations

import streamlit as st

from attsvm import limits
from attsvm.experiments import real_words
from attsvm_charts import words as charts

from .. import about, export_ui, hosted

EXAMPLE = (
    "+ the movie was wonderful\n- the food was awful\n+ what a lovely evening\n"
    "- the service was rude\n+ the concert was brilliant\n- my trip was miserable"
)


def intro():
    st.title("Real words")
    st.markdown(
        "The tokens are real word vectors (GloVe 6B, 50-d, unit-normalized), one per word of "
        "each sentence; the head is a linear v fitted on a small labelled word lexicon, so "
        "the optimal token of a sentence is the word whose lexicon score agrees with its "
        "label. Gradient descent on W (or K Qᵀ) then sends the softmax to one word per "
        "sentence, and W(k)/‖W(k)‖ to the Att-SVM of that selection (arXiv 2308.16898 "
        "§2-3). Words not in the vocabulary are dropped and listed; sentences of different "
        "lengths are padded, and padding gets exactly zero attention and no SVM constraint."
    )


def check_price(s: real_words.Study):
    """Refuse (BudgetError) a study over the active mode's caps or work budget (its price:
    `real_words.study_price`, the experiment's formula)."""
    hosted.check_session()
    prob = s.build().problem
    limits.check_gd(n=prob.n, T=prob.T, d=prob.d, steps=s.steps, param=s.param)
    limits.check_svm(n=prob.n, T=prob.T, d=prob.d, norm="fro" if s.param == "W" else "nuc")
    items, _ = real_words.study_price(s, prob.n, prob.T)
    limits.check_work(sum(w for _, w in items), what="GD on the sentences and its SVMs")


def unknown_note(tp):
    missing = sorted({w for ws in tp.unknown for w in ws})
    if missing:
        st.caption(
            "Not in the GloVe vocabulary, left out: "
            + hosted.escape_markdown(", ".join(missing[:40]))
            + (" …" if len(missing) > 40 else "")
        )


def verdict(res: real_words.WordsStudy, param: str):
    f = res.fit
    sol, run = f.svm, f.run
    kind = {
        "global": "the global optimum (α = opt)",
        "local": "a local optimum",
        "feasible": "neither: feasible but not locally optimal",
        "infeasible": "neither: its Att-SVM is infeasible",
    }[f.verdict]
    name = "W^mm_α (Frobenius)" if param == "W" else "W^mm_*,α (nuclear)"
    c = st.columns(4)
    c[0].metric("GD's selection is", f.verdict, help=kind)
    c[1].metric(f"corr(W, {name})", "n/a" if not sol.feasible else f"{f.corr[-1]:.5f}")
    w = res.words
    sel = w[w.selected]
    c[2].metric("selected = key word", f"{sel.key.mean():.0%}" if w.key.any() else "n/a")
    c[3].metric(
        "selected = optimal word", f"{sel.optimal.mean():.0%}" if f.opt is not None else "tie"
    )
    if f.opt is None:
        st.warning(
            "A repeated word is the optimal token of a sentence (a tie): no unique "
            "opt, so no global SVM."
        )
    st.caption(
        f"{run.probs.shape[1]} sentences, up to {run.probs.shape[2]} words; smallest "
        f"selected softmax weight {run.probs[-1].max(-1).min():.4f}."
    )


def panels(res: real_words.WordsStudy, j: int) -> dict:
    """The charts at record j; returns them by name (for the export)."""
    run, words = res.fit.run, res.words.copy()
    words["weight"] = [
        float(run.probs[j, i, t]) for i, t in zip(words.sentence, words.position, strict=True)
    ]
    shown = {
        "sentences": charts.sentence_weights(words, int(run.steps[j])),
        "margins": charts.sentence_margins(words),
        "correlation": charts.corr_curve(run.steps, res.fit.corr, "direction of W(k)"),
        "plane": charts.word_plane(res.plane),
        "feasibility": charts.feasibility(res.feasibility),
    }
    about.chart(st, shown["sentences"], "words-sentences")
    about.chart(st, shown["margins"], "words-margins")
    left, right = st.columns(2)
    about.chart(left, shown["correlation"], "words-corr")
    about.chart(right, shown["plane"], "words-plane")
    st.subheader("Fewer dimensions: is the SVM still feasible?")
    st.markdown(
        "Every vector projected on the top-d singular directions of the sentences' "
        "words (uncentered PCA, renormalized; the head refitted there). With n·(T−1) "
        "constraints and d² unknowns, real words stop being separable at small d, "
        "and repeated words (“the … the”) can tie for the best score."
    )
    about.chart(st, shown["feasibility"], "words-feasibility")
    st.dataframe(res.feasibility, hide_index=True, key="words_feas_table")
    with st.expander("Every word: weight, score γ, SVM margin"):
        st.dataframe(words, hide_index=True, key="words_table")
    return shown


def export(res: real_words.WordsStudy, shown: dict, param: str):
    """The page's Export button: the problem, the run, its SVM, the charts and tables."""
    export_ui.export_button(
        key="words_export",
        problem=res.tp.problem,
        page="Real words",
        charts=shown,
        run=res.fit.run,
        solutions={"fro" if param == "W" else "nuc": res.fit.svm},
        tables={"words": res.words, "feasibility": res.feasibility},
    )


def limitation():
    st.info(
        "**What the theory cannot do here.** A fixed linear head scores each word alone, "
        "so negation (“not good”) is out of reach: no single word carries the label, and "
        "GD selects whichever word happens to score with it (often a neutral word with a "
        "small fitted score). This page keeps the head at its lexicon fit; training it "
        "together with the attention changes the scores and is possible in the library: "
        "`attsvm.train(text.build(…).problem, train_v=True)` starts v at that fit.",
        icon=":material/info:",
    )


def watch_live(tp, key: real_words.Study):
    """GD on the sentences `tp` of the study `key` streamed in chunks (`attsvm.live`, the
    playground's engine): the softmax weights of every word redrawn as W(k) moves."""
    from attsvm import live
    from attsvm.config import CHUNK_RECORDS, TrainSpec

    from .. import cache

    if not st.toggle(
        "Watch GD live",
        key="words_live",
        help="Streams the same gradient descent in chunks and redraws the "
        "weights; the panels below show its end.",
    ):
        return
    prob, steps = tp.problem, key.steps
    tspec = TrainSpec(param=key.param, steps=steps, lr=key.lr)
    state = st.session_state
    if state.get("words_live_key") != key:
        state["words_live_key"] = key
        state["words_live_run"] = dict(
            key=key,
            every=live.live_every(steps),
            total=steps,
            W=None,
            probs=None,
            loss=None,
            grad_norm=None,
            steps=None,
            final=live.initial_params(prob, tspec),
            done=False,
            overflow=-1,
        )
    words = [(i, t, w, prob.Y[i]) for i, ws in enumerate(tp.words) for t, w in enumerate(ws)]

    @st.fragment(run_every=0.35 if not state["words_live_run"]["done"] else None)
    def frame():
        run = state["words_live_run"]
        was_done = run["done"]
        live.step_run(run, prob, tspec, CHUNK_RECORDS, advance=cache.advance)
        if run["done"] and not was_done:
            st.rerun()  # once: the page redraws without the timer
        df = _live_words(prob, words, run["probs"][-1])
        st.altair_chart(charts.sentence_weights(df, int(run["steps"][-1])), key="words_live_c")
        st.caption(
            f"iteration {int(run['steps'][-1]):,} of {steps:,}" + (" — done" if run["done"] else "")
        )

    frame()


def _live_words(prob, words, P):
    """The live chart's rows: every word's current weight P[i, t] and score γ."""
    import pandas as pd

    return pd.DataFrame(
        [
            dict(
                sentence=i,
                position=t,
                word=w,
                label=y,
                weight=P[i, t],
                score=float(y * prob.X[i, t] @ prob.v),
                margin=float("nan"),
                support=False,
                selected=bool(P[i].argmax() == t),
                optimal=False,
                key=False,
            )
            for i, t, w, y in words
        ]
    )
