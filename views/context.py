"""Learning path 1: context from first principles, Y = softmax(X Xᵀ) X on static word vectors."""

import streamlit as st

import core
from core import learning
from ui import learning_charts, state, widgets
from ui.escape import literal

_, model = state.page_context()
SENTENCE_CHARS = 2_000  # plenty for a sentence; the server cuts again (core.text.cap_text)

st.title("1 · Context from first principles")
st.markdown(
    "Before any layer runs, BERT turns each word piece into a row of its embedding table. That "
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

sentences: dict[str, learning.StaticSentence] = {}
for name, text in (("A", text_a), ("B", text_b)):
    try:
        sentences[name] = learning.static_sentence(model, text or "")
    except core.EmptyInput as err:
        st.info(f"Sentence {name}: {err} Type a few words that share one word with the other.")
if len(sentences) < 2:
    st.stop()
for name, sentence in sentences.items():
    if sentence.truncated:
        st.warning(
            f"Sentence {name} has {sentence.n_pieces} word pieces; only the first "
            f"{len(sentence.tokens)} are used.",
            icon="✂️",
        )
    note = learning_charts.limit_note(len(sentence.tokens))
    if note:
        st.caption(f"Sentence {name}: {note}")
results = {name: learning.parameter_free(s.vectors) for name, s in sentences.items()}
widgets.head_switch()  # the readout of a long sentence's matrices (one image each)


def side_by_side(step: str, matrices: dict, title: str, square: bool, **figure_args) -> None:
    """One figure and one CSV button per sentence, A on the left, B on the right."""
    for column, (name, matrix) in zip(st.columns(2), matrices.items(), strict=True):
        tokens = sentences[name].tokens
        with column:
            widgets.show_matrix(
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
            columns = (
                widgets.numbered(tokens) if square else [f"d{k}" for k in range(matrix.shape[1])]
            )
            widgets.download_matrix(
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
    "band of colours (red below zero, blue above). No `[CLS]`/`[SEP]` and no position: just "
    "the words. The CSV holds every number."
)
side_by_side("x", {n: s.vectors for n, s in sentences.items()}, "X", square=False)

st.subheader("Step 2 · X Xᵀ, how alike every two words are")
st.latex(r"S = X X^\top,\qquad S_{ij} = x_i \cdot x_j")
st.markdown(
    "A dot product is large when two vectors point the same way. The diagonal holds each "
    "word's similarity with itself (its squared length), usually the largest in its row. S is "
    "symmetric, S_ij = S_ji, since x_i·x_j = x_j·x_i."
)
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

st.subheader("Step 4 · Y, every word as a weighted average of the sentence")
st.latex(r"Y = \operatorname{softmax}(X X^\top)\,X,\qquad y_i = \sum_j \alpha_{ij}\,x_j")
side_by_side("y", {n: r.output for n, r in results.items()}, "Y", square=False)

st.subheader("The payoff: the same word, two vectors")
shared = learning.shared_tokens(sentences["A"].tokens, sentences["B"].tokens)
if not shared:
    st.warning(
        "The two sentences share no word piece, so there is nothing to compare. "
        "Put one word into both (e.g. *bank*).",
        icon="🔍",
    )
    st.stop()
word = (
    st.selectbox("Shared word piece", shared, key="ctx_word", bind="query-params")
    if len(shared) > 1
    else shared[0]
)
pair = learning.compare_shared_word(
    word, sentences["A"], results["A"], sentences["B"], results["B"]
)
shown_word = literal(word)  # a token is text, never markup
before, after = st.columns(2)
before.metric(f"cosine of “{shown_word}”, A vs B, in X", f"{pair.cosine_before:.3f}")
after.metric(
    f"cosine of “{shown_word}”, A vs B, in Y",
    f"{pair.cosine_after:.3f}",
    delta=f"{pair.cosine_change:+.3f}",
    delta_color="off",
)
st.markdown(
    f"In X the two rows of “{shown_word}” are one and the same table entry (cosine 1). In Y "
    "each is a mix of its own sentence, and the mixes differ because the neighbours differ:"
)
widgets.show_shared_word(
    word,
    {
        "A": (pair.weights_a, sentences["A"].tokens, pair.index_a),
        "B": (pair.weights_b, sentences["B"].tokens, pair.index_b),
    },
    key="ctx_payoff",
    filename="context-shared-word",
)

st.subheader("What this version cannot do")
st.markdown(
    "Nothing above was learned. The weights depend only on the table vectors, so *bank* always "
    "prefers the same neighbours whatever the task, and each vector plays three parts at once: "
    "it asks (row of X), it is compared (column of Xᵀ), and it is mixed in (X on the right). "
    "The next page gives each part its own trainable matrix."
)
st.caption(
    "Sources: Vaswani et al. (2017), attention as softmax-weighted averages; Devlin et al. "
    "(2019), BERT's word-piece embedding table."
)
