"""1 · Context from first principles: Y = softmax(X Xᵀ) X on static word vectors."""

import math

import streamlit as st

import core
from core import context
from ui import (
    anatomy_text,
    context_charts,
    context_runs,
    cut_notice,
    display,
    matrix_charts,
    models,
    predict,
    predict_answers,
    state,
    tables,
    takeaway,
    terms,
    widgets,
    wording,
)
from ui.escape import literal
from ui.numbers import extremes, signed, span

_, model = state.page_context()
model_label = models.label(model)  # the model's name in the prose
anatomy = anatomy_text.of(model)  # what this model adds to its input, and which norm
SENTENCE_CHARS = 2_000  # plenty for a sentence; the server cuts again (core.text.cap_text)

widgets.page_title("1 · Context from first principles")
st.markdown(
    f"Before any layer runs, {model_label}, like BERT, turns each word piece into a row of its "
    "embedding table. That "
    "row is fixed: *bank* gets exactly the same vector next to *money* as next to *river*. "
    "This page builds context with nothing but arithmetic on those rows, so you can see how far "
    "that alone goes. It uses its own two sentences (the sidebar sentence is used from page 2 on)."
)

left, right = st.columns(2)
with left:
    text_a = st.text_input(
        "Sentence A", "money bank grows", key="ctx_a", bind="query-params", max_chars=SENTENCE_CHARS
    )
with right:
    text_b = st.text_input(
        "Sentence B", "river bank flows", key="ctx_b", bind="query-params", max_chars=SENTENCE_CHARS
    )

sentences: dict[str, context.StaticSentence] = {}
for name, text in (("A", text_a), ("B", text_b)):
    try:
        sentences[name] = context_runs.static_sentence(model, text or "")
    except core.EmptyInput as err:
        st.info(f"Sentence {name}: {err} Type a few words that share one word with the other.")
if len(sentences) < 2:
    state.end_page()
for name, sentence in sentences.items():
    if sentence.truncated:
        st.warning(
            f"Sentence {name} has {sentence.n_pieces:,} word pieces; only the first "
            f"{len(sentence.tokens):,} are used: {cut_notice.ends_on(sentence.tokens)}.",
            icon="✂️",
        )
    note = matrix_charts.limit_note(len(sentence.tokens))
    if note:
        st.caption(f"Sentence {name}: {note}")
results = {name: context.parameter_free(s.vectors) for name, s in sentences.items()}


def _lead_range(leads) -> str:
    """'1.0–1.5': the smallest and largest self-score lead a sentence pair has ('—' for none);
    'from −0.4 to 1.5' when one is negative, so a minus sign never reads as a dash."""
    finite = [float(lead) for lead in leads if math.isfinite(lead)]
    if not finite:
        return "—"
    low, high = extremes(finite)
    if low < 0:
        return f"from {signed(low, 1, plus='')} to {signed(high, 1, plus='')}"
    return span(finite, ".1f")


def _leads_words(leads) -> str:
    """By how much the self-scores lead, said only of the rows where they do lead."""
    led = context.rows_led_by_self(leads)
    if led == len(leads):
        return f"each word's self-score leads the next best by {_lead_range(leads)}"
    return (
        f"the self-score leads the next best in {wording.count_of(led, len(leads))} "
        f"(S_ii minus the largest other S_ij runs {_lead_range(leads)})"
    )


display.head_switch()  # the readout of a long sentence's matrices (one image each)

# The payoff first: the shared word's two mixes, then the four steps that make them.
shared = context.shared_tokens(sentences["A"].tokens, sentences["B"].tokens)
if not shared:
    st.warning(
        "The two sentences share no word piece, so there is nothing to compare. "
        "Put one word into both (e.g. *bank*).",
        icon="🔍",
    )
    state.end_page()
