"""6 · Attention heatmaps: every head at once, one head up close, per-head statistics, one word twice."""

import streamlit as st

import core
from core import head_roles, head_stats
from ui import (
    anatomy_text,
    display,
    display_policy,
    exports,
    formulas,
    heatmaps_charts,
    heatmaps_runs,
    html_heatmap,
    model_view,
    models,
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
from ui.numbers import mean_of, span
from ui.word_level import WordView

inputs, model = state.page_context()
model_label = models.label(model)  # the model's name in the prose

widgets.page_title("6 · Attention heatmaps")
st.markdown(
    f"{model_label} has {model.n_layers} layers of {model.n_heads} heads. Each head builds its own "
    "table of who-reads-whom for the sentence in the sidebar: one row per token asking "
    "(the query), one column per token being read (the key). Start with the whole model, "
    "then pick one head to read it cell by cell."
)

trace = traces.trace_or_stop(model, inputs)
sidebar.off_distribution_note(inputs, model_label)  # the sidebar's switches act on every head here
tokens = trace.tokens

specials = models.special_pieces_phrase(trace)  # "[CLS] and [SEP]"; "" where none are added
renormalise = st.toggle(
    "Hide the special pieces, renormalise the rest",
    key="hm_renorm",
    bind="query-params",
    help=f"Drops the columns of {specials} and rescales each row to sum to 1 over the others."
    if specials
    else f"{model_label}'s tokenizer adds no special pieces: there is nothing to hide.",
    disabled=not specials,
) and bool(specials)
if renormalise:
    st.latex(r"\alpha'_{ij} = \frac{\alpha_{ij}}{\sum_{k \text{ not special}} \alpha_{ik}}")
word_level = inputs.word_level  # the sidebar's shared switch: grid, up close and statistics
words_view = WordView.of(trace, word_level)
shown_tokens = words_view.tokens(tokens)  # the words when the switch is on
n_shown = len(shown_tokens)
unit = "words" if word_level else "tokens"

# 1 · The model view: every head, small; the page's point in one sentence above it.
st.subheader("1 · Every head at once")
head_summary = heatmaps_runs.head_statistics(trace, renormalise, word_level)  # (L, H) fields
prev_layer, prev_head = head_summary.top_head("on_previous")
sinks = (  # the specials' share is gone once they are hidden
    f"{wording.count_of(head_summary.n_sinks, model.n_layers * model.n_heads, 'head')} park at "
    f"least half of a row on {specials} on "
    "average, and "
    if specials and not renormalise
    else ""
)
takeaway.show(
    f"One sentence, {model.n_layers * model.n_heads} heads, each with its own table: {sinks}"
    f"L{prev_layer} H{prev_head} gives the {unit[:-1]} before "
    f"{head_summary.on_previous[prev_layer, prev_head]:.2f} of a row, against "
    f"{head_summary.mean_over_heads('on_previous'):.2f} for the average head."
)
grid_slot = st.container()
st.markdown(  # how to read the grid, under it: the grid itself opens the first screen
    "Each row of the grid is a layer, input side at the top (on a phone a layer takes two "
    "rows), and each tile a head, labelled H0, H1, …. Vertical stripes are heads that send "
    "every query to the same few keys; a bright diagonal is a head that looks at the token "
    "itself, a line just beside it at a neighbour."
)
st.caption("Click or tap a head in the grid, or choose it here (the grid's red frame follows):")
# Up to ~128 pieces every head travels with the page: the sliders move the grid's frame and
# redraw the up-close heatmap and section 4 in the browser, with no server round trip.
in_browser = display_policy.switches_in_browser(model.n_layers, model.n_heads, n_shown)
layer, head = widgets.layer_head_picker(model, in_browser=in_browser)
display.head_switch()  # the sliders in the browser, and the up-close heatmap's cell readout
model_view.install()  # the grid's frame follows the sliders; a click on a head moves them
thumbs = heatmaps_runs.thumbnails(trace, renormalise, word_level)  # cached: reads every head
thumb_side = head_stats.pooled_side(n_shown)  # each head's thumbnail is thumb_side × thumb_side
with grid_slot:
    pooled = thumb_side < n_shown
    # HTML, one small image per head: no plotly.js for the page's first figure, and tiles
    # that reflow to six a row on a phone
    display.show_html_figure(
        html_heatmap.model_view(
            thumbs,
            (layer, head),
            f"All {model.n_layers} × {model.n_heads} heads"
            + (" between words" if word_level else "")
            + (f" (each pooled to {thumb_side} × {thumb_side})" if pooled else ""),
            name="hm_grid",
        )
    )
    if pooled:
        block = head_stats.block_size(n_shown)
        st.caption(
            f"{n_shown} {unit} are too many to send {model.n_layers * model.n_heads} "
            f"full matrices to the browser: each thumbnail shows the mean weight of blocks of "
            f"{block} × {block} {unit}. The large heatmap below is exact."
        )

# 2 · One head, every cell.
st.subheader("2 · One head up close")
st.latex(formulas.weight(inputs.scale, inputs.causal))  # as the sidebar's switches ran it
st.markdown(
    "Cell (*i*, *j*) is how much query *i* takes from key *j*; each row sums to 1. Point at a "
    "cell to read both tokens and the weight."
)
# what the switches changed, on a line under the title
title_note = ", ".join(
    note
    for note, on in (("between words", word_level), ("without special pieces", renormalise))
    if on
)


def note_of(_layer: int, _head: int) -> str:
    """The line under every head's title: the switches, the same for each head."""
    return title_note


labels = widgets.numbered(shown_tokens)
# The Overview's figure (HTML cells, numbered up to 12 pieces, one image past that): one look
# for one head across the app, and no plotly heatmap to draw.
if in_browser:  # (L, H, n, n), or (L, H, w, w) between words, [CLS]/[SEP] hidden after merging
    shown = heatmaps_runs.shown_attentions(trace, renormalise, word_level)
    display.show_html_figure(
        html_heatmap.attention_grid(
            shown,
            shown_tokens,
            layer,
            head,
            True,
            note_of=note_of,
            name="hm_heatmap",
            masked=trace.options.causal,
        )
    )
else:
    head_weights = heatmaps_runs.shown_weights(  # one head: (n, n), or (w, w) between words
        trace.attentions[layer, head],
        tokens,
        renormalise,
        word_level,
        trace.piece_scheme,
        trace.special,
    )
    display.show_html_figure(
        html_heatmap.one_head_grid(
            head_weights,
            shown_tokens,
            layer,
            head,
            model.n_layers,
            model.n_heads,
            note_of,
            name="hm_heatmap",
            masked=trace.options.causal,
        )
    )
if display_policy.scale_fitted(n_shown):
    st.caption(
        f"Over {n_shown} {unit} a typical weight is about 1/{n_shown}: where a head's largest "
        "weight is below 1, its colour scale runs up to that weight instead of 1 (the note "
        "under its title says so), so the pattern stays visible."
    )
if in_browser:
    fetch = traces.refetch(model, inputs)
    tables.download_every_head(
        lambda: heatmaps_runs.shown_attentions(fetch(), renormalise, word_level),
        labels,
        "attention-all-heads",
        key="hm_csv",
    )
else:
    tables.download_matrix(
        head_weights, labels, labels, f"attention-L{layer}-H{head}", key="hm_csv"
    )

# 3 · What each head does on average.
st.subheader("3 · Per-head statistics")
stats = heatmaps_runs.head_statistics(trace, renormalise, word_level)  # of the weights as shown
st.markdown(
    f"Averages over the {n_shown} query rows of this input"
    + (" (one per word; self, previous and next are words too)" if word_level else "")
    + (
        f"; self, previous and next count only the rows where the {unit[:-1]} and that "
        f"neighbour are both real, not {specials}, as page 4's role scores do"
        if specials
        else ""
    )
    + ". Entropy is low when a row "
    "commits to one key and reaches log₂ n bits when it spreads evenly over n keys"
    + (" (with the causal mask, row i has only i + 1 keys to spread over)" if inputs.causal else "")
    + ". "
    + (
        f"**{stats.n_sinks} of {model.n_layers * model.n_heads} heads** put at least half their "
        f"weight on {specials}. "
        if specials
        else f"{model_label}'s tokenizer adds no special pieces, so no head can park its weight "
        "on one; the bars below show how much the first piece takes. "
    )
    + "Clark et al. (2019) suggested that in BERT-base such weight "
    "may be a no-op, a place to park attention when a head has nothing to do; Xiao et al. "
    "(2024), who found such tokens in decoder language models, call a token that collects it "
    "an attention sink. Both are hypotheses about why. "
    + (
        "The switch at the top of the page hides those tokens so the rest of such a head shows."
        if specials
        else ""
    )
)
cls_share, sep_share = head_roles.special_shares_by_layer(trace.attentions, tokens, trace.special)
cls_name, sep_name = head_roles.sink_names(tokens, trace.special)  # [CLS], <s>, the first piece
# what an even spread over the keys each row sees (the run's mask) would give the same pieces
cls_even, sep_even = head_roles.even_shares(tokens, trace.special, trace.options.causal)
with_others = head_roles.has_other_specials(tokens, trace.special)  # [SEP], </s>; GPT-2: none
sink_bars = {f"on {cls_name}": cls_share} | ({f"on {sep_name}": sep_share} if with_others else {})
sink_title = f"{model_label}: weight on {literal(cls_name)}" + (
    f" and {literal(sep_name)}" if with_others else ""
)
display.show_weight_bars(  # two bars a layer, as HTML: one plotly figure fewer to draw
    [f"layer {layer_index}" for layer_index in range(model.n_layers)],
    sink_bars,  # escaped by the HTML bars
    sink_title,
    plotly_figure=lambda: heatmaps_charts.per_layer_lines(  # a deep model: one line per sink
        sink_bars,  # escaped by the figure
        sink_title,
        "mean weight, all heads",
    ),
    key="hm_sinks",
    y_title="mean weight, all heads",
    filename="special-token-share",
)
spot = head_roles.parking_spot(trace.attentions, tokens, trace.special, trace.options.causal)
shares = (
    f"by layer, word pieces give {literal(cls_name)} {span(cls_share)} "
    f"of their weight (mean {mean_of(cls_share):.2f}, against {cls_even:.2f} for an even spread "
    "over the keys each row can see)"
    + (
        f" and {literal(sep_name)} {span(sep_share)} (mean "
        f"{mean_of(sep_share):.2f}, against {sep_even:.2f})"
        if with_others
        else ""
    )
)
compared = [literal(cls_name)] + ([literal(sep_name)] if with_others else [])
st.caption(
    f"In {model_label} on this input "
    + wording.parking_verdict(literal(spot) if spot else None, compared)
    + f": {shares}. {wording.parking_rule(head_roles.PARKING_FACTOR)} "
    + "Clark et al. report [SEP] for BERT-base; Xiao et al. (2024) found language models park "
    "much weight on their first pieces."
)
st.latex(r"H_i = -\sum_j \alpha_{ij}\log_2 \alpha_{ij}")
stat_labels = heatmaps_runs.stat_labels(trace)  # the shares on this run's own specials
stat_name = st.selectbox(
    "Statistic",
    list(stat_labels),
    format_func=stat_labels.__getitem__,
    key="hm_stat",
    bind="query-params",
)
stat_label = stat_labels[stat_name]
stat_grid = heatmaps_charts.head_stat_grid(
    stats.stat(stat_name),
    stats.sink,
    title=f"{literal(stat_label.capitalize())} per head",  # a special's name is tokenizer text
    colorbar_title="bits" if stat_name == "entropy" else "share",
    zmax=None if stat_name == "entropy" else 1.0,
    sink_on=specials or None,  # GPT-2: no special pieces, no sink legend
)
display.show_matrix(
    (model.n_layers, model.n_heads),
    None,
    lambda: stat_grid,
    key="hm_stats",
    filename=f"head-{stat_name}",
)
if renormalise:
    st.caption(
        f"{specials} are hidden: the statistics describe the renormalised weights, so the "
        f"shares on {specials} are 0. Which heads count as sinks still follows the weights "
        "as computed."
    )
widgets.folded(
    "All statistics as a table",
    "hm_stats_table",
    lambda: st.dataframe(stats.table(), hide_index=True, height=300),
)
tables.download_matrix(
    stats.stat(stat_name),
    [f"layer {i}" for i in range(model.n_layers)],
    [f"head {h}" for h in range(model.n_heads)],
    f"head-{stat_name}",
    key="hm_stats_csv",
)

# 4 · One word, two contexts.
st.subheader("4 · One word in two sentences")
st.markdown(
    "The same word piece starts from the same row of the word-piece table in both sentences. "
    + (
        "Layer 0's heads already read "
        f"{anatomy_text.attention_input_words(anatomy_text.of(model))}, so at different "
        "positions the two inputs are two vectors (the cosine of the two rows they read is "
        "under the figure)"
        if anatomy_text.of(model).position_table
        else "Layer 0 reads that row itself, the same at any position (the model's rotary "
        "positions act inside attention)"
    )
    + "; what the word reads depends on its neighbours. Below: "
    "its row in the head the sliders above choose, in each sentence, with the sidebar's "
    "switches."
)
left, right = st.columns(2)
text_a = left.text_input(
    "Sentence 1",
    "She sat on the bank of the river.",
    key="hm_a",
    bind="query-params",
    max_chars=500,
)
text_b = right.text_input(
    "Sentence 2",
    "He deposited the cheque at the bank.",
    key="hm_b",
    bind="query-params",
    max_chars=500,
)
try:
    trace_a = traces.trace(model, text_a[:500], scale=inputs.scale, causal=inputs.causal)
    trace_b = traces.trace(model, text_b[:500], scale=inputs.scale, causal=inputs.causal)
except core.EmptyInput:
    st.info("Type a sentence in both boxes to compare a word they share.", icon="✍️")
else:
    shared = head_stats.shared_pieces(
        trace_a.tokens, trace_b.tokens, trace_a.special, trace_b.special
    )
    if not shared:
        st.info("The two sentences share no word piece: put one word in both.", icon="🔤")
    else:
        word = st.selectbox("Shared word piece", shared, key="hm_word", bind="query-params")
        where = [
            head_stats.piece_index(trace_a.tokens, word) or 0,
            head_stats.piece_index(trace_b.tokens, word) or 0,
        ]
        tokens_ab = [trace_a.tokens, trace_b.tokens]
        titles = [f"sentence 1, query {where[0]}", f"sentence 2, query {where[1]}"]

        def compare_title(at_layer: int, at_head: int) -> str:
            return f"Where “{word}” looks: layer {at_layer}, head {at_head}"

        if in_browser:  # every head's rows travel with the page, as the heatmap's do
            compare = heatmaps_charts.every_head_compare_rows(
                [  # (L, H, n_s): the word's row in every head of each sentence
                    head_stats.query_rows(trace_a, where[0], renormalise),
                    head_stats.query_rows(trace_b, where[1], renormalise),
                ],
                tokens_ab,
                where,
                titles,
                title_of_head=compare_title,
                layer=layer,
                head=head,
            )
        else:
            compare = heatmaps_charts.compare_rows_figure(
                [
                    head_stats.query_row(trace_a, layer, head, where[0], renormalise),
                    head_stats.query_row(trace_b, layer, head, where[1], renormalise),
                ],
                tokens_ab,
                where,
                titles,
                title=compare_title(layer, head),
            )
        filename = "compare-head" if in_browser else f"compare-L{layer}-H{head}"
        display.show_bars(
            max(map(len, tokens_ab)), None, lambda: compare, key="hm_compare", filename=filename
        )
        # what the heads read: a pre-norm model's first norm turns the stream it is handed
        input_cosine = heatmaps_runs.layer_zero_cosine(model, trace_a, trace_b, *where)
        st.caption(
            "If the word occurs more than once, its first occurrence is shown. The two rows "
            f"layer 0's heads read for it (positions {where[0]} and {where[1]}): cosine "
            f"{input_cosine:.4f}, they "
            f"{wording.how_far_apart(input_cosine)}."
        )

# 5 · Take it with you.
st.subheader("5 · Export")
st.markdown(
    "Every figure has a camera button (PNG or SVG, chosen in the sidebar); matrices come as "
    "CSV under their figure. The whole forward pass of the sidebar's sentence — tokens, "
    "hidden states, queries, keys, values, scores and weights of every head — is one file. "
    "The address bar keeps the sentence, model, switches, layer and head: copy it to share "
    "this exact view.",
    help=terms.ahead("hidden state"),
)
exports.download_trace(
    trace, traces.refetch(model, inputs), key="hm_npz", filename="attention-explorer-trace"
)
st.caption(
    "Sources: Vig (2019), bertviz's model view; Clark et al. (2019), what BERT-base's heads "
    "attend to and the no-op hypothesis; Xiao et al. (2024), attention sinks."
)
