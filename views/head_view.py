"""7 · Head view: each query token joined to the keys it reads, one colour per head, for sentence pairs."""

from collections.abc import Sequence

import streamlit as st

import core
from core import head_roles, head_stats
from ui import (
    anatomy_text,
    display,
    display_policy,
    exports,
    formulas,
    head_view_charts,
    head_view_hover,
    head_view_runs,
    models,
    sidebar,
    state,
    tables,
    takeaway,
    traces,
    widgets,
    wording,
)
from ui.escape import literal
from ui.numbers import ranges
from ui.word_level import WordView

WINDOW = 64  # tokens drawn at most; longer inputs get a window slider

inputs, model = state.page_context()
model_label = models.label(model)  # the model's name in the prose

widgets.page_title("7 · Head view")
st.markdown(
    "Every token appears twice, as a query on the left and as a key on the right, and a line "
    "joins them, more opaque the larger the weight: one row of a heatmap becomes a fan of lines "
    "out of one left token. Point at a token to see only its lines."
)

trace = traces.trace_or_stop(model, inputs)
sidebar.off_distribution_note(inputs, model_label)  # the sidebar's switches act on the lines here
takeaway_box = st.container()  # filled once the sliders below say which head is shown
paired = head_stats.has_pair(trace.segments)
merge_words = inputs.word_level  # the sidebar's shared switch
words_view = WordView.of(trace, merge_words)  # off: the same tokens, segments and weights
tokens = words_view.tokens(trace.tokens)
segments = words_view.segments(trace.segments)
special = words_view.special(trace.special)  # (n_shown,) the pieces the takeaway leaves out
unit = "words" if merge_words else "pieces"  # what the figure's dots stand for
n_shown = len(tokens)
# The page's point, over every head (the sliders move in the browser, so not the shown head's),
# among the lines the figure draws: between words when the sidebar merges pieces into words
every_head_weights = words_view.matrix(trace.attentions)  # (L, H, n_shown, n_shown)
boldest = head_stats.boldest_line(every_head_weights, special)  # layer, head, query, key, weight
bold_layer, bold_head = boldest[:2]

# 1 · Which heads, which lines: the figure on the left, its controls beside it (below it on a
# phone). The controls come first in the script, since the figure reads them, but a click on a
# token changes nothing above or beside the figure: every control is there from the start.
figure_column, controls = st.columns([3, 2], gap="medium")
# At most WINDOW tokens are drawn: every head's lines travel with the page, and the Layer and
# Head sliders redraw the figure in the browser, with no server round trip.
in_browser = display_policy.switches_in_browser(model.n_layers, model.n_heads, min(n_shown, WINDOW))
with controls:
    # The Layer and Head sliders, shared with the other pages, open on the boldest line's head
    # and follow it to a new sentence or model, unless the visitor or a link placed them.
    layer, head = widgets.layer_head_picker(
        model, in_browser=in_browser, opens_on=(bold_layer, bold_head), opening_key="hv_opening"
    )
    display.head_switch()  # the sliders in the browser (a script: it takes no room)
    head_view_hover.install()  # pointing at a token keeps its lines (a script, no room)
    more = st.multiselect(
        "Draw more heads of this layer (the Head slider's head is always drawn)",
        list(range(model.n_heads)),
        key="hv_heads",
        bind="query-params",
        format_func=lambda h: f"head {h}",
    )
    start = 0
    if n_shown > WINDOW:
        start = st.slider(
            f"First token drawn (a window of {WINDOW} of the {n_shown} tokens)",
            0,
            n_shown - WINDOW,
            0,
            key="hv_start",
            bind="query-params",
        )
    window = head_stats.window_around(n_shown, start, WINDOW)
    pick, side_column = st.columns([3, 2])
    focus = pick.selectbox(
        "Keep one token's lines",
        [None, *range(*window)],
        format_func=lambda i: "— every token —" if i is None else f"{i}: {tokens[i]}",
        key="hv_token",
        bind="query-params",
        help="Or click the token's dot in the figure.",
    )
    side = side_column.radio(  # always there, greyed until a token is kept: nothing moves
        "Its lines",
        ["query", "key"],
        format_func={"query": "out (it reads)", "key": "in (read by)"}.__getitem__,
        key="hv_side",
        bind="query-params",
        disabled=focus is None,
    )
    pair_filter = st.radio(
        "Sentence blocks (query → key)",
        head_stats.PAIR_FILTERS,
        horizontal=True,
        key="hv_pair",
        bind="query-params",
        disabled=not paired,
        help=anatomy_text.sentence_blocks(anatomy_text.of(model)),
    )
    value_weighted = st.toggle(
        "Value-weighted",
        key="hv_value",
        bind="query-params",
        help="Opacity = how much of each key actually moves into the query, ‖α·v·W_O‖, as a "
        "share of the row, instead of the weight α.",
    )
    stretch = st.toggle(
        "Stretch opacity",
        value=trace.n_tokens > WINDOW,
        key="hv_stretch",
        bind="query-params",
        help="Make each head's strongest line drawn fully opaque. Over hundreds of tokens "
        "weights are small (about 1/n) and would be invisible otherwise; on by default for "
        "long inputs.",
    )
