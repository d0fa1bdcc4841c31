"""3 · Scaling and masking: why scores are divided by √d_k, what a mask removes, cross-attention."""

import streamlit as st

from core import head_stats, scaling_masking
from core.errors import EmptyInput
from ui import (
    anatomy_text,
    display,
    display_policy,
    models,
    predict,
    predict_answers,
    scaling_masking_charts,
    scaling_masking_runs,
    sidebar,
    state,
    tables,
    takeaway,
    terms,
    traces,
    widgets,
)
from ui.escape import literal
from ui.numbers import extremes, span

inputs, model = state.page_context()
model_label = models.label(model)  # the model's name in the prose

widgets.page_title("3 · Scaling and masking")
st.markdown(
    "Two small details of the attention formula decide how sharp a head can look and what it "
    "may look at: the division by √d_k and the mask. Each tab measures one of them, first on "
    "random numbers, then inside the real model; the last two feed a head two sentences."
)
# The page compares against the model as trained, so its reference run ignores the sidebar switches.
trace = traces.trace_or_stop(model, inputs, scale=True, causal=model.is_decoder)
labels = widgets.numbered(trace.tokens)
token_axes = (trace.tokens, trace.tokens)  # query and key labels of a self-attention heatmap


def pick_head() -> tuple[int, int]:
    """The layer and head a section shows: its sliders, drawn inside the tab they drive."""
    return widgets.layer_head_picker(model)


def saturation() -> None:
    """Section 1: multiplying scores by c sharpens the softmax until one key takes all."""
    st.subheader("1 · Softmax saturates when scores grow")
    payoff_box = st.container()  # the takeaway, above the choices it reads (filled below)
    source_column, multiplier_column = st.columns(2)  # one row: the figure sooner
    source = source_column.radio(
        "Scores",
        ["random", "sentence"],
        format_func={"random": "8 random scores", "sentence": "a row of this head's scores"}.get,
        horizontal=True,
        key="sm_source",
        bind="query-params",
    )
    if source == "sentence":
        layer, head = pick_head()
        query = widgets.token_picker("Query token", trace.tokens, 0, key="sm_query")
        scores, score_labels = trace.head_scores(layer, head)[query], labels
    else:
        # numbers only: "key 0 … key 7" ran into each other on a phone (the axis says "key")
        scores, score_labels = scaling_masking.random_scores(8), [str(j) for j in range(8)]
    multiplier = multiplier_column.select_slider(
        "Multiplier c",
        list(scaling_masking.CHOICES),
        value=10,
        key="sm_multiplier",
        bind="query-params",
    )
    base, sharp = scaling_masking.saturation(scores, [1.0, multiplier])
    with payoff_box:
        top_base, top_sharp = extremes(base)[1], extremes(sharp)[1]  # the largest weights
        takeaway.show(
            f"Multiplying the scores by c = {multiplier} keeps their order, yet the largest gets "
            f"{top_sharp:.2f} of the weight instead of {top_base:.2f} at c = 1: "
            + (
                "the larger the scores, the closer softmax comes to picking one key."
                if round(top_sharp, 2) > round(top_base, 2)
                else "the smaller the scores, the more evenly softmax spreads the weight."
                if round(top_sharp, 2) < round(top_base, 2)
                else "at two decimals, no change."
            )
        )
    display.show_bars(  # the scores and the weights side by side (stacked on a phone)
        len(scores),
        html=lambda: (
            scaling_masking_charts.saturation_score_bars(scores, score_labels),
            scaling_masking_charts.saturation_weight_bars(base, sharp, multiplier, score_labels),
        ),
        plotly=lambda: scaling_masking_charts.saturation_figure(
            scores, base, sharp, multiplier, score_labels
        ),
        key="sm_saturation",
    )
    # the why after the figure: a look at the numbers first
    st.latex(r"\operatorname{softmax}(c\,s)_j = \frac{e^{c\,s_j}}{\sum_k e^{c\,s_k}}")
    st.markdown(
        "Multiply a score vector by a constant *c* and the ranking stays the same, yet the weights "
        "do not: the gaps between scores grow, the exponentials grow faster still, and the largest "
        "score takes almost all of the weight. The other keys then receive almost nothing, and "
        "almost no gradient either during training."
    )
    curve = scaling_masking.saturation(scores, scaling_masking.CHOICES)  # (8, n)
    largest_column, entropy_column = st.columns(2)
    with largest_column:
        display.show_html_figure(
            scaling_masking_charts.largest_weight_bars(scaling_masking.CHOICES, curve, multiplier)
        )
    with entropy_column:
        display.show_html_figure(
            scaling_masking_charts.entropy_bars(
                scaling_masking.CHOICES, head_stats.row_entropy(curve), len(scores), multiplier
            )
        )


