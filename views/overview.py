"""Overview: the sentence as the loaded model reads it, one attention head, and proof the numbers are real."""

import streamlit as st

from core import head_stats
from ui import (
    anatomy_text,
    display,
    display_policy,
    formulas,
    html_heatmap,
    models,
    next_word,
    path,
    sidebar,
    state,
    tables,
    takeaway,
    terms,
    traces,
    verify,
    widgets,
    wording,
)

inputs, model = state.page_context()
model_label = models.label(model)  # the model's name in the prose

anatomy = anatomy_text.of(model)  # the vocabulary's size, whether it is a decoder, ...

widgets.page_title("Attention Explorer")
# who a token may look at is the model's nature: a decoder is trained with the causal mask, which
# the sidebar's switch may remove for this run
if not anatomy.is_decoder and not inputs.causal:
    looks_at = "lets every token look at every other token"
elif not anatomy.is_decoder:
    looks_at = (
        f"lets every token look at every other token ({model_label} is an encoder; the "
        "sidebar's causal mask, on in this run, lets each look only at itself and the tokens "
        "before it)"
    )
elif inputs.causal:
    looks_at = (
        "lets each token look at itself and the tokens before it (as a decoder, "
        f"{model_label} never looks ahead)"
    )
else:
    looks_at = (
        "lets each token look at itself and the tokens before it (as a decoder, "
        f"{model_label} was trained never to look ahead; the sidebar's switch removes that mask "
        "in this run, so here every token looks at every other)"
    )
st.markdown(
    "A transformer starts from one fixed vector per word piece (a *token*: a word, part of a "
    f"word, or a punctuation mark) and, layer by layer, {looks_at} "
    "and mix in what it finds, then reworks each token on its "
    "own in a feed-forward network. This app runs that process on "
    f"the real weights of a trained model ({model_label} on screen) with its own, "
    "readable implementation and shows each number it computes. "
    "Type a sentence in the sidebar; every page that reads a sentence follows it.",
    help=terms.ahead("token, word piece", "feed-forward network", here="views/overview.py"),
)
path.start_button()

trace = traces.trace_or_stop(model, inputs)
sidebar.off_distribution_note(inputs, model_label)  # the sidebar's switches act on this head

# The head comes first: it is what a visitor comes for, and it reaches the browser sooner.
st.subheader("1 · One attention head")
# Over every head, not the one shown: the sliders switch the heatmap in the browser.
boldest = head_stats.boldest_line(
    trace.attentions, trace.special
)  # layer, head, query, key, weight
bold_layer, bold_head = boldest[:2]
# under the causal mask row i weighs pieces 0..i only: the sentence says which rows the run had
row_covers = "itself and the pieces before it" if trace.options.causal else "all of them"
# The map opens on the boldest line's head. The Overview's sliders are its own (OPENS_ON keys):
# the layer and head sliders the other pages share keep their start at 0. A slider the learner
# moved, or one a new sentence left behind, keeps its place; the sentence then says where to look.
OPENS_ON = "overview_"
takeaway_box = st.container()  # filled once the sliders below say which head is shown
chart_col, notes_col = st.columns([2, 1], gap="large")
with notes_col:
    st.latex(  # written from the sidebar's switches, as the heatmap was computed
        rf"\begin{{gathered}}\alpha = {formulas.attention(inputs.scale, inputs.causal)}"
        r"\\ \text{output} = \alpha V" + formulas.mask_row(inputs.causal) + r"\end{gathered}"
    )
    st.markdown(
        "Row *i* is where token *i* looks: its weights over "
        + ("token *i* and the tokens before it" if trace.options.causal else "all tokens")
        + " sum to 1. "
        "Switches in the sidebar (scaling, causal mask) act inside every layer of the model.",
        help=terms.ahead("Q, K, V", "√d_k", "causal mask", "head", "layer"),
    )
    # Up to ~128 pieces every head travels with the page, and the sliders switch the heatmap in
    # the browser without a server round trip.
    in_browser = display_policy.switches_in_browser(model.n_layers, model.n_heads, trace.n_tokens)
    layer, head = widgets.layer_head_picker(
        model,
        key_prefix=OPENS_ON,
        columns=False,
        in_browser=in_browser,
        opens_on=(bold_layer, bold_head),
    )
    labels = widgets.numbered(trace.tokens)
    if in_browser:
        fetch = traces.refetch(model, inputs)
        tables.download_every_head(
            lambda: fetch().attentions, labels, "attention-all-heads", "overview_csv"
        )
    else:
        tables.download_matrix(
            trace.attentions[layer, head],
            labels,
            labels,
            f"attention-L{layer}-H{head}",
            key="overview_csv",
        )
    display.head_switch()  # the heatmap's in-browser switch, its hover and its tap readout