with takeaway_box:
    takeaway.show(
        f"Each token's lines share one unit of weight; the boldest between two ordinary {unit} "
        f"in all {model.n_layers * model.n_heads} heads is "
        + wording.boldest_link(
            tokens,
            boldest,
            (layer, head),
            "figure",
            head_stats.ties_with_boldest(every_head_weights, special, boldest),
        )
    )
heads = sorted({head, *more})
side = side if focus is not None else "query"


def pick_clicked_token() -> None:
    """Clicking a token's dot keeps its lines: left column = what it reads, right = who reads it."""
    points = st.session_state["hv_figure"].selection.points
    if points:
        st.session_state["hv_token"] = int(points[0]["y"])
        st.session_state["hv_side"] = "query" if points[0]["x"] < 0.5 else "key"


# 2 · The lines.
shown = "share of ‖α·v·W_O‖" if value_weighted else "attention weight α"


# layer -> (H, n, n) what its lines show, or (H, w, w) between words: worked out once a run
shown_weights = {}


def layer_lines(at_layer: int, of_heads: Sequence[int]) -> head_stats.HeadViewLines:
    """The lines of these heads of one layer, with the page's filters."""
    if at_layer not in shown_weights:
        shown_weights[at_layer] = words_view.matrix(
            head_view_runs.layer_weights(model, trace, at_layer, value_weighted)
        )
    return head_stats.head_view_lines(
        shown_weights[at_layer],
        segments,
        of_heads,
        pair=pair_filter if paired else "All",
        window=window,
        min_opacity=head_view_charts.MIN_LINE_WEIGHT,
        token=focus,
        token_side=side,
        stretch=stretch,
    )


def title_of(at_layer: int, at_head: int) -> str:
    """The figure's title with at_head on the Head slider: its heads, the slider head's boldest
    line between ordinary pieces as a number (opacity alone cannot show 1.00), and the opacity
    rule, each on a line of its own (beside each other they were wider than a phone)."""
    drawn = sorted({at_head, *more})
    lines = [f"Layer {at_layer} · head{'s' if len(drawn) > 1 else ''} {ranges(drawn)}"]
    boldest_here = head_stats.boldest_drawn(layer_lines(at_layer, [at_head]), at_head, special)
    if boldest_here is not None:
        query, key, weight = boldest_here
        whose = f"head {at_head}'s boldest" if len(drawn) > 1 else "boldest"
        among = (  # the lines drawn: one kept token's, or all of them
            f"{whose} of {literal(tokens[focus], max_chars=20)}'s lines"
            if focus is not None
            else f"{whose} line between ordinary {unit}"
        )
        lines.append(
            f"<sup>{among}: {literal(tokens[query], max_chars=20)} "
            f"→ {literal(tokens[key], max_chars=20)}, {weight:.2f}</sup>"
        )
    lines.append(f"<sup>opacity = √({shown})</sup>")
    return "<br>".join(lines)


if in_browser:
    every_head = range(model.n_heads)
    fig = head_view_charts.every_head_view_figure(
        [layer_lines(at_layer, every_head) for at_layer in range(model.n_layers)],
        model.n_heads,
        tokens,
        segments,
        layer,
        head,
        sorted(set(more)),
        title_of,
        highlight=focus,
    )
    filename = "head-view"  # the head on screen may change in the browser after this run
else:
    lines = layer_lines(layer, heads)
    fig = head_view_charts.head_view_figure(
        lines, tokens, segments, heads, title_of(layer, head), highlight=focus
    )
    filename = f"head-view-L{layer}"
with figure_column:
    display.show_figure(fig, key="hv_figure", filename=filename, on_select=pick_clicked_token)
if in_browser:  # counts of this run's head would go stale when a slider moves
    notes = [f"lines under {head_view_charts.MIN_LINE_WEIGHT:.1%} weight are left out as clutter"]
else:
    notes = [f"lines drawn: {len(lines):,}"]
    if lines.dropped_light:
        notes.append(
            f"lines under {head_view_charts.MIN_LINE_WEIGHT:.1%} weight left out as clutter: "
            f"{lines.dropped_light:,}"
        )