def why_root_dk() -> None:
    """Section 2: a dot product's variance grows with d_k; dividing by √d_k undoes it."""
    st.subheader("2 · Why divide by √d_k")
    st.latex(
        r"\begin{gathered}\operatorname{Var}(q\cdot k)=\sum_{t=1}^{d_k}\operatorname{Var}(q_t k_t)=d_k"
        r"\\ \Rightarrow\quad\operatorname{Var}\!\left(\tfrac{q\cdot k}{\sqrt{d_k}}\right)=1"
        r"\end{gathered}"
    )
    st.markdown(
        "Draw query and key entries independently with mean 0 and variance 1. Every term "
        "q_t k_t then has variance 1, and a dot product adds d_k of them, so wider heads give "
        "wider spreads of scores, which is exactly the multiplier of section 1 in disguise. "
        f"Dividing by √d_k undoes it for any width. This model's heads have d_k = {model.d_head}."
    )
    experiments = [
        scaling_masking.random_dot_products(d_k) for d_k in sorted({4, model.d_head, 256})
    ]
    display.show_bars(
        len(experiments),
        None,
        lambda: scaling_masking_charts.dot_product_histograms(experiments),
        "sm_histograms",
    )
    st.dataframe(scaling_masking.width_table(experiments), hide_index=True)
    display.show_bars(
        len(experiments),
        None,
        lambda: scaling_masking_charts.entropy_by_width_figure(experiments),
        "sm_entropy_widths",
    )
    n_queries, n_keys = experiments[0].n_queries, experiments[0].n_keys
    falls = scaling_masking.entropy_falls_with_width(experiments)  # widths in increasing order
    widest = experiments[-1]
    keys_worth = 2**widest.raw_entropy  # H bits: as spread as 2^H equally weighted keys
    st.caption(
        f"{n_queries} random queries against {n_keys} random keys per width (fixed seed). "
        + ("Unscaled, the entropy falls as d_k grows" if falls else "Unscaled, the entropy moves")
        + f": at d_k = {widest.d_k} a row holds {widest.raw_entropy:.2f} bits, as spread as "
        f"{keys_worth:.1f} equally weighted keys"
        + (", so each query locks onto about one key." if keys_worth < 2 else "."),
        help=terms.ahead("entropy (bits)", here="views/scaling_masking.py"),
    )


