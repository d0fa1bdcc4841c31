"""2 · Queries, keys and values: Q = X W_q, K = X W_k, V = X W_v, one head at a time."""

import streamlit as st

from core import context, qkv
from ui import (
    anatomy_text,
    context_runs,
    display,
    formulas,
    matrix_charts,
    models,
    predict,
    predict_answers,
    qkv_charts,
    qkv_runs,
    sidebar,
    state,
    tables,
    takeaway,
    terms,
    traces,
    widgets,
    wording,
)
from ui.escape import literal
from ui.numbers import largest_magnitude, span

inputs, model = state.page_context()
model_label = models.label(model)  # the model's name in the prose

widgets.page_title("2 · Queries, keys and values")
st.markdown(
    "On page 1 each vector did three jobs at once. Here three matrices give each job its own "
    "vector: a **query** (what a token looks for), a **key** (what it is found by) and a "
    "**value** (what it hands over once chosen), for the sidebar's sentence."
)
trace = traces.trace_or_stop(model, inputs)
tokens = trace.tokens
labels = widgets.numbered(tokens)

# One row of controls, so the first step's matrices reach the first screen.
source_column, size, seed_column = st.columns(3)
source = source_column.radio(
    "Where W_q, W_k and W_v come from",
    ["random", "trained head"],  # plain options: they are what a shared link stores
    key="qkv_source",
    bind="query-params",
    horizontal=True,
    help=f"random: seeded draws, nothing learned. trained head: one head of {model_label}.",
)
rotary_gap = ""  # for a rotary model's trained head: how far the page's weights are from its own
if source == "random":
    with size:
        d_k = st.slider(
            "d_k, width of queries, keys and values", 1, 64, 8, key="qkv_dk", bind="query-params"
        )
    with seed_column:
        seed = widgets.whole_number_input("Random seed", 0, 9_999, 0, key="qkv_seed")
    one_head = qkv_runs.random_head(
        model, trace, int(d_k), int(seed), scale=inputs.scale, causal=inputs.causal
    )
    specials = anatomy_text.special_rows(trace.tokens, trace.special)
    with_specials = f" plus {specials}" if specials else ""
    where = f"X holds the static word-piece vectors, as on page 1{with_specials}; W entries are drawn from N(0, 1) with seed {int(seed)}"
else:
    with size:
        layer = widgets.layer_slider(model)
    with seed_column:
        head = widgets.head_slider(model)
    one_head = qkv_runs.trained_head(
        model, trace, layer, head, scale=inputs.scale, causal=inputs.causal
    )
    anatomy = anatomy_text.of(model)
    where = (
        f"X is what layer {layer}'s heads read"
        + (f" (the layer's input after its first {anatomy.norm_name})" if anatomy.pre_norm else "")
        + f"; W_q, W_k, W_v are the slices of head {head}"
        + (" (with their biases)" if anatomy.arch.bias else f" ({model_label} has no biases)")
        + anatomy_text.shared_key_value_words(anatomy, head)
    )
    if anatomy.arch.positions == "rotary":  # the model turns q and k by position; this page not
        moved = qkv.rows_with_another_top(
            one_head.result.attn_weights, trace.attentions[layer, head]
        )
        rotary_gap = (
            f"In {wording.count_of(moved, trace.n_tokens)} the largest weight sits on another key "
            f"than in {model_label}'s own weights for this head"
            if moved
            else f"Each row's largest weight still sits on the key {model_label}'s own weights "
            "for this head choose"
        )
        where += (
            f". {model_label} also turns every q and k by its position (rotary positions, see "
            "Positional encoding) before the product: left out here, so these scores and "
            f"weights are not the model's own. {rotary_gap}"
        )
x, projections, result = one_head.x, one_head.projections, one_head.result
d_k = projections.d_k
switches = ("scores divided by √d_k" if inputs.scale else "scores not scaled") + (
    ", causal mask on" if inputs.causal else ""
)
# The page's point first: one vector for three jobs picks itself; three projections need not.
# under the sidebar's causal mask, as the projected head below: like is compared with like
one_vector_weights = context.parameter_free(x, causal=inputs.causal).attn_weights
picks_itself_one_vector = qkv.rows_that_pick_themselves(one_vector_weights)
picks_itself_projected = qkv.rows_that_pick_themselves(result.attn_weights)
tied_one_vector = qkv.rows_tied_with_another(one_vector_weights)
tied_projected = qkv.rows_tied_with_another(result.attn_weights)


