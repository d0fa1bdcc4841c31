"""0 · Attention by hand: attention on four words in four dimensions, small enough to check on paper."""

import streamlit as st

from core import by_hand
from ui import (
    anatomy_text,
    by_hand_charts,
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
)
from ui.escape import literal

_, model = state.page_context()
name = models.label(model)

widgets.page_title("0 · Attention by hand")
st.markdown(
    "Before the real model, a toy you can check with a pencil. Each word gets four numbers, "
    "one per made-up feature, so a dot product is four small multiplications you can do in "
    "your head. Everything on this page is computed live from these vectors."
)


def four_features() -> None:
    """Sections 1 and 2: the toy's four features per word, then S, e^S, the weights and Y."""
    text = st.text_input(
        f"Sentence: two to four of {', '.join(by_hand.TOY_VECTORS)}",
        "money bank grows",
        key="hand_text",
        bind="query-params",
        max_chars=200,
    )
    # one word over the limit, to know whether any was left out
    words, unknown = by_hand.toy_words(text or "", limit=by_hand.MAX_TOY_WORDS + 1)
    if len(words) > by_hand.MAX_TOY_WORDS:
        words = words[: by_hand.MAX_TOY_WORDS]
        st.caption(f"Only the first {by_hand.MAX_TOY_WORDS} of the toy's words are used.")
    if unknown:
        st.caption(
            "Not in the toy's vocabulary, left out: " + ", ".join(literal(w) for w in unknown) + "."
        )
    if len(words) < 2:
        st.info(
            f"Type at least two of the toy's words: {', '.join(by_hand.TOY_VECTORS)}.", icon="✍️"
        )
    else:
        toy = by_hand.toy_sentence(words)
        result = by_hand.attention_by_hand(toy.vectors)
        # The payoff first: the weights every word gives every word, then how they are made.
        kept = result.self_weights  # (n,) each word's weight on itself
        most, least = result.keeps_most_and_least()
        takeaway.show(
            "Each row of α is one word's recipe, weights that add up to 1: "
            f"**{literal(toy.words[most])}** keeps {kept[most]:.3f} of its weight for itself, "
            f"**{literal(toy.words[least])}** only {kept[least]:.3f}, so its new vector y is "
            "the most mixed."
            if most != least
            else "Each row of α is one word's recipe, weights that add up to 1: every word "
            f"keeps {kept[most]:.3f} of its weight for itself."
        )
        display.show_html_figure(
            matrix_charts.pair_grid(
                result.attn_weights, toy.words, "α = softmax of each row", name="hand_weights"
            )
        )
        st.subheader("1 · Four features per word")
        tables.static_table(
            {"word": list(toy.words)} | toy.feature_columns(),
            decimals=dict.fromkeys(by_hand.TOY_FEATURES, 0),  # the toy's numbers are whole
        )

        st.subheader("2 · Scores, exponentials, weights")
        st.latex(  # stacked, so it fits a phone's width
            r"\begin{gathered} S_{ij} = x_i\cdot x_j \\ \alpha_{ij} = \frac{e^{S_{ij}}}"
            r"{\sum_k e^{S_{ik}}} \\ y_i = \sum_j \alpha_{ij}\,x_j \end{gathered}"
        )
        row = 1 if len(words) > 1 else 0
        # Small enough to print every number: HTML cells, so the first tab loads no plotly.js.
        first, second = st.columns(2)
        with first:
            display.show_html_figure(
                matrix_charts.pair_grid(
                    result.scores,
                    toy.words,
                    "S = X Xᵀ",
                    name="hand_scores",
                    colorbar_title="x_i·x_j",
                    zmax=None,
                    decimals=0,  # dot products of whole numbers
                )
            )
        with second:
            st.caption(
                "Softmax of each row of S gives α, the grid at the top of this tab: a larger "
                "score, a larger weight."
            )
        word = toy.words[row]
        terms = " : ".join(f"e^{result.scores[row, j]:.0f}" for j in range(len(words)))
        values = " : ".join(f"{result.exponentials[row, j]:.2f}" for j in range(len(words)))
        # three decimals: at two, 0.018 + 0.976 + 0.007 printed as 0.02 + 0.98 + 0.01 = 1.01
        weights = ", ".join(
            f"{literal(toy.words[j])} {result.attn_weights[row, j]:.3f}" for j in range(len(words))
        )
        st.markdown(
            f"Check the row of **{literal(word)}** on paper: its scores are its dot products with every "
            f"word, {', '.join(f'{s:.0f}' for s in result.scores[row])}. Exponentials {terms} ≈ "
            f"{values}, which add up to {result.row_sums[row]:.2f}. Divide each by the sum: {weights}. "
            "Every weight is positive and the row adds up to 1 (up to rounding in the last digit)."
        )
        display.show_html_figure(
            matrix_charts.token_grid(
                result.output, toy.words, by_hand.TOY_FEATURES, "Y = α X", name="hand_output"
            )
        )
        st.caption(
            "Each column of Y is one of the four features. Each word's new vector is a blend of "
            "the sentence, weighted by its row of α."
        )


