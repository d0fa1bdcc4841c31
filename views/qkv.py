"""Learning path 2: queries, keys and values, Q = X W_q, K = X W_k, V = X W_v, one head at a time."""

import streamlit as st

from core import learning
from ui import learning_charts, state, widgets

inputs, model = state.page_context()

st.title("2 · Queries, keys and values")
st.markdown(
    "On page 1 each vector did three jobs at once. Here it is multiplied by three matrices "
    "first, so each job gets its own vector: a **query** (what this token is looking for), a "
    "**key** (what it can be found by) and a **value** (what it hands over when it is chosen). "
    "Training sets the matrices; below you can use random ones or those of a trained head. "
    "The sentence is the one in the sidebar."
)
trace = state.trace_or_stop(model, inputs)
tokens = trace.tokens
labels = widgets.numbered(tokens)

source = st.radio(
    "Where W_q, W_k and W_v come from",
    ["random", "trained head"],  # plain options: they are what a shared link stores
    key="qkv_source",
    bind="query-params",
    horizontal=True,
    help=f"random: seeded draws, nothing learned. trained head: one head of {model.name}.",
)
if source == "random":
    size, seed_column = st.columns(2)
    with size:
        d_k = st.slider(
            "d_k, width of queries, keys and values", 1, 64, 8, key="qkv_dk", bind="query-params"
        )
    with seed_column:
        seed = st.number_input("Random seed", 0, 9_999, 0, key="qkv_seed", bind="query-params")
    projections = learning.random_projections(model.d_model, int(d_k), int(seed))
    x = trace.static
    where = f"X holds the static word-piece vectors, as on page 1; W entries are drawn from N(0, 1) with seed {int(seed)}"
else:
    layer, head = widgets.layer_head_picker(model)
    projections = learning.head_projections(model, layer, head)
    x = trace.hidden_states[layer]
    where = f"X is what layer {layer} reads; W_q, W_k, W_v are the slices of head {head} (with their biases)"
d_k = projections.d_k
result = learning.qkv_attention(x, projections, scale=inputs.scale, causal=inputs.causal)
switches = ("scores divided by √d_k" if inputs.scale else "scores not scaled") + (
    ", causal mask on" if inputs.causal else ""
)
st.caption(f"{where}. Sidebar switches: {switches}.")
note = learning_charts.limit_note(len(tokens))
if note:
    st.caption(note)


def matrix_figure(matrix, title: str, key: str, square: bool = False, **args) -> None:
    """Show one matrix with its shape in the title, and a CSV button under it."""
    if square:
        fig = learning_charts.pair_matrix(matrix, tokens, title, **args)
        columns = labels
    else:
        fig = learning_charts.token_matrix(matrix, tokens, title, "dimension")
        columns = [f"d{k}" for k in range(matrix.shape[1])]
    widgets.show_figure(fig, key=f"qkv_{key}", filename=f"qkv-{key}")
    widgets.download_matrix(matrix, labels, columns, f"qkv-{key}", key=f"qkv_csv_{key}")


st.subheader("Step 1 · Three projections of every token")
st.latex(
    r"Q = X W_q,\quad K = X W_k,\quad V = X W_v,\qquad "
    rf"X \in \mathbb{{R}}^{{n \times {model.d_model}}},\; W \in \mathbb{{R}}^{{{model.d_model} \times {d_k}}}"
)
for column, (matrix, name) in zip(
    st.columns(3), [(result.query, "Q"), (result.key, "K"), (result.value, "V")], strict=True
):
    with column:
        matrix_figure(matrix, name, name.lower())

st.subheader("Step 2 · Scores and weights")
st.latex(r"\alpha = \operatorname{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}}\right)")
st.markdown(
    "Row *i* compares query *i* with every key. Softmax turns each row into weights that sum "
    "to 1: how much token *i* takes from each token *j*."
)
scores_column, weights_column = st.columns(2)
with scores_column:
    matrix_figure(result.scores, "scores", "scores", square=True, zmax=None, colorbar_title="score")
with weights_column:
    matrix_figure(result.attn_weights, "weights α", "weights", square=True)

st.subheader("Step 3 · The output")
st.latex(r"\text{output} = \alpha V,\qquad o_i = \sum_j \alpha_{ij}\, v_j")
matrix_figure(result.output, "output αV", "output")

st.subheader("Step 4 · Follow one query")
query_index = st.selectbox(
    "Query token i",
    list(range(len(tokens))),
    index=min(1, len(tokens) - 1),
    format_func=lambda i: labels[i] if 0 <= i < len(labels) else str(i),  # stale values too
    key="qkv_query",
    bind="query-params",
)
row = learning.follow_query(result, query_index)
st.latex(
    r"q_i \cdot k_j = \sum_{c=1}^{d_k} (q_i \odot k_j)_c \;\to\; "
    r"\frac{q_i \cdot k_j}{\sqrt{d_k}} \;\to\; \alpha_{ij} \;\to\; o_i = \sum_j \alpha_{ij} v_j"
)
widgets.show_figure(
    learning_charts.query_steps(
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
    widgets.show_figure(
        learning_charts.weighted_values(row.weighted_values, row.output, tokens, query_index),
        key="qkv_weighted",
        filename=f"qkv-weighted-values-{query_index}",
    )

st.subheader("Step 5 · Attention is not symmetric")
i, j = learning.most_asymmetric_pair(result.attn_weights)
token_i, token_j = (learning_charts.markdown_literal(labels[k]) for k in (i, j))
st.markdown(
    f"Query *i* meets key *j* through q_i·k_j, but *j* meets *i* through q_j·k_i: different "
    f"vectors, different numbers. Here **{token_i}** gives **{token_j}** a weight of "
    f"{result.attn_weights[i, j]:.3f}, while {token_j} gives {token_i} only "
    f"{result.attn_weights[j, i]:.3f}."
)
widgets.show_figure(
    learning_charts.asymmetry_heatmap(
        learning.asymmetry(result.attn_weights), tokens, "α − αᵀ, weight i→j minus weight j→i"
    ),
    key="qkv_asymmetry",
    filename="qkv-asymmetry",
)