def _ties(tied: int) -> str:
    """' (in k more, another key ties it: no win)' when k rows share their top weight between
    the token and another key (core.qkv.top_keys: page 8's tie rule), else ''."""
    return f" (in {tied} more, another key ties it: no win)" if tied else ""


def roles_verdict() -> str:
    """Whether the projections pulled looking and being found apart, from the two counts."""
    if picks_itself_projected < picks_itself_one_vector:
        return "looking and being found have come apart."
    return "here they have not come apart; try another seed or a trained head."


takeaway.show(
    # checkable in the maps right below it: count the diagonal 1s alone in their row; the
    # formula, softmax(X Xᵀ), is Step 1's
    "One vector for all three jobs gives a token's largest weight to the token itself in "
    f"{picks_itself_one_vector} of {len(tokens)} rows{_ties(tied_one_vector)}; these W_q and "
    f"W_k do in {picks_itself_projected} of {len(tokens)}{_ties(tied_projected)}: "
    f"{roles_verdict()}"
)
# HTML cells, as Step 1's matrices below: 1 marks the key holding a row's largest weight (every
# key of a tie); the weights themselves wait for Step 2's question
for column, (weights, name, key) in zip(
    st.columns(2),
    [
        (one_vector_weights, "one vector, X Xᵀ", "winners_one"),
        (result.attn_weights, "W_q, W_k: Q Kᵀ", "winners_projected"),
    ],
    strict=True,
):
    with column:
        display.show_token_matrix(
            qkv.top_key_marks(weights),  # (n, n) 1 or 0
            tokens,
            f"{name}: 1 = the row's largest weight",
            f"qkv_{key}",
            f"qkv-{key}",
            square=True,
            colorbar_title="largest",
            decimals=0,  # marks, not weights: 1 or 0
        )
if rotary_gap:  # said beside the maps it qualifies, not only in the folded note below
    st.caption(
        f"These weights leave out {model_label}'s rotary turns of q and k (see “What X and W are "
        f"here” below). {rotary_gap}."
    )
if source != "random":  # random weights were never trained, so they have no inputs to leave
    sidebar.off_distribution_note(inputs, model_label)
note = matrix_charts.limit_note(len(tokens))
if note:
    st.caption(note)


def matrix_figure(matrix, title: str, key: str, square: bool = False, **args) -> None:
    """Show one matrix with its shape in the title, and a CSV button under it."""
    display.show_token_matrix(matrix, tokens, title, f"qkv_{key}", f"qkv-{key}", square, **args)
    columns = labels if square else tables.dimension_labels(matrix)
    tables.download_matrix(matrix, labels, columns, f"qkv-{key}", key=f"qkv_csv_{key}")


# Page 1's two sentences, which Steps 5 and 7 come back to (static vectors: cheap).
page_one = context_runs.static_sentence(model, "money bank grows")
page_one_result = context.parameter_free(page_one.vectors)
page_one_b = context_runs.static_sentence(model, "river bank flows")
# "bank" unless this tokenizer cuts it into pieces of its own (then their first shared piece)
page_one_word = context.shared_piece(page_one.tokens, page_one_b.tokens, "bank") or "bank"
page_one_payoff = context.compare_shared_word(
    page_one_word,
    page_one,
    page_one_result,
    page_one_b,
    context.parameter_free(page_one_b.vectors),
)
money_index, bank_index = (
    context.piece_index(page_one.tokens, "money") or 0,
    page_one_payoff.index_a,
)