def soft_lookup() -> None:
    """Section 3: attention as a soft dictionary lookup, with a sharpness slider."""
    st.subheader("3 · A soft dictionary lookup")
    st.markdown(
        "A Python dictionary finds the one key equal to what you ask for and returns its value. "
        "Attention asks with a **query**, compares it with every **key**, and returns a blend of "
        "all **values**, weighted by how well each key matches. A hard lookup keeps only the best "
        "match; the soft one keeps every match in proportion, which is what lets training nudge "
        "the weights a little at a time (a hard argmax has no gradient).",
        help=terms.ahead("gradient"),
    )
    st.latex(  # stacked, so it fits a phone's width
        r"\begin{gathered}\text{hard: } v_{j^*},\ j^* = \arg\max_j q\cdot k_j"
        r"\\ \text{soft: } \sum_j \operatorname{softmax}_j(c\, q\cdot k_j)\, v_j\end{gathered}"
    )
    left, right = st.columns(2)
    query_word = left.selectbox(
        "Query", list(by_hand.TOY_VECTORS), index=1, key="hand_query", bind="query-params"
    )
    sharpness = right.select_slider(
        "Sharpness c", [0.0, 0.5, 1.0, 2.0, 5.0], value=1.0, key="hand_sharp", bind="query-params"
    )
    keys = by_hand.toy_sentence(tuple(by_hand.TOY_VECTORS))
    found = by_hand.lookup(
        by_hand.TOY_VECTORS[query_word], keys.vectors, keys.vectors, float(sharpness)
    )

    def lookup_figures() -> None:
        """The weight the soft and the hard lookup give each key, and what each returns."""
        display.show_weight_bars(
            keys.words,
            {"soft lookup": found.soft_weights, "hard lookup": found.hard_weights},
            f"Query “{literal(query_word)}”: weight on each key",
            key="hand_lookup",
            filename="soft-lookup",
        )
        st.dataframe(
            {"retrieved": ["soft", "hard"]}
            | {
                feature: [
                    round(float(found.soft_value[k]), 3),
                    round(float(found.hard_value[k]), 3),
                ]
                for k, feature in enumerate(by_hand.TOY_FEATURES)
            },
            hide_index=True,
        )

    predict.ask_choice(
        "hand_soft_lookup",
        predict_answers.soft_lookup_spread(keys.words, keys.vectors, query_word, float(sharpness)),
        reveal=lookup_figures,
        folded="the weight on each key and the vector each lookup returns",
    )
    st.caption(
        "Keys and values are the toy vectors themselves. c = 0 returns the plain average of all values; a large c approaches the hard lookup. "
        "In a transformer c is 1/√d_k, and training sets how far apart the scores are.",
        help=terms.ahead("√d_k"),
    )