def switches() -> None:
    """Section 3: scaling off and the causal mask on, inside the trained model."""
    st.subheader(f"3 · Flip the switches inside {model_label}")
    payoff_box = st.container()  # the takeaway, above the switches it reads (filled below)
    st.markdown(
        "Now the real model. The switches below act in **every** layer, so a change in layer 0 "
        f"feeds into all later layers. The reference is {model_label} as trained (scaled, "
        + ("its own causal mask" if model.is_decoder else "no mask")
        + "); the sidebar switches are not used on this page."
    )
    layer, head = pick_head()
    display.head_switch()  # the readout of the HTML heatmaps' cells (one image past 12 pieces)
    left, right = st.columns(2)
    # The sidebar's wording, for the changed model; scaling off at first, so the section opens
    # on a comparison, not a request.
    scale_off = not left.toggle(
        sidebar.SCALE_LABEL, value=False, key="sm_scale", bind="query-params"
    )
    mask_switched = right.toggle(
        sidebar.UNMASK_LABEL if model.is_decoder else sidebar.CAUSAL_LABEL,
        value=False,
        key="sm_causal",
        bind="query-params",
    )
    causal_on = mask_switched != model.is_decoder  # the mask the variant runs with
    if not (scale_off or mask_switched):
        st.info(
            "Change at least one switch from the model as trained (scaling off, or the mask "
            "changed) to compare the two."
        )
    else:
        variant_name = " + ".join(
            name
            for name, on in (
                ("no scaling", scale_off),
                ("mask removed" if model.is_decoder else "causal", mask_switched),
            )
            if on
        )
        variant = traces.trace(
            model, inputs.text, inputs.pair, scale=not scale_off, causal=causal_on
        )
        comparison = scaling_masking.compare_runs(trace, variant, layer, head)
        title = f"L{layer} H{head}: "
        runs = (  # (weights, title, key, causal mask on) of the two runs
            (comparison.default_weights, title + "as trained", "sm_a", model.is_decoder),
            (comparison.variant_weights, title + variant_name, "sm_b", causal_on),
        )
        display.show_matrix(  # the two runs side by side
            (trace.n_tokens, trace.n_tokens),
            html=lambda: tuple(
                scaling_masking_charts.compared_grid(
                    weights,
                    trace.tokens,
                    layer,
                    head,
                    (model.n_layers, model.n_heads),
                    heading,
                    key,
                    masked,
                )
                for weights, heading, key, masked in runs
            ),
            plotly=lambda: tuple(
                scaling_masking_charts.reduced_heatmap(weights, *token_axes, heading)
                for weights, heading, _, _ in runs
            ),
            key=tuple(key for _, _, key, _ in runs),
            rows_up_to=display_policy.DRAW_LIMIT,
        )
        if display_policy.reduced_in_heatmap(trace.n_tokens):
            st.caption(
                f"{trace.n_tokens} tokens: the heatmaps average blocks of tokens so that at most "
                f"{display_policy.HEATMAP_AXIS_UP_TO}×{display_policy.HEATMAP_AXIS_UP_TO} cells are drawn. The bar charts show every token."
            )
        st.latex(r"H_i = -\sum_j \alpha_{ij}\log_2 \alpha_{ij}\quad\text{(bits)}")
        entropies = {
            "as trained": comparison.default_entropy,
            variant_name: comparison.variant_entropy,
        }
        entropy_title = f"L{layer} H{head}: entropy of each query's row"
        display.show_bars(
            trace.n_tokens,
            html=lambda: scaling_masking_charts.per_token_html_bars(
                labels, entropies, entropy_title, "entropy (bits)", "sm_entropy_rows"
            ),
            plotly=lambda: scaling_masking_charts.per_token_bars(
                trace.tokens, entropies, entropy_title, "entropy (bits)"
            ),
            key="sm_entropy_rows",
        )
        st.markdown(
            "Low entropy means a row that puts nearly all weight on one key. With the causal mask "
            "the row of token *i* can spread over at most i + 1 keys, so early tokens have little "
            "room for entropy."
        )
        cosine_title = f"Final vectors, {variant_name} vs as trained"  # phone-wide
        cosine_axis = "cosine to the trained run's final vector"
        display.show_bars(  # a cosine may be negative: signed bars from a zero line
            trace.n_tokens,
            html=lambda: scaling_masking_charts.per_token_html_bars(
                labels,
                {"cosine": comparison.final_cosine},
                cosine_title,
                cosine_axis,
                "sm_final_cosine",
                decimals=3,
                signed=True,
            ),
            plotly=lambda: scaling_masking_charts.per_token_bars(
                trace.tokens, {"cosine": comparison.final_cosine}, cosine_title, cosine_axis
            ),
            key="sm_final_cosine",
        )
        moved = scaling_masking.summarize_cosines(comparison.final_cosine)
        with payoff_box:
            before, after = comparison.mean_entropies
            change = (
                "sharper"
                if round(after, 2) < round(before, 2)
                else "flatter"
                if round(after, 2) > round(before, 2)
                else "as spread, at two decimals,"
            )
            takeaway.show(
                f"With {variant_name}, the rows of L{layer} H{head} are {change} than as trained "
                f"(mean entropy {after:.2f} bits against {before:.2f}), and since the switch acts "
                f"in every layer, the final vectors keep a mean cosine of {moved.mean:.3f} with "
                "the model as trained."
            )
        st.caption(
            f"Cosine 1 means the token ends up pointing the same way as in the model as trained. "
            f"Mean cosine {moved.mean:.3f}; the token that moved most is "
            f"{literal(labels[moved.most_moved])} ({moved.lowest:.3f})."
        )

    # What the switches mean, and what they do not, folded below the comparison it qualifies.
    with st.expander("What the switches do, and what they do not"):
        # (L,) std of the scaled scores per layer
        spread = scaling_masking.score_spread_by_layer(trace)
        st.markdown(
            "Section 2 assumes query and key entries that are independent with mean 0 and "
            "variance 1, the assumption Vaswani et al. (2017, footnote 4) use to explain the factor. "
            "Trained, "
            f"{model_label}'s scaled scores on the sidebar sentence have a standard deviation "
            f"of {span(spread, '.1f')} depending on the layer, not 1: training sets "
            "its own spread."
        )
        display.show_weight_bars(  # one bar per layer: HTML, so the tab loads no plotly.js
            [f"layer {layer}" for layer in range(len(spread))],
            {"std of QKᵀ/√d_k": spread},
            "Spread of the trained, scaled scores",
            key="sm_score_spread",
            y_title="standard deviation",
        )
        st.markdown(
            "What the switches above do, and what they do not: the weights were trained with the "
            f"1/√d_k factor, so turning it off multiplies every score by √d_head = {model.d_head**0.5:.2f}. "
            'That shows the model on inputs it never met in training, not "the model without '
            'scaling". A model trained without the factor would not look like this: training could '
            "absorb the factor into W_Q and W_K. What the factor changes is training itself. Vaswani "
            "et al. (2017) suspect that for large d_k the dot products grow large and push the "
            "softmax into regions where its gradients are extremely small, and scale to counteract "
            "it. Whether an unscaled head trains worse depends on the task and on where it starts: "
            "the Lab trains small heads both ways from the same seeds, so you can compare how the "
            "runs go. The causal-mask switch is off-distribution in the same way: "
            + (
                f"{model_label} is a decoder, trained with the mask, so the switch removes it and "
                "lets every token see the tokens after it, which it never did in training."
                if model.is_decoder
                else f"{model_label} is a bidirectional encoder, trained with every token seeing "
                "every other, so the switch adds a mask it never had."
            )
        )
        st.page_link(
            "views/lab.py",
            label="Lab: train a head with and without √d_k",
            icon=":material/model_training:",
        )