def three_projections() -> None:
    """Step 1: Q, K and V, three projections of every token."""
    st.subheader("Step 1 · Three projections of every token")
    # the three matrices first (they open the page's first screen): what the step makes, then
    # the formula that makes them and what it means
    for column, (matrix, name) in zip(
        st.columns(3), [(result.query, "Q"), (result.key, "K"), (result.value, "V")], strict=True
    ):
        with column:
            matrix_figure(matrix, name, name.lower())
    st.latex(
        # gathered: two short lines instead of one that scrolled sideways on a phone
        r"\begin{gathered}Q = X W_q,\quad K = X W_k,\quad V = X W_v\\ "
        rf"X \in \mathbb{{R}}^{{n \times {model.d_model}}},\; W \in \mathbb{{R}}^{{{model.d_model} \times {d_k}}}"
        r"\end{gathered}"
    )
    n = len(tokens)
    # under the mask a row sees only earlier keys: a repeated piece's first copy cannot see its
    # later twins, so only the later copies tie
    repeated = (
        " A repeated piece's copies have equal rows of X, so they tie for the largest weight"
        + (" wherever the later copy can see the earlier one." if inputs.causal else ".")
        if tied_one_vector
        else ""
    )
    one_vector_formula = (
        "softmax(X Xᵀ + M), with the causal mask M of the head below,"
        if inputs.causal
        else "softmax(X Xᵀ)"
    )
    st.markdown(
        "Three questions, three matrices. **W_q** makes what a token looks for, **W_k** what it "
        "offers to be found by, **W_v** what it hands over once found. On page 1 one vector "
        f"answered all three: on these X, {one_vector_formula} gives each token's largest weight to "
        f"itself in {picks_itself_one_vector} of {n} rows{_ties(tied_one_vector)}, and what "
        "a token hands over is the very vector it was matched on."
        f"{repeated} With the W_q and W_k chosen here, the largest weight goes to the token "
        f"itself in {picks_itself_projected} of {n} rows{_ties(tied_projected)}: "
        f"{roles_verdict()} "
        "W_v does the same for what travels: a value need not carry the features its key was "
        "matched by."
    )


# The row step 2's question asks about, and the query step 4 opens on: the first piece after a
# leading special ([CLS], <s>), or the second piece, which under a mask has two keys to weigh.
RATIO_QUERY = 1


def scores_and_weights() -> None:
    """Step 2: every query against every key, then softmax per row."""
    st.subheader("Step 2 · Scores and weights")
    st.latex(  # written from the sidebar's switches, as the figures below were computed
        rf"\alpha = {formulas.attention(inputs.scale, inputs.causal)}"
        + formulas.mask_line(inputs.causal)
    )
    st.markdown(
        "Row *i* compares query *i* with every key. Softmax turns each row into weights that sum "
        "to 1: how much token *i* takes from each token *j*."
    )
    scores_column, weights_column = st.columns(2)
    with scores_column:
        matrix_figure(
            result.scores, "scores", "scores", square=True, zmax=None, colorbar_title="score"
        )
    with weights_column:  # the weights give the question's answer away: they wait for a pick
        predict.ask_choice(
            "qkv_weight_ratio",
            predict_answers.weight_ratio(result, tokens, RATIO_QUERY),
            reveal=lambda: matrix_figure(result.attn_weights, "weights α", "weights", square=True),
            folded="the weights α",
        )


def output() -> None:
    """Step 3: each output row is a weighted sum of value rows."""
    st.subheader("Step 3 · The output")
    st.latex(r"\text{output} = \alpha V,\qquad o_i = \sum_j \alpha_{ij}\, v_j")
    matrix_figure(result.output, "output αV", "output")


def one_query() -> None:
    """Step 4: one query's dot products, weights and weighted values."""
    st.subheader("Step 4 · Follow one query")
    query_index = widgets.token_picker("Query token i", tokens, RATIO_QUERY, key="qkv_query")
    row = qkv.follow_query(result, query_index)
    st.latex(
        r"\begin{gathered}q_i \cdot k_j = \sum_{c=1}^{d_k} (q_i \odot k_j)_c \;\to\; "
        + (r"\frac{q_i \cdot k_j}{\sqrt{d_k}} \;\to\; " if inputs.scale else "")
        + r"\alpha_{ij}\\ \to\; o_i = \sum_j \alpha_{ij} v_j\end{gathered}"
    )
    display.show_bars(
        len(tokens),
        None,
        lambda: qkv_charts.query_steps(
            row.dots, row.scores, row.weights, tokens, query_index, inputs.scale
        ),
        key="qkv_steps",
        filename=f"qkv-query-{query_index}",
    )
    st.caption("The red bar is the query token's own key: a token may attend to itself too.")
    products_column, values_column = st.columns(2)
    with products_column:
        st.markdown(
            "Each row is q_i ⊙ k_j, component by component; a row's sum is the dot product above. "
            "Red and blue components pull the score in opposite directions."
        )
        matrix_figure(row.products, f"q_{query_index} ⊙ k_j", "products")
    with values_column:
        st.markdown(
            "Each row is a value vector scaled by its weight; the last row is their sum, "
            f"row {query_index} of the output."
        )
        display.show_matrix(
            row.weighted_values.shape,
            None,
            lambda: qkv_charts.weighted_values(
                row.weighted_values, row.output, tokens, query_index
            ),
            key="qkv_weighted",
            filename=f"qkv-weighted-values-{query_index}",
        )