word = (
    st.selectbox("Shared word piece", shared, key="ctx_word", bind="query-params")
    if len(shared) > 1
    else shared[0]
)
pair = context.compare_shared_word(word, sentences["A"], results["A"], sentences["B"], results["B"])
shown_word = literal(word)  # a token is text, never markup
# "two vectors" only if the cosine in Y is below 1 at the three decimals it is shown with
takeaway.show(
    f"One table row, two contexts: the two “{shown_word}”s are the same vector in X (cosine "
    f"{pair.cosine_before:.3f}), and after one softmax(X Xᵀ) X their cosine is "
    f"{pair.cosine_after:.3f}: "
    + (
        "each has mixed in its own sentence."
        if round(pair.cosine_after, 3) < 1.0
        else "each keeps nearly all of its weight for itself, so the mixes agree."
    ),
    help=terms.ahead("cosine"),
)
display.show_shared_word(
    word,
    {
        "A": (pair.weights_a, sentences["A"].tokens, pair.index_a),
        "B": (pair.weights_b, sentences["B"].tokens, pair.index_b),
    },
    key="ctx_payoff",
    filename="context-shared-word",
)
# The payoff, measured: the takeaway's two cosines as numbers right under the weights that make
# them (a cosine of two model-wide vectors is no bar of the figure above)
before, after = st.columns(2)
before.metric(f"cosine of “{shown_word}”, A vs B, in X", f"{pair.cosine_before:.3f}")
after.metric(
    f"cosine of “{shown_word}”, A vs B, in Y",
    f"{pair.cosine_after:.3f}",
    # a true minus, and no sign (nor arrow) for a change that rounds to zero
    delta=signed(pair.cosine_change, 3),
    delta_color="off",
    delta_arrow="down" if signed(pair.cosine_change, 3).startswith("−") else "off",
)
# how much the mixes differ follows the cosine in Y at the three decimals the metric shows
mixes = (
    f"and the mixes {wording.how_far_apart(pair.cosine_after)} because the neighbours differ"
    if round(pair.cosine_after, 3) < 1.0
    else "yet the mixes agree to three decimals: each row keeps nearly all of its weight"
)
st.caption(
    f"In X the two rows of “{shown_word}” are one and the same table entry (cosine 1). In "
    f"Y = softmax(X Xᵀ) X each is its row of weights above times its sentence's rows of X, "
    f"{mixes}. The steps below build Y."
)


def side_by_side(step: str, matrices: dict, title: str, square: bool, **figure_args) -> None:
    """One figure and one CSV button per sentence, A on the left, B on the right."""
    for column, (name, matrix) in zip(st.columns(2), matrices.items(), strict=True):
        tokens = sentences[name].tokens
        with column:
            display.show_token_matrix(
                matrix,
                tokens,
                f"{title} of {name}",
                f"ctx_{step}_{name}",
                f"context-{step}-{name}",
                square,
                x_title="dimension of the vector",
                **figure_args,
            )
            # token x token, or token x dimension
            columns = widgets.numbered(tokens) if square else tables.dimension_labels(matrix)
            tables.download_matrix(
                matrix,
                widgets.numbered(tokens),
                columns,
                f"context-{step}-{name}",
                key=f"ctx_csv_{step}_{name}",
            )


st.subheader("Step 1 · X, one static vector per word piece")
st.latex(r"X = \begin{bmatrix} x_1 \\ \vdots \\ x_n \end{bmatrix} \in \mathbb{R}^{n \times d}")
st.markdown(
    f"Each row is a word piece's entry in the table, d = {model.d_model} numbers, drawn as a "
    "band of colours (red below zero, blue above). No special piece and no position: just "
    "the words. The CSV holds every number."
)
side_by_side("x", {n: s.vectors for n, s in sentences.items()}, "X", square=False)

st.subheader("Step 2 · X Xᵀ, how alike every two words are")
st.latex(r"S = X X^\top,\qquad S_{ij} = x_i \cdot x_j")
diagonal_leads = {  # rows whose largest entry is their own, counted per sentence
    name: wording.count_of(
        context.rows_led_by_self(context.self_leads(r.similarity)), len(r.similarity)
    )
    for name, r in results.items()
}
st.markdown(
    "A dot product is large when two vectors point the same way. The diagonal holds each "
    "word's similarity with itself (its squared length); it is the largest in its row in "
    f"{diagonal_leads['A']} of A and {diagonal_leads['B']} of B. S is "
    "symmetric, S_ij = S_ji, since x_i·x_j = x_j·x_i."
)


def scores_and_weights() -> None:
    """Steps 2 and 3's heatmaps: each row's largest score and weight."""
    side_by_side(
        "xxt",
        {n: r.similarity for n, r in results.items()},
        "X Xᵀ",
        True,
        zmax=None,
        colorbar_title="x_i·x_j",
    )

    st.subheader("Step 3 · softmax of each row")
    st.latex(
        r"\alpha = \operatorname{softmax}(X X^\top),\qquad \alpha_{ij} = \frac{e^{S_{ij}}}{\sum_k e^{S_{ik}}}"
    )
    st.markdown("Softmax turns a row of similarities into positive weights that add up to 1.")
    side_by_side("softmax", {n: r.attn_weights for n, r in results.items()}, "softmax(X Xᵀ)", True)


predict.ask_choice(
    "ctx_strongest",
    predict_answers.static_strongest_other(sentences["A"], results["A"], sentences["B"].tokens),
    reveal=scores_and_weights,
    folded="the heatmap of X Xᵀ and Step 3, the softmax of each row",
)

st.subheader("Step 4 · Y, every word as a weighted average of the sentence")
st.latex(r"Y = \operatorname{softmax}(X X^\top)\,X,\qquad y_i = \sum_j \alpha_{ij}\,x_j")
st.markdown(
    "One matrix product makes every row of Y at once: no word waits for another, unlike a "
    "recurrent network that reads a sentence word by word. The price is that the product "
    "cannot tell where a row sits; page 2's last step measures it."
)
side_by_side("y", {n: r.output for n, r in results.items()}, "Y", square=False)