if stretch:
    notes.append("opacity stretched: each head's strongest line drawn is fully opaque")
if window != (0, n_shown):
    notes.append(
        f"only tokens {window[0]}–{window[1] - 1} of {n_shown} are drawn, and only lines "
        "between them: move the window with the slider"
    )
caption_notes = "; ".join(notes)
figure_column.caption(
    caption_notes[0].upper()
    + caption_notes[1:]
    + ". Opacity is the square root of the weight, so faint weights stay visible: 0.25 is drawn "
    "half opaque, 0.04 at 0.2. "
    + ("Blue dots mark sentence A, orange dots sentence B. " if paired else "")
    + "Point at a token's dot to see only its lines, click it to keep them; click a head in "
    "the legend to hide it."
)
st.markdown(
    "Several heads of one layer can share the picture, each in its own colour: add them with "
    "*Draw more heads*. The formula of a line's opacity is below."
)
# What the model's training says about pairs: beside the invitation to add one, and beside the
# lines once a pair is on screen, where it matters.
pair_training = (
    "BERT was pre-trained on sentence pairs (Devlin et al., 2019), and Clark et al. (2019) "
    "found BERT-base heads that read across the boundary. "
    + (
        f"{model_label} was distilled from a BERT-style teacher (Wang et al., 2020) and then "
        "fine-tuned one sentence at a time: that last stage never showed it two sentences in "
        "one input, and whether the distillation did is not known here, so treat what it "
        "does across a pair as untested. "
        if model.name == core.BUNDLED
        else f"Whether {model_label} was ever trained on pairs depends on how it was made. "
    )
    + anatomy_text.segments_sentence(anatomy_text.of(model), model_label)
)
if paired:
    st.caption(pair_training)
else:
    st.info(
        pair_training + " Add a second sentence in the sidebar, or load the classic pair where "
        "*flies* is first a verb, then a noun.",
        icon=":material/call_split:",  # an emoji kite rendered as a box on some systems
    )
    st.button(
        "Use “Time flies like an arrow.” / “Fruit flies like a banana.”",
        on_click=sidebar.use_example_pair,
        icon=":material/compare_arrows:",
        key="hv_example",
    )

if value_weighted:
    st.latex(
        r"\text{opacity}_{ij} = \sqrt{\frac{\lVert \alpha_{ij}\, v_j W_O^h \rVert}"
        r"{\sum_k \lVert \alpha_{ik}\, v_k W_O^h \rVert}}"
    )
    spot = head_roles.parking_spot(
        trace.attentions, trace.tokens, trace.special, trace.options.causal
    )  # None when no piece takes more than an even spread would give it
    st.markdown(
        "A weight says where a head *looks*; this says what it *brings back*. A key with a big "
        "weight but a short value vector adds almost nothing to the query, and its line fades "
        "here. Kobayashi et al. (2020) found this for [SEP] and punctuation in BERT-base"
        + (
            f"; in {model_label} try it on {literal(spot)}, where word pieces park weight on "
            "this input (Attention heatmaps states the rule)."
            if spot
            else "."
        )
    )
else:
    st.latex(  # written from the sidebar's switches, as the lines were computed; stacked, so
        # the masked form fits a phone
        r"\begin{gathered}\text{opacity}_{ij} = \sqrt{\alpha_{ij}},\\ \alpha_{ij} = "
        rf"\operatorname{{softmax}}_j\!\left({formulas.pair_score(inputs.scale)}\right)"
        + (r"\\ (j \le i;\ 0 \text{ for } j > i)" if inputs.causal else "")
        + r"\end{gathered}"
    )

labels = widgets.numbered(tokens)
suffix = "-value-weighted" if value_weighted else ""
if in_browser:
    fetch = traces.refetch(model, inputs)  # the button keeps this, not the Trace
    tables.download_every_head(
        lambda: words_view.matrix(
            head_view_runs.every_layer_weights(model, fetch(), value_weighted)
        ),
        labels,
        "head-view-every-head" + suffix,
        key="hv_csv",
    )
else:
    tables.download_matrix(
        shown_weights[layer][head],  # the weights the lines were drawn from
        labels,
        labels,
        f"head-view-L{layer}-H{head}" + suffix,
        label=f"Download head {head}'s {shown} as CSV (all tokens)",
        key="hv_csv",
    )
exports.download_trace(
    trace, traces.refetch(model, inputs), key="hv_npz", filename="attention-explorer-trace"
)
st.caption(
    "Sources: Vig (2019), the head view of bertviz; Kobayashi et al. (2020), value-weighted "
    "attention; Devlin et al. (2019), BERT's sentence pairs."
)