def pair_words() -> str:
    """Step 5's example: the pair whose two scores q_i·k_j and q_j·k_i differ most, then what
    the weights make of it; under a causal mask, what the mask does to it."""
    # The pair is chosen by the scores, which exist for every pair before any mask: the weights'
    # largest gap under a causal mask is always a key the mask hides, the mask's doing.
    i, j = qkv.most_asymmetric_pair(result.dot)
    if i == j:  # one token, or nothing uneven to show
        return ""
    token_i, token_j = (literal(labels[k]) for k in (i, j))
    scores = (
        f" Here the query of **{token_i}** meets the key of **{token_j}** with "
        f"q·k = {result.dot[i, j]:.3f}, while the query of {token_j} meets the key of {token_i} "
        f"with {result.dot[j, i]:.3f}."
    )
    if not result.causal:
        return scores + (
            f" After the softmax, {token_i} gives {token_j} a weight of "
            f"{result.attn_weights[i, j]:.3f} and {token_j} gives {token_i} "
            f"{result.attn_weights[j, i]:.3f}."
        )
    earlier, later = (literal(labels[k]) for k in sorted((i, j)))
    return scores + (
        " **The mask.** On top of both, the causal mask hides every later key from a query, "
        "whatever the scores: of this pair only the later piece can weigh the earlier, so "
        f"{later} gives {earlier} {result.attn_weights[max(i, j), min(i, j)]:.3f} and "
        f"{earlier} gives {later} {result.attn_weights[min(i, j), max(i, j)]:.3f}."
    )


def not_symmetric() -> None:
    """Step 5: why α(i→j) differs from α(j→i)."""
    st.subheader("Step 5 · Attention is not symmetric, for two reasons")
    # the pieces as this tokenizer cuts them: "money" may be "␣mo" + "ney"
    money, bank = (literal(page_one.tokens[k]) for k in (money_index, bank_index))
    st.markdown(
        "**The softmax.** Each row of α is divided by its own sum, so even symmetric scores give "
        "asymmetric weights. Page 1's S = X Xᵀ is symmetric (x_i·x_j = x_j·x_i), yet there "
        f"α({money}→{bank}) = {page_one_result.attn_weights[money_index, bank_index]:.3f} and "
        f"α({bank}→{money}) = {page_one_result.attn_weights[bank_index, money_index]:.3f}: the "
        f"rows of *{money}* and *{bank}* have different sums. "
        "**The projections.** With W_q ≠ W_k the scores themselves differ: query *i* meets key *j* "
        "through q_i·k_j, but *j* meets *i* through q_j·k_i." + pair_words()
    )
    st.latex(r"S - S^\top \ \text{(scores)},\quad \alpha - \alpha^\top \ \text{(weights)}")
    page_one_gap = largest_magnitude(qkv.asymmetry(page_one_result.similarity))
    symmetric = wording.how_symmetric(page_one_gap, largest_magnitude(page_one_result.similarity))
    st.caption(
        f"Page 1, “money bank grows”: max |S − Sᵀ| = {page_one_gap:.1e} ({symmetric}). This "
        "head, below: the left map is the part the projections make, the right "
        "one adds what the softmax's row sums make"
        + (" and what the causal mask hides." if result.causal else ".")
    )
    left, right = st.columns(2)
    with left:
        display.show_matrix(
            result.dot.shape,
            None,
            lambda: qkv_charts.score_asymmetry_heatmap(
                qkv.asymmetry(result.dot), tokens, "S − Sᵀ, q_i·k_j minus q_j·k_i"
            ),
            key="qkv_score_asymmetry",
            filename="qkv-score-asymmetry",
        )
    with right:
        display.show_matrix(
            result.attn_weights.shape,
            None,
            lambda: qkv_charts.asymmetry_heatmap(
                qkv.asymmetry(result.attn_weights),
                tokens,
                "α − αᵀ, weight i→j minus weight j→i",
            ),
            key="qkv_asymmetry",
            filename="qkv-asymmetry",
        )