st.subheader("Why this works here: the vectors are short")
length = context_runs.length_effect(model, text_a or "", text_b or "", word)
if length is None:
    st.caption(
        f"“{shown_word}” lies beyond the {context_runs.pieces_a_run_keeps(model)} word pieces a run "
        "keeps, so "
        "there is no layer-0 row of it to compare."
    )
else:
    table, zero, longer = length.table_rows, length.layer_zero, length.stretched_rows
    st.markdown(
        "Softmax turns differences of scores into ratios: a score larger by Δ gets e^Δ times the "
        "weight. A word's score with itself is its squared length, so the payoff depends on how "
        "long the rows are. The word-piece table's rows are short, "
        f"{length.table_mean_length:.2f} on average over all {anatomy.dims.vocab_size:,} of "
        f"them and {span(table.lengths)} here: "
        f"{_leads_words(table.self_leads)}, so a word keeps "
        f"{span(table.self_weights)} of its weight for "
        f"itself{wording.neighbours_share(table.self_weights)}."
    )
    least_kept = extremes(zero.self_weights)[0]  # the smallest weight a word keeps for itself
    near_identity = least_kept >= 0.9995  # the identity to three decimals
    mixing = (
        "and e to the minus that is next to nothing: softmax(X Xᵀ) is the identity to three "
        "decimals and Y = X"
        if near_identity
        else f"so each word keeps {least_kept:.3f} or more of its weight for itself"
    )
    longer_kept = extremes(longer.self_weights)[0]
    stretched_note = f"Stretched to that length (× {length.stretch:.1f}, same directions), " + (
        "the table's own rows make the identity too: the length decides, not the direction."
        if near_identity and longer_kept >= 0.9995
        else "the table's own rows keep all of their weight for themselves, to three decimals."
        if longer_kept >= 0.9995  # a weight is at most 1: "1.000 or more" would say nothing
        else f"the table's own rows keep {longer_kept:.3f} or more for themselves."
    )
    st.markdown(
        f"The rows {model_label}'s first layer actually reads for the same pieces "
        f"({anatomy_text.attention_input_words(anatomy)}) are "
        f"{span(zero.lengths, '.1f')} long; "
        f"{_leads_words(zero.self_leads)}, {mixing}. "
        f"The two “{shown_word}”s have cosine {zero.pair.cosine_before:.3f} going in and "
        f"{zero.pair.cosine_after:.3f} coming out. " + stretched_note,
        help=terms.ahead("position rows", "segment rows", "LayerNorm", anatomy=anatomy),
    )
    kinds = {
        "table rows (steps 1–4)": table,
        "read by layer 0's heads": zero,
        f"table rows × {length.stretch:.1f}": longer,
    }
    tables.static_table(
        {
            "rows of X": list(kinds),
            "length ‖x‖": [span(k.lengths) for k in kinds.values()],
            "self-score lead": [_lead_range(k.self_leads) for k in kinds.values()],
            "weight kept on itself": [span(k.self_weights, ".3f") for k in kinds.values()],
            f"cosine of “{shown_word}”, X → Y": [
                f"{k.pair.cosine_before:.3f} → {k.pair.cosine_after:.3f}" for k in kinds.values()
            ],
        },
        decimals={},
    )
    tokens_a = sentences["A"].tokens
    display.show_bars(  # HTML bars for a sentence; none past the policy's size
        len(tokens_a),
        html=lambda: context_charts.weights_by_length(
            word,
            tokens_a,
            {"table rows": table.pair.weights_a, "read by layer 0's heads": zero.pair.weights_a},
            name="ctx_length",
        ),
        plotly=None,
        key="ctx_length",
    )
    st.caption(
        "Self-score lead: S_ii minus the largest other S_ij in the row, smallest to largest over "
        "both sentences; the other words get at most e^(−lead) times the word's own weight. "
        "Real attention does not depend on short inputs: W_q and W_k (page 2) and the division "
        "by √d_k (page 3) set the size of its scores."
    )

st.subheader("What this version cannot do")
st.markdown(
    "Nothing above was learned: the formula has no parameters. That makes it general, the same "
    "rule for every text and every task with nothing to fit, and for the same reason it cannot "
    "adapt to a task: *bank* prefers the same neighbours whether the job is translating the "
    "sentence or judging its mood. And each vector plays three parts at once: it asks (row of "
    "X), it is compared (column of Xᵀ), and it is mixed in (X on the right). The next page gives "
    "each part its own trainable matrix."
)
st.caption(
    "Sources: Vaswani et al. (2017), attention as softmax-weighted averages; Devlin et al. "
    "(2019), BERT's word-piece embedding table."
)