def causal_mask() -> None:
    """Section 4: −∞ above the diagonal becomes exact zeros after softmax."""
    st.subheader("4 · The causal mask itself")
    layer, head = pick_head()
    st.latex(
        r"\tilde s_{ij}=\begin{cases}s_{ij} & j\le i\\ -\infty & j>i\end{cases}"
        r"\qquad e^{-\infty}=0\ \Rightarrow\ \alpha_{ij}=0\ \text{for}\ j>i"
    )
    st.markdown(
        "A causal mask lets token *i* read only itself and the tokens before it, as a model that "
        "writes text one piece at a time must. The future scores are replaced by −∞ before the "
        "softmax, and the exponential turns them into exact zeros. Here the mask is applied to "
        f"the scores of layer {layer}, head {head} of the trained run."
        + (
            f" {model_label} is a decoder: this is the mask it was trained with, in every layer."
            if model.is_decoder
            # an encoder's scores under a mask: as the sidebar's off-distribution warning says
            else f" {model_label} never saw this mask in training: it is an encoder, every "
            "token seeing the whole sentence, so what follows is its trained scores pushed off "
            "their training distribution, not a model trained with the mask."
        )
    )
    masked_scores, masked_weights = scaling_masking.causal_view(trace, layer, head, max_tokens=40)
    shown = len(masked_scores)  # the tokens drawn (k rows)

    def masked_figures() -> None:
        """The head's scores and weights with the mask, and their file."""
        scores_fig, weights_fig = scaling_masking_charts.causal_mask_figures(
            masked_scores, masked_weights, trace.tokens
        )
        display.show_matrix(  # side by side, one key each
            masked_scores.shape,
            None,
            lambda: (scores_fig, weights_fig),
            ("sm_masked_scores", "sm_masked_weights"),
        )
        st.caption(
            "Blank cells are −∞ (a chart file cannot store −∞, so they are sent as empty). "
            + (
                f"Only the first {shown} of {trace.n_tokens} tokens are drawn; under a causal mask "
                "their rows never see later tokens, so this corner is exact."
                if shown < trace.n_tokens
                else ""
            )
        )
        tables.download_matrix(
            masked_scores,
            labels[:shown],
            labels[:shown],
            f"causal-scores-L{layer}-H{head}",
            key="sm_csv",
        )

    predict.ask_choice(
        "sm_first_row",
        predict_answers.first_row_under_mask(
            masked_weights,
            scaling_masking.first_row_without_mask(trace, layer, head),
            trace.tokens,
            trained_with_mask=model.is_decoder,
        ),
        reveal=masked_figures,
        folded="the head's scores and weights with the mask",
    )