with takeaway_box:
    takeaway.show(
        f"{model_label} reads this sentence as {trace.n_tokens} word pieces, and each of its "
        f"{model.n_layers * model.n_heads} attention heads ({model.n_heads} in each of "
        f"{model.n_layers} layers) gives every piece a row of weights over "
        f"{row_covers}; the strongest link between two ordinary pieces is "
        + wording.boldest_link(
            trace.tokens,
            boldest,
            (layer, head),
            "map below",
            head_stats.ties_with_boldest(trace.attentions, trace.special, boldest),
        )
    )
# Plain HTML cells (or one image of them), not plotly: the page every visit starts on needs no
# plotly.js. A near-square figure: a 32-token map reads better than a page-wide one.
with chart_col:
    display.show_html_figure(
        html_heatmap.attention_grid(
            trace.attentions, trace.tokens, layer, head, in_browser, masked=trace.options.causal
        )
    )
next_word.panel(model, inputs.text, key="overview_next", heading="The next word")  # decoders

st.subheader("2 · The word pieces")
st.markdown(
    f"{model_label} cuts text into pieces from a fixed vocabulary of "
    f"{anatomy.dims.vocab_size:,} entries"
    + (" and lowercases the text first" if anatomy.lowercases else "")
    + ": a common word is one piece, a rare word several. "
    + models.piece_scheme_note(trace)
    + f" This input is **{trace.n_tokens} word pieces**. Each piece, numbered from 0, is one row "
    "and one column of every attention matrix in this app. The pages call a piece at its place "
    "in the input a **token**: a word piece that occurs twice is one vocabulary entry and two "
    "tokens.",
    help=terms.ahead("[CLS], [SEP]") if "[CLS]" in trace.tokens else None,
)


def word_piece_table() -> None:
    st.dataframe(
        {
            "#": list(range(trace.n_tokens)),
            "piece": list(trace.tokens),
            "vocabulary id": trace.input_ids.tolist(),
            "sentence": ["A" if s == 0 else "B" for s in trace.segments],
        },
        height=min(320, 35 * (trace.n_tokens + 1) + 3),
        width="stretch",
        hide_index=True,
    )


widgets.folded("Every word piece with its vocabulary id", "overview_pieces", word_piece_table)

st.subheader("3 · The model")
dims = anatomy.dims
# One line of text, not six st.metric cards: less browser work on every visit (bench_browser.py).
st.markdown(
    f"**{dims.n_layers}** layers · **{dims.n_heads}** heads per layer · "
    f"`d_model` **{dims.d_model}** · `d_head` **{dims.d_head}** · "
    f"up to **{model.max_positions}** positions",
    help=terms.ahead("layer", "head", "d_model, d_head"),
)

st.subheader(f"4 · Is this really {model_label}?")
reference_class = verify.reference_class(model)
st.markdown(
    "Every figure comes from this project's own implementation. The check below runs the same word "
    f"pieces through the reference implementation in `transformers` (`{reference_class}`, eager "
    "attention), loaded from the same weight file, and compares every layer"
    + (" and the next-piece scores" if model.is_decoder else "")
    + ". It verifies the "
    "**implementation** — the arithmetic of every step — not the weights, which both sides "
    "read from one file. A difference of exactly 0 means both did the same float32 operations "
    "in the same order on this machine; another CPU or library version may differ in the last "
    "digits (about 1e-6)."
)
if inputs.as_trained:
    if st.button("Verify against transformers", icon=":material/verified:"):
        verify.show_check(model, trace)
else:
    st.caption(
        "The check compares the model as trained: set the sidebar's switches back (scaling on, "
        "the model's own causal mask) to run it."
    )
st.caption(
    f"Sources: Vaswani et al. (2017), the Transformer; {anatomy_text.model_papers(model, anatomy)}."
)