def one_matrix() -> None:
    """Step 6: W_q W_kᵀ folded into one bilinear form."""
    st.subheader("Step 6 · One matrix between two tokens")
    st.latex(
        r"q_i \cdot k_j = (x_i W_q)(x_j W_k)^\top = x_i\, \underbrace{W_q W_k^\top}_{M}\, x_j^\top"
    )
    form = qkv.bilinear_form(x, projections)
    st.markdown(
        f"The two projections fold into one {model.d_model} × {model.d_model} matrix M, of rank "
        f"at most d_k = {d_k} (here {form.rank}): a score is a bilinear form, a weighted dot "
        "product in which M decides which directions of one token should meet which directions of "
        f"the other. Computed both ways on this sentence, the scores agree to {form.max_abs_error:.1e}. "
        f"M is not symmetric (‖M − Mᵀ‖ / ‖M‖ = {form.asymmetry:.2f}), which is the projections' "
        "part of Step 5; page 1 is the case M = I."
        + (
            " The trained head's biases add terms that this form leaves out."
            if source != "random" and anatomy_text.of(model).arch.bias
            else ""
        )
    )


def payoff() -> None:
    """Step 7: page 1's two banks, mixed by each trained head of layer 0."""
    st.subheader("Step 7 · Page 1's payoff, now with projections")
    # the verb follows the cosines at the three decimals they are shown with; from one vector
    # (1.000), in page 1's own words for the cosine after mixing
    before, after = page_one_payoff.cosine_before, page_one_payoff.cosine_after
    moved = (
        f"{wording.how_far_apart(after)} after mixing"
        if round(before, 3) >= 1.0
        else wording.moved_apart(before, after)
    )
    page_one_result = (
        "On page 1, with no parameters at all, the two *bank*s of “money bank grows” and "
        f"“river bank flows” {moved}: mixing the static rows took their cosine from "
        f"{page_one_payoff.cosine_before:.3f} to {page_one_payoff.cosine_after:.3f}."
    )
    through_heads = qkv_runs.shared_word_through_heads(
        model, "money bank grows", "river bank flows", page_one_word, 0
    )
    st.markdown(
        f"{page_one_result} Here both "
        f"sentences go through {model_label}'s embedding step, "
        "and the word's two vectors are mixed once by page 1's formula and once by each trained "
        "head of layer 0. The lower the cosine, the more the head tells the two banks apart."
        + _formula_here(through_heads, page_one_payoff.cosine_after)
    )

    def head_cosines() -> None:
        """Each head's cosine of the two banks, beside page 1's formula."""
        display.show_bars(
            len(through_heads.cosine_by_head),
            None,
            lambda: qkv_charts.head_cosines(
                through_heads.cosine_by_head,
                through_heads.cosine_parameter_free,
                f"page 1's formula: {through_heads.cosine_parameter_free:.3f}",
                "cosine of the two banks after layer 0's heads",
            ),
            key="qkv_payoff",
            filename="qkv-bank-cosines",
        )
        st.caption(_payoff_caption(through_heads))

    predict.ask_choice(
        "qkv_same_input",
        predict_answers.same_input_apart(through_heads),
        reveal=head_cosines,
        folded="each head's cosine of the two banks",
    )