def cross_attention() -> None:
    """Section 5: queries from one sentence, keys and values from another."""
    st.subheader("5 · Cross-attention: one sentence asks, another answers")
    st.latex(
        r"\begin{gathered}\operatorname{CrossAttn}(X_A, X_B)=\\ \operatorname{softmax}\!\left("
        r"\frac{(X_A W_Q)(X_B W_K)^\top}{\sqrt{d_k}}\right) X_B W_V\end{gathered}"
    )
    other = inputs.pair or sidebar.EXAMPLE_PAIR[1]
    layer, head = pick_head()
    st.markdown(
        "Nothing in the formula requires queries and keys to come from the same text. Here the "
        "queries come from sentence A (the sidebar sentence) and the keys and values from "
        f"sentence B, through the same function and the real weights of layer {layer}. Each "
        f"sentence is first run through {model_label} alone, so both enter the layer as the "
        f"model would see them. {model_label}, like BERT, has no cross-attention: these are a "
        "self-attention layer's "
        "W_Q, W_K and W_V, reused for a job they were never trained for. In the original "
        "Transformer (Vaswani et al., 2017) every decoder layer has its own trained cross-attention "
        "weights, with queries from the decoder and keys and values from the encoder's final "
        "output. "
        + ("" if inputs.pair else "The sidebar has no second sentence, so B is an example."),
        help=terms.ahead("encoder, decoder"),
    )
    try:
        trace_a = traces.trace(model, inputs.text)
        trace_b = traces.trace(model, other)
    except EmptyInput as err:
        st.info(f"Sentence B: {err}", icon="✍️")
    else:
        cross = scaling_masking_runs.cross_attention(model, trace_a, trace_b, layer)
        display.show_matrix(
            cross.attn_weights[head].shape,
            None,
            lambda: scaling_masking_charts.reduced_heatmap(
                cross.attn_weights[head],
                trace_a.tokens,
                trace_b.tokens,
                f"L{layer} H{head}: queries from A, keys from B",
            ),
            "sm_cross",
        )
        st.caption("Each row sums to 1 over the tokens of B.")
        tables.download_matrix(
            cross.attn_weights[head],
            widgets.numbered(trace_a.tokens),
            widgets.numbered(trace_b.tokens),
            f"cross-attention-L{layer}-H{head}",
            key="sm_cross_csv",
        )
    with st.expander("Where attention began: a decoder reading an encoder"):
        st.markdown(
            "Attention entered neural translation as cross-attention. In Bahdanau, Cho & Bengio "
            "(2015) a recurrent encoder reads the source sentence into one state per word; "
            "before writing each output word, the recurrent decoder scores every encoder state "
            "against its own state (with a small feed-forward network, not a dot product), "
            "takes a softmax, and reads the weighted average of the states. Self-attention "
            "keeps that weighted average and changes where its three inputs come from: queries, "
            "keys and values are all the same sequence's tokens, so every token reads every "
            "other, and no recurrence is left to carry information from word to word."
        )