def fixed_against_computed() -> None:
    """Section 4: a dense layer's fixed mixing weights against attention's."""
    st.subheader("4 · Fixed weights against weights computed from the input")
    st.markdown(
        "A dense layer that mixes positions would hold one fixed n × n matrix W after training: "
        "position 1 takes the same share of position 0 whatever words stand there. Attention "
        "computes its matrix from the words themselves. Below, two sentences that differ in their "
        "first word, and the row of *bank* (position 1) under each rule."
    )
    st.latex(
        r"\begin{gathered}\text{dense: } Y = W X \\"
        r" \text{attention: } Y = \operatorname{softmax}(X X^\top)\, X\end{gathered}"
    )
    pair = (("money", "bank", "grows"), ("river", "bank", "grows"))
    x_first, x_second = (by_hand.toy_sentence(words).vectors for words in pair)
    dense = by_hand.dense_token_mixing(3, seed=0)
    contrast = by_hand.mixing_contrast(x_first, x_second, dense, row=1)
    panels = (  # (title, its row under each sentence, the rule: in the key and file name)
        ("Dense layer: row of position 1", contrast.dense_first, contrast.dense_second, "dense"),
        (
            "Attention: row of bank",
            contrast.attention_first,
            contrast.attention_second,
            "attention",
        ),
    )
    for column, (title, first, second, rule) in zip(st.columns(2), panels, strict=True):
        with column:
            display.show_weight_bars(
                ["position 0", "position 1", "position 2"],
                {"money bank grows": first, "river bank grows": second},
                title,
                key=f"hand_{rule}",
                filename=f"{rule}-mixing",
            )
    st.caption(
        "The dense weights are a seeded random matrix standing in for trained ones: any fixed "
        "matrix gives two identical bars. The attention bars differ because the words differ."
    )
    reach = model.n_layers  # a width-3 window widens a token's view by one place per side
    with st.expander("And a convolution?"):
        st.markdown(
            "A convolution is the dense rule cut down to a window: each position mixes its few "
            "neighbours (say the one before, itself and the one after) with fixed weights, the "
            "same weights at every position. It would give two identical bars here too. Three "
            "differences from self-attention follow. Its weights are set by training and "
            "blind to the words, while attention's are computed from them. Its window knows "
            "which neighbour is which, so it needs no position vectors; attention mixes a bag of "
            "tokens and has to be told the order (page 2b). And it sees only nearby tokens: a "
            f"stack of {reach} width-3 convolutions, as deep as {name}, lets a token read at "
            f"most {reach} places to each side, where one attention layer reads all of its "
            "input. Vaswani et al. (2017) count O(n/k) layers of width-k convolutions to link "
            "every pair of n tokens, against one layer of self-attention, at the price of the "
            "n² pairs of section 5."
        )


def cost() -> None:
    """Section 5: the multiply-adds of one layer, and where the n² part takes over."""
    st.subheader("5 · What it costs: every pair, so n²")
    anatomy = anatomy_text.of(model)  # grouped keys and values, a gated feed-forward
    st.markdown(
        f"The score matrix has one entry per pair of tokens. For {name}'s sizes "
        f"(d_model = {model.d_model}, {model.n_heads} heads"
        + (
            f" sharing {model.n_kv_heads} key/value heads"
            if model.n_kv_heads < model.n_heads
            else ""
        )
        + f", feed-forward width {anatomy.dims.d_ff}) "
        "one layer needs these multiply-adds:",
        help=terms.ahead("layer", "head", "Q, K, V", "W_O", "d_ff"),
    )
    st.latex(anatomy_text.cost_latex(anatomy))
    sizes = (model.d_model, model.n_heads, anatomy.dims.d_ff, anatomy.d_q, anatomy.d_kv)
    lengths = [8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096]
    costs = [by_hand.layer_cost(n, *sizes, anatomy.ffn_matrices) for n in lengths]
    display.show_figure(
        by_hand_charts.cost_figure(
            lengths,
            {
                "projections (∝ n)": [c.projections for c in costs],
                "scores + mixing (∝ n²)": [c.scores + c.mixing for c in costs],
                "feed-forward (∝ n)": [c.feed_forward for c in costs],
            },
            f"One layer of {name}, by sentence length",
        ),
        key="hand_cost",
        filename="attention-cost",
    )
    crossing = by_hand.break_even_length(
        model.d_model, anatomy.dims.d_ff, anatomy.d_q, anatomy.d_kv, anatomy.ffn_matrices
    )
    at_max = by_hand.layer_cost(model.max_positions, *sizes, anatomy.ffn_matrices)
    st.markdown(
        f"Double n and the n² part grows fourfold. It overtakes the two linear parts together at "
        f"n = {anatomy_text.break_even_words(anatomy)} = **{crossing:,}** tokens. {name} reads at most {model.max_positions} positions, "
        f"where the n² part is {at_max.quadratic_share:.0%} of a layer's multiply-adds and each "
        f"layer stores {at_max.attention_cells:,} attention weights. Longer inputs are where "
        "the quadratic cost bites."
    )


SECTIONS = {
    "1–2 · By hand": four_features,
    "3 · Soft lookup": soft_lookup,
    "4 · Fixed vs computed": fixed_against_computed,
    "5 · Cost": cost,
}
# One part at a time, drawn only when its tab is open: all at once were seven figures, a first
# visit far heavier than the reference app's (bench/bench_browser.py; bench/RESULTS.md).
widgets.section_tabs(SECTIONS, key="hand_section")

st.caption(
    "Sources: Bahdanau, Cho & Bengio (2015), attention as soft alignment; Vaswani et al. (2017), "
    "scaled dot-product attention and its cost per layer (Table 1); Tolstikhin et al. (2021), "
    "MLP-Mixer, mixing tokens with fixed trained weights."
)