def _formula_here(through_heads: qkv.SharedWordThroughHeads, cosine_on_page_one: float) -> str:
    """Why page 1's formula may give another cosine here than on page 1, said before the
    question. Two things can differ: these rows are the model's own, and their length decides
    how much X Xᵀ keeps on the token itself; and the word's two rows may already differ before
    any mixing (another position, another position row). Each clause follows its number; empty
    when the two cosines print the same."""
    here = through_heads.cosine_parameter_free
    if f"{here:.3f}" == f"{cosine_on_page_one:.3f}":
        return ""
    lengths = span(through_heads.input_lengths, ".1f")  # "11.5", or "9.8–11.5"
    kept = span(through_heads.self_weight_parameter_free, ".2f")
    # "passes on" only when both rows keep practically all of it (the identity to 2 d.p.)
    passes = min(through_heads.self_weight_parameter_free) >= 0.995
    length = (
        f"these rows are {lengths} long, so page 1's unscaled X Xᵀ keeps {kept} of the weight "
        + (
            "on the token itself and passes each row on as it came"
            if passes
            else "on the token itself"
        )
    )
    word = f"*{literal(through_heads.word)}*"
    if round(through_heads.cosine_input, 3) >= 1.0:
        rows = f"the two {word} rows enter as the same vector"
    else:
        where = (
            f"piece {through_heads.index_a} in both sentences"
            if through_heads.index_a == through_heads.index_b
            else f"piece {through_heads.index_a} in A and {through_heads.index_b} in B"
        )
        rows = (
            f"the two {word} rows already differ before any mixing (cosine "
            f"{through_heads.cosine_input:.3f}; {word} is {where})"
        )
    return (
        f" Here {length}, and {rows}: page 1's formula gives {here:.3f} on them, where page "
        f"1's own rows gave {cosine_on_page_one:.3f}."
    )


def _payoff_caption(through_heads: qkv.SharedWordThroughHeads) -> str:
    """Where the word sits, whether it enters the layer as one vector, and how much page 1's
    unscaled X Xᵀ keeps it on itself: each clause follows the numbers it sits beside."""
    word = f"*{literal(through_heads.word)}*"
    i_a, i_b = through_heads.index_a, through_heads.index_b
    where = (
        f"{word} is piece {i_a} in both sentences"
        if i_a == i_b
        else f"{word} is piece {i_a} in A and piece {i_b} in B"
    )
    same_vector = round(through_heads.cosine_input, 3) >= 1.0
    enters = (
        "so it enters layer 0 as the same vector"
        if same_vector
        else "and it enters layer 0 as two different vectors"
    )
    lengths = through_heads.input_lengths
    kept = through_heads.self_weight_parameter_free
    read = anatomy_text.attention_input_words(anatomy_text.of(model))  # a pre-norm model's norm
    keeps = (
        f"The rows layer 0's heads read for it ({read}) are {min(lengths):.1f} and "
        f"{max(lengths):.1f} long; page 1's unscaled X Xᵀ "
        f"keeps {min(kept):.2f} and {max(kept):.2f} of its weight on the token itself"
    )
    # "next to nothing" only when both rows keep practically all of it (the identity to 2 d.p.)
    effect = (
        ", so it changes next to nothing (page 1's section on vector length measures this); "
        "the projections let a head look past the token to its neighbours."
        if min(kept) >= 0.995
        else ", so it mixes in only a little of its neighbours; the projections let a head look "
        "past the token."
        if min(kept) >= 0.9
        else ", so it already mixes in its neighbours; the projections choose which ones."
    )
    return f"Input cosine {through_heads.cosine_input:.3f}: {where}, {enters}. {keeps}{effect}"


# How the loaded model brings positions in, by its position scheme (core/weights.py's
# Architecture.positions): what "with positions" means in Step 8's order test.
POSITIONS_ENTER = {
    "learned": "each piece's position row added to X, as in what layer 0 reads",
    "rotary": "every query and key turned by its position, as {model} does inside attention",
}