def padding_mask() -> None:
    """Section 6: [PAD] pieces appended, with and without the padding mask."""
    st.subheader("6 · The padding mask: batches without side effects")
    st.latex(
        r"\begin{gathered}m_j = \begin{cases}\text{True} & \text{token } j \text{ is real}\\ \text{False} & "
        r"\text{token } j \text{ is [PAD]}\end{cases}\\ \tilde s_{ij} = s_{ij}\ \text{if } m_j,"
        r"\ -\infty\ \text{otherwise}\end{gathered}"
    )
    st.markdown(
        "To run several sentences at once, a model pads the shorter ones with [PAD] pieces up to "
        "one length. The padding mask removes the [PAD] columns from every row, exactly as the "
        "causal mask removes the future. Below, the sidebar sentence with [PAD] pieces appended, "
        "run through every layer with and without the mask."
    )
    layer, head = pick_head()
    n_pad = st.slider("[PAD] pieces appended", 1, 16, 4, key="sm_pads", bind="query-params")
    try:
        runs = {
            masked: scaling_masking_runs.padded_run(model, inputs.text, n_pad, masked)
            for masked in (True, False)
        }
    except EmptyInput as err:
        st.info(str(err), icon="✍️")
    else:
        closing = anatomy_text.special_names_after(anatomy_text.of(model))  # [SEP], </s>, ""
        closing_included = f" ({closing} included)" if closing else ""
        if trace.n_tokens > runs[True].n_real:
            st.caption(
                f"The sidebar sentence has {trace.n_tokens} word pieces; this section reads its "
                f"first {runs[True].n_real}{closing_included}, enough to see the mask at work."
            )
        st.warning(  # as state.off_distribution_note words every other switched-off experiment
            f"The run without the mask (“no mask”): {model_label} never attended to [PAD] pieces in "
            "training (there they were masked, or absent). That run is the trained model pushed "
            "off its training distribution, not a model trained to read [PAD].",
            icon="🧪",
        )
        for column, (masked, run) in zip(st.columns(2), runs.items(), strict=True):
            with column:
                display.show_matrix(
                    run.attentions[layer, head].shape,
                    None,
                    lambda run=run, masked=masked: scaling_masking_charts.reduced_heatmap(
                        run.attentions[layer, head],
                        run.tokens,
                        run.tokens,
                        f"L{layer} H{head}: " + ("padding mask on" if masked else "no mask"),
                    ),
                    f"sm_pad_{'on' if masked else 'off'}",
                )
                st.metric(
                    "largest change of a real token's vector, any layer",
                    f"{run.max_change:.1e}",
                    help="Against the same sentence run alone, without any [PAD].",
                )
        st.markdown(
            f"With the mask the [PAD] columns are exactly 0 and the real tokens come out as if "
            f"alone (up to float rounding). Without it, real word pieces give the [PAD] pieces "
            f"{runs[False].mean_weight_on_pads:.0%} of their weight on average, and their "
            "vectors change."
        )


SECTIONS = {
    "1 · Saturation": saturation,
    "2 · Why √d_k": why_root_dk,
    "3 · Switches": switches,
    "4 · Causal mask": causal_mask,
    "5 · Cross-attention": cross_attention,
    "6 · Padding mask": padding_mask,
}
# One section at a time, drawn only when its tab is open: all six at once were 10 figures,
# a first visit and every new sentence far heavier than the reference app's
# (bench/bench_browser.py; bench/RESULTS.md, Cited in code). The URL keeps the open tab.
widgets.section_tabs(SECTIONS, key="sm_section")

st.caption(
    "Sources: Vaswani et al. (2017), scaled dot-product attention, the √d_k argument, masking "
    "and encoder–decoder attention; Devlin et al. (2019), BERT's bidirectional encoder."
)