def all_at_once() -> None:
    """Step 8: one product for every position, and what it cannot see: order."""
    st.subheader("Step 8 · All positions at once, and blind to their order")
    n, d_v = len(tokens), result.value.shape[1]
    st.latex(
        r"\begin{gathered}\text{recurrent: } h_t = f(h_{t-1}, x_t),\ t = 1, \dots, n"
        r"\\ \text{attention: } O = \alpha V \text{ for all } n \text{ rows at once}\end{gathered}"
    )
    st.markdown(
        "A recurrent network reads a sentence word by word: its state after word t needs its "
        f"state after word t − 1, so these {n} pieces take {n} steps, one after the other. "
        f"Attention has no such chain: Step 3 made all {n} output rows in one product of the "
        f"({n} × {n}) weights with the ({n} × {d_v}) values, which a processor can work on all "
        "at once. Vaswani et al. (2017) count a constant number of sequential steps per "
        "self-attention layer, against n for a recurrent one."
    )
    st.markdown(
        "The same product cannot see order: nothing in it says where a row sits. Shuffle the "
        "rows of X and the output rows come out shuffled the same way, and nothing else changes. "
        "Below, this head (the W_q, W_k and W_v chosen above, no mask) reads the sentence and a "
        "shuffled copy; the copy's output rows are put back in the original order and compared."
    )
    test = qkv_runs.order_test(model, trace, projections, inputs.scale)
    if not test.moved:
        st.info("Type at least two words in the sidebar to have something to shuffle.")
        return
    anatomy = anatomy_text.of(model)
    st.caption(f"The shuffled order ({anatomy_text.specials_stay(trace.tokens, trace.special)}):")
    st.text(" ".join(test.shuffled_tokens))  # visitor text: shown as text
    without, with_positions = st.columns(2)
    without.metric("without positions: largest difference", f"{test.gap_without_positions:.1e}")
    with_positions.metric("with positions: largest difference", f"{test.gap_with_positions:.3g}")
    gap_without, gap_with = test.gap_without_positions, test.gap_with_positions
    how = POSITIONS_ENTER[anatomy.arch.positions].format(model=model_label)
    st.markdown(
        (
            "Without positions the two runs agree to float rounding: this head reads the "
            "sentence as a bag of pieces. "
            if not test.order_seen(gap_without)
            else f"Without positions the outputs already differ by up to {gap_without:.3g}: "
            "something in this run reads order. "
        )
        + (
            f"With positions ({how}), the same word at another place is read differently: the "
            f"outputs differ by up to {gap_with:.3g} (the outputs themselves reach "
            f"{test.largest_output:.3g}). That is why order has to be brought in."
            if test.order_seen(gap_with)
            else f"With positions ({how}), the outputs still differ by only {gap_with:.1e}, "
            f"float rounding (the outputs reach {test.largest_output:.3g}): for this head and "
            "sentence the positions change nothing this test can see."
        ),
        help=terms.ahead("position rows", anatomy=anatomy) or None,
    )
    st.caption(
        "X is the embedding step's output in both runs, whichever layer the head comes from: "
        + (
            f"{anatomy_text.embedding_words(anatomy)} with positions, "
            f"{anatomy_text.embedding_words(anatomy, positions=False)} without. "
            if anatomy.position_table
            else f"{anatomy_text.embedding_words(anatomy)}; {model_label} adds no position row, "
            "and its positions turn q and k inside the head. "
        )
        + (
            "The sidebar's causal mask is left out: a mask that depends on position is an order "
            "signal of its own. "
            if inputs.causal
            else ""
        )
        + "The positional-encoding lab shuffles the sentence through the whole model.",
        help=terms.ahead("LayerNorm", "segment rows", anatomy=anatomy),
    )
    st.page_link(
        "views/positional.py",
        label="Positional encoding: how order gets in",
        icon=":material/pin_drop:",
    )


SECTIONS = {
    "1 · Projections": three_projections,
    "2 · Scores": scores_and_weights,
    "3 · Output": output,
    "4 · One query": one_query,
    "5 · Not symmetric": not_symmetric,
    "6 · One matrix": one_matrix,
    "7 · Payoff": payoff,
    "8 · All at once": all_at_once,
}
# One step at a time, drawn only when its tab is open: all seven at once were 12 figures,
# a first visit and every new sentence far heavier than the reference app's
# (bench/bench_browser.py; bench/RESULTS.md, Cited in code). The URL keeps the open tab.
display.head_switch()  # the readout of a long sentence's matrices (one image each)
widgets.section_tabs(SECTIONS, key="qkv_section")
# below the steps, not between the takeaway and Step 1's matrices: those open the first screen
with st.expander("What X and W are here, and which switches act"):
    st.caption(
        f"{where}. Sidebar switches: {switches}. Steps 1 to 6 and 8 use these W_q, W_k and W_v "
        "on the sidebar's sentence; Step 7 runs two fixed sentences through every head of layer 0.",
        help=terms.ahead("layer", "head", "√d_k", "causal mask"),
    )

st.caption(
    "Sources: Vaswani et al. (2017), queries, keys and values; Bahdanau, Cho & Bengio (2015), "
    "learned alignment weights."
)
