"""9 · Where the meaning comes from: sentence similarity, attention rollout and flow, norm-based
contributions and the encoder lens, on the sidebar's sentence(s)."""

import streamlit as st

import core
from core import explanations, information_flow, lens, rollout, similarity
from ui import (
    anatomy_text,
    charts,
    display,
    explanations_runs,
    information_flow_charts,
    information_flow_runs,
    matrix_charts,
    models,
    next_word,
    predict,
    predict_answers,
    sidebar,
    state,
    tables,
    takeaway,
    terms,
    traces,
    widgets,
    word_level,
    wording,
)
from ui.escape import literal
from ui.numbers import largest

inputs, model = state.page_context()


def show_mixing(matrix, labels, title: str, unit: str, key: str, filename: str) -> None:
    """An (n, n) rollout, flow or norm mixing matrix (row i: a position after the layer, column
    j: an input piece), through the one display policy: HTML cells or one image, else
    information_flow_charts.mixing_heatmap. Viridis over the shares' own range either way."""
    display.show_matrix(
        matrix.shape,
        html=lambda: matrix_charts.pair_grid(
            matrix,
            labels,
            title,
            name=key,
            colorbar_title="share",
            zmax=None,
            axis_titles=("position after the layer", f"input {unit} (layer 0)"),
            shape_in_title=False,
        ),
        plotly=lambda: information_flow_charts.mixing_heatmap(matrix, labels, title, unit=unit),
        key=key,
        filename=filename,
    )


model_label = models.label(model)  # the model's name in the prose
anatomy = anatomy_text.of(model)

widgets.page_title("9 · Where the meaning comes from")
st.markdown(
    "The bundled MiniLM (all-MiniLM-L6-v2) was trained to turn a sentence into one vector: "
    "average the top layer's token vectors, then scale the average to length 1. Two sentences "
    "mean much the same when their vectors point the same way. This page follows that vector "
    "back down through the layers to the word pieces it was made from"
    + ("." if model.name == core.BUNDLED else f", and reads {literal(model.name)} the same way.")
)

information_flow_runs.stop_unless_readable(model, inputs)
sidebar.off_distribution_note(inputs, model_label)  # the sidebar's switches act on every run here

pair = information_flow_runs.readable_pair(model, inputs)  # None when empty or unreadable


def two_sentences() -> None:
    """1: the pair's cosine similarity, and how it builds up layer by layer."""
    st.subheader("1 · Two sentences, one number")
    payoff_box = st.container()  # the takeaway, above the pair it reads (filled below)
    labels = [label for label, _, _ in similarity.EXAMPLE_PAIRS]
    left, right = st.columns([3, 1])
    example = left.selectbox(
        "Example pairs",
        range(len(labels)),
        format_func=lambda i: (
            f"{labels[i]}: “{similarity.EXAMPLE_PAIRS[i][1]}” / “{similarity.EXAMPLE_PAIRS[i][2]}”"
        ),
        key="ex_pair",
        bind="query-params",
    )
    example = min(int(example or 0), len(labels) - 1)  # a URL may carry any number
    right.button(
        "Use this pair",
        on_click=information_flow_runs.use_example_pair,
        args=(example,),
        icon=":material/compare_arrows:",
        key="ex_use_pair",
    )
    if inputs.pair and not pair:
        st.caption("The second sentence holds no readable word piece, so it is left out.")
    # Without a second sentence in the sidebar the section shows the example pair chosen above,
    # so it opens on a number and its curve rather than on a request.
    _, example_first, example_second = similarity.EXAMPLE_PAIRS[example]
    first, second = (inputs.text, pair) if pair else (example_first, example_second)
    whose = "the sidebar's two sentences" if pair else "the example pair"
    if model.is_decoder:
        st.info(
            f"{model_label} is a decoder: it was trained to predict the next word piece, not to "
            "make one vector of a sentence, so a cosine of its averaged states is no answer it "
            f"learned to give. Its counterpart: what each of {whose} makes it predict next.",
            icon="➡️",
        )
        distance = next_word.two_sentences(
            model, first, second, scale=inputs.scale, causal=inputs.causal, key="ex_next"
        )
        st.caption(
            f"Total variation distance between the two predictions, over the whole vocabulary: "
            f"{distance:.3f} (0: the same, 1: nothing in common). Each sentence runs on its own."
        )
        with payoff_box:
            takeaway.show(
                f"For {whose}, {model_label}'s two next-piece predictions are {distance:.3f} "
                "apart (total variation: 0 the same, 1 nothing in common)."
            )
        return
    similarity_now = information_flow_runs.pair_similarity(
        model, first, second, scale=inputs.scale, causal=inputs.causal
    )
    delta = None
    if not inputs.as_trained:
        as_trained = information_flow_runs.pair_similarity(
            model, first, second, scale=True, causal=inputs.causal_by_nature
        )
        delta = f"{similarity_now - as_trained:+.4f} against the model as trained"
    by_layer = lens.similarity_by_layer(
        information_flow_runs.sentence_trace(model, first, inputs).hidden_states,
        information_flow_runs.sentence_trace(model, second, inputs).hidden_states,
    )
    start, end = float(by_layer[0]), float(by_layer[-1])  # embedding output, last layer
    peak_at = largest(by_layer)[0]  # the state where the two vectors are most alike
    on_the_way = (
        f", and on the way it reaches {by_layer[peak_at]:.3f} ({charts.state_name(peak_at)})"
        if 0 < peak_at < len(by_layer) - 1
        else ""
    )
    with payoff_box:
        takeaway.show(
            f"The sentence vectors of {whose} have cosine {end:.3f} after the last layer; the "
            f"same average taken at the embedding output gives {start:.3f}{on_the_way}."
        )

    # one bar per state, as HTML: the section is on every tab, and needs no plotly.js (a
    # negative cosine goes to plotly's line, whose axis reaches below 0)
    title = "cos(A, B) of the mean-pooled states"
    display.show_weight_bars(
        [charts.state_name(s) for s in range(len(by_layer))],
        {"cos(A, B)": by_layer},
        title,
        key="ex_pair_layers",
        y_title="cos(A, B)",
        filename="similarity-by-layer",
        plotly_figure=lambda: information_flow_charts.settling_figure(by_layer, title, "cos(A, B)"),
        decimals=3,
    )
    st.metric(f"Cosine similarity of {whose}", f"{similarity_now:.4f}", delta)
    st.latex(
        r"\bar h = \frac{1}{n}\sum_{i=1}^{n} h_i^{(L)},\qquad e = \frac{\bar h}{\lVert \bar h \rVert}"
    )
    st.latex(r"\cos(e_A, e_B) = e_A \cdot e_B")
    if not pair:
        st.caption(
            f"The sidebar holds one sentence, so this is the example pair: “{literal(first)}” and "
            f"“{literal(second)}”. “Use this pair” puts it in the sidebar, where the rest of the "
            "page reads it too; the sections below work on the sidebar's first sentence."
        )
    untrained = (  # from the model's own files: only a sentence encoder learned this cosine
        ""
        if anatomy.trained_mean_pooled
        else f"{model_label} was not trained to make one vector of a sentence (its folder names "
        "no mean pooling), so this cosine is no answer it learned to give. "
    )
    st.caption(
        "Each sentence runs through the model on its own (not as one "
        f"{anatomy_text.framing(anatomy)} input)"
        + (", as in training. " if anatomy.trained_mean_pooled else ". ")
        + untrained
        + "Turn off √d_k scaling in the sidebar to see how much the similarity depends on it."
    )
    if model.name == core.BUNDLED:  # where the number comes from, for whoever checks it
        with st.expander("Is this the number MiniLM was trained to give?"):
            st.markdown(
                "Yes: with the default switches it equals, to 1e-5, the sentence vector of the "
                "all-MiniLM-L6-v2 release, which cuts inputs at 256 word pieces; this page "
                f"reads up to {model.max_positions}."
            )


def attention_rollout() -> None:
    """2: attention rollout after the chosen layer, and each input's share."""
    st.subheader("2 · Attention rollout")
    st.markdown(
        "One attention matrix says where one layer looks. Rollout (Abnar & Zuidema, 2020) chains "
        "the layers: average the heads, add the skip connection as half of the token itself, and "
        "multiply the layers' matrices from the bottom up. Row *i* of the result says which input "
        "pieces position *i* is made of after that layer."
    )
    st.latex(r"\hat A_l = \tfrac12\Big(\tfrac1H\sum_h A_l^h + I\Big)\ \text{(rows renormalised)}")
    st.latex(r"R_l = \hat A_l\, R_{l-1},\qquad R_0 = \hat A_0")
    layer = rollout_layer()

    def rollout_figure() -> None:
        """The rollout after the chosen layer: every row's shares of the input pieces."""
        show_mixing(
            view.matrix(flow.rolled[layer]),
            view.labels,
            f"Attention rollout after layer {layer}",
            unit[:-1],
            key="ex_rollout",
            filename=f"rollout-L{layer}",
        )
        st.caption(
            "Caveat: rollout assumes each layer mixes token vectors linearly with exactly these weights. "
            f"It ignores what the value vectors, W_O, {anatomy.norm_name} and the feed-forward block "
            "do, so it is "
            "a picture of the routing, not of what is carried along it."
        )

    predict.ask_choice(
        "flow_row_sum",
        predict_answers.rollout_row_sum(flow.rolled, trace.tokens, layer),
        reveal=rollout_figure,
        folded="the rollout after this layer",
    )

    scores = flow.scores()
    shown = {
        explanations.METHOD_LABELS[name]: view.scores(values) for name, values in scores.items()
    }
    if trace.is_decoder:
        title = f"Each {unit[:-1]}'s share of the last position's vector"
        y_title = "share of the last position's top vector"
    else:
        title = f"Each {unit[:-1]}'s share of the sentence vector"
        y_title = "share of the mean-pooled top layer"
    display.show_weight_bars(
        view.labels,
        shown,
        title,
        key="ex_bars",
        y_title=y_title,
        filename="sentence-shares",
        plotly_figure=lambda: information_flow_charts.token_bars(
            shown, view.labels, title, y_title
        ),
        decimals=3,  # a piece's share is often under 0.01
    )
    if len(view.labels) > 128:
        st.caption(
            f"{len(view.labels)} {unit}: a bar is narrower than a pixel here and every label is not "
            "drawn; point at the chart to read a bar, or take the CSV below."
        )
    rollout_specials = information_flow.special_share(
        scores["rollout"], trace.tokens, trace.special
    )
    norm_specials = information_flow.special_share(scores["norm"], trace.tokens, trace.special)
    specials = [literal(t) for t, s in zip(trace.tokens, trace.special, strict=True) if s]
    held = (
        f" Here the special pieces ({', '.join(dict.fromkeys(specials))}) hold "
        f"**{rollout_specials:.0%}** of it by rollout, **{norm_specials:.0%}** by norm rollout "
        "(section 4)."
        if specials
        else f" {model_label} adds no special pieces to this input."
    )
    if trace.is_decoder:
        st.markdown(
            f"{model_label} is a decoder: the vector that matters is the last position's, which "
            "predicts the next piece, so each input's share is its entry in the last row." + held
        )
    else:
        st.markdown(
            "The sentence vector is the mean of the top rows, so each input's share is the mean "
            "of its column." + held
        )
    tables.download_matrix(
        [list(row) for row in zip(*shown.values(), strict=True)],
        widgets.numbered(view.labels),
        list(shown),
        "sentence-shares",
        label=f"Download the per-{unit[:-1].replace(' ', '-')} table as CSV",
        key="ex_shares_csv",
    )


def attention_flow() -> None:
    """3: attention flow, up to MAX_FLOW_PIECES word pieces."""
    st.subheader("3 · Attention flow")
    st.markdown(
        "Flow (same paper) reads the same layered graph as a network of pipes whose capacities are "
        "the weights of Â, and asks how much can flow from an input piece to a top position at "
        "most (a maximum flow). Rollout multiplies every path; flow is limited by the narrowest "
        "cut, so it spreads credit more evenly. A flow value is not a share (each input may push "
        "up to its own narrowest cut), so each row is divided by its sum to compare with rollout."
    )
    if flow.flow is None:
        st.info(
            f"Flow is computed up to {rollout.MAX_FLOW_PIECES} word pieces: it needs one maximum "
            f"flow per (input, output) pair, {rollout.MAX_FLOW_PIECES**2:,} of them at that size, "
            f"under a second on one core. This sentence has {trace.n_tokens}; shorten it to see flow.",
            icon="🛑",
        )
    else:
        show_mixing(
            view.matrix(flow.flow_shares()),
            view.labels,
            "Attention flow to the top layer, each row ÷ its sum",
            unit[:-1],
            key="ex_flow",
            filename="attention-flow",
        )
        the_paper_and_this_sentence()


def the_paper_and_this_sentence() -> None:
    """Abnar & Zuidema's finding beside this sentence's own ρ, and what flow's shares spread."""
    st.markdown(
        "Abnar & Zuidema (2020) found that on the models they tested, rollout and flow ranked the "
        "input tokens closer than raw attention did to two measures of importance: what blanking "
        "out one input did to the output, and input gradients. Theirs explained a classifier's "
        "output; the same comparison on this sentence explains "
        + (
            "the decoder's own output, the log-probability of its likeliest next piece: "
            if trace.is_decoder
            else "the mean-pooled sentence vector: "
        )
        + "Spearman's ρ of each method's shares "
        "against removing each piece alone (removal) and against integrated gradients (IG), "
        "special pieces left out.",
        help=terms.ahead("Spearman's ρ", "integrated gradients"),
    )
    check = explanations_runs.paper_check(model, text, inputs, flow)
    reference_names = {
        "removal": "ρ, removal",  # short: three columns fit a phone
        "integrated_gradients": "ρ, IG",
    }
    methods = list(next(iter(check.rho.values())))
    st.dataframe(
        {
            "method": [explanations.METHOD_LABELS[name] for name in methods],
            **{
                label: [round(check.rho[reference][name], 2) for name in methods]
                for reference, label in reference_names.items()
                if reference in check.rho
            },
        },
        hide_index=True,
    )
    if "integrated_gradients" not in check.rho:
        st.caption(
            "Integrated gradients did not converge on this sentence (their scores do not add up "
            "to what they share out; Explanations side by side shows by how much), so removal is "
            "the only reference here."
        )
    if check.agrees:
        verdict = (
            f"On this sentence {model_label} agrees with the paper: rollout and flow rank closer "
            f"than raw attention in {wording.all_of(check.comparisons, 'comparison')}."
        )
    elif check.disagrees:
        verdict = (
            f"On this sentence {model_label} goes the other way from the paper: raw last-layer "
            f"attention ranks closer than rollout and flow in "
            f"{wording.all_of(check.comparisons, 'comparison')}. A finding on other models and "
            "another output need not carry over."
        )
    elif check.comparisons:
        verdict = (
            f"On this sentence the paper's finding holds only in part: rollout or flow ranks "
            f"closer than raw attention in {check.wins} of {check.comparisons} comparisons."
        )
    else:
        verdict = "This sentence has too few word pieces to rank: type a longer one."
    shares = flow.scores()["flow"]
    bits, even = information_flow.share_entropy(shares)
    spread = wording.how_evenly(bits, len(shares))  # the word follows the pieces covered
    st.markdown(
        f"{verdict} Flow spreads "
        + ("the last position's vector" if trace.is_decoder else "this sentence's vector")
        + f" {spread}: its shares carry "
        f"{bits:.2f} bits of the {even:.2f} an even spread over {len(shares)} pieces would, as "
        f"many as an even spread over {wording.pieces_covered(bits):.0f} of them. "
        "Explanations side by side runs the deletion test on the same methods."
    )


def norm_contributions() -> None:
    """4: norm-based contributions rolled out like attention."""
    st.subheader("4 · What is actually carried: norm-based contributions")
    st.markdown(
        "A head can look hard at a token whose value vector is tiny, and then carries almost "
        "nothing (Kobayashi et al., 2020, found this for [SEP] and punctuation in BERT-base). They "
        "measure the length of what each key adds to the query instead of the weight, and their "
        "follow-up (2021) splits the skip connection and the norm after attention exactly "
        "among the inputs: both look at one layer. Each row here is divided by its sum and the "
        "layers are chained like rollout, which is the idea of GlobEnc (Modarressi et al., 2022) "
        "and ALTI (Ferrando et al., 2022). GlobEnc also splits the second norm, and ALTI "
        "measures a contribution by distance rather than length, so this is the plainest member of "
        "that family."
    )
    st.latex(  # a pre-norm layer has no norm after the sum: nothing to fold in
        r"c_{ij} = \big\lVert \sum_h \alpha^h_{ij}\, v^h_j W_O^h + [i{=}j]\,x_i \big\rVert"
        if anatomy.pre_norm
        else r"c_{ij} = \frac{\big\lVert \gamma \odot \mathrm{centre}\big(\sum_h \alpha^h_{ij}\, "
        r"v^h_j W_O^h + [i{=}j]\,x_i\big)\big\rVert}{\sigma_i}"
    )
    layer = rollout_layer()
    show_mixing(
        view.matrix(flow.norm_rolled[layer]),
        view.labels,
        f"Norm rollout after layer {layer}",
        unit[:-1],
        key="ex_norm",
        filename=f"norm-rollout-L{layer}",
    )
    st.caption(
        "An approximation, stated: the split is exact for attention and the skip connection "
        f"of each layer ({model_label} normalises before attention, so no norm follows their "
        f"sum); the feed-forward block and its {anatomy.norm_name} are treated as keeping each "
        "position's mixture (they work on one token at a time), and the bias b_O belongs to "
        "no token."
        if anatomy.pre_norm
        else "An approximation, stated: the split is exact for attention, skip connection and "
        f"the first {anatomy.norm_name} of each layer; the feed-forward block and the second "
        f"{anatomy.norm_name} are treated as keeping each position's mixture (they work on "
        "one token at a time), and the biases b_O and β belong to no token."
    )


def logit_lens() -> None:
    """5, for a decoder: every state read through the final norm and the output head."""
    st.subheader("5 · The logit lens: what would each layer predict?")
    st.markdown(
        f"{model_label} reads its next piece off the last layer's vector: "
        + (f"a final {anatomy.norm_name}, then " if anatomy.final_norm else "")
        + "the output head"
        + (" (the word-piece table itself: the head is tied to it)" if anatomy.tied_head else "")
        + ", then softmax. The logit lens (nostalgebraist, 2020) reads every earlier "
        "state the same way, as if the layers above were skipped. The last row is the model's "
        "real prediction; the rows before it show when that prediction takes shape."
    )
    st.latex(r"p_l = \operatorname{softmax}\big(W_U\,\mathrm{Norm}_{\text{final}}(h_l)\big)")
    position = widgets.token_picker(
        "Position to read (its vector predicts the piece after it)",
        trace.tokens,
        trace.n_tokens - 1,
        key="ex_lens_position",
    )
    reading = information_flow_runs.logit_lens(model, trace, position)
    states = ["embeddings", *[f"after layer {i}" for i in range(model.n_layers)]]
    final_pieces = [models.piece_text(model, int(i)) for i in reading.final_ids]
    display.show_html_figure(
        information_flow_charts.logit_lens_grid(
            reading.final_probabilities, states, final_pieces, name="ex_logit_lens"
        )
    )
    st.dataframe(
        {
            "state": states,
            "its own likeliest next pieces": [
                ", ".join(
                    f"{models.piece_text(model, int(i))} {p:.2f}"
                    for i, p in zip(ids, probabilities, strict=True)
                )
                for ids, probabilities in zip(reading.ids, reading.probabilities, strict=True)
            ],
        },
        hide_index=True,
    )
    settled = next(  # the first state from which the final first piece stays first
        (
            layer
            for layer in range(len(states))
            if all(row[0] == reading.final_ids[0] for row in reading.ids[layer:])
        ),
        len(states) - 1,
    )
    st.caption(
        f"“{literal(final_pieces[0])}” is the reading's first piece from “{states[settled]}” on. "
        "A reading, not the model's computation: an earlier state was never meant to be read "
        "by the output head, and the layers above it do more than pass it on, so an early "
        "reading can look wrong for a vector that is fine where it is (Belrose et al., 2023, "
        "found the plain lens unreliable on some models' early layers and trained a 'tuned "
        "lens' for them). The lens works on word pieces whatever the word-level switch says."
    )


def encoder_lens() -> None:
    """5: how close each layer already is to the final vectors."""
    st.subheader("5 · The encoder lens: how early does the meaning settle?")
    st.markdown(
        "Compare every layer with the last one. Left: each token's cosine to its own final vector. "
        "Right: the mean of a layer's token vectors against the final sentence embedding: how "
        "close an early stop would have come."
    )
    token_settling = lens.token_settling(trace.hidden_states)  # (L + 1, n)
    left, right = st.columns([3, 2])
    with left:
        fig = information_flow_charts.lens_heatmap(
            token_settling,
            trace.tokens,
            "Each token vs its final vector (word pieces)",
        )
        display.show_matrix(
            token_settling.shape, None, lambda: fig, key="ex_lens", filename="lens-tokens"
        )
    with right:
        settling = lens.sentence_settling(trace.hidden_states)
        fig = information_flow_charts.settling_figure(settling, "Sentence vs final embedding")
        display.show_figure(fig, key="ex_settle", filename="lens-sentence")
    token = widgets.token_picker(
        "Nearest word pieces of a token at every state, through the input table",
        trace.tokens,
        1,
        key="ex_token",
    )
    nearest = information_flow_runs.nearest_by_layer(model, trace, token)
    st.dataframe(
        {
            "state": ["embeddings", *[f"after layer {i}" for i in range(model.n_layers)]],
            "cos to final": [round(float(row[token]), 3) for row in token_settling],
            "nearest word pieces": [", ".join(row) for row in nearest],
        },
        hide_index=True,
    )
    piece = trace.tokens[token]
    stays = sum(row[0] == piece for row in nearest)  # states where the piece is its own nearest
    if model.name == core.BUNDLED:
        why = (
            "BERT was pre-trained with a masked-word head whose output matrix is this same table, "
            "which is why the reading is used on BERT. The MiniLM on screen has no such head: its "
            "12-layer parent was distilled from a larger model's last-layer attention and value "
            "relations (Wang et al., 2020), this 6-layer version keeps every second of its layers "
            "and was then fine-tuned on sentence pairs with a contrastive loss, and its weight "
            "file holds no output head."
        )
    else:
        why = (
            "BERT's masked-word head reuses this table, which is why the reading is used on BERT; "
            f"whether it means anything for {model_label} depends on how it was trained."
        )
    if stays == len(nearest):
        found = (
            "at every state: the reading shows that the piece's identity survives the layers, "
            "not what the piece comes to mean"
        )
    else:
        found = f"at {stays} of the {len(nearest)} states"
    st.caption(
        "The nearest rows of the input word-piece table are a heuristic reading of a vector, no "
        f"more. {why} Here “{literal(piece)}” is its own nearest row {found}. The Embedding "
        "projections page uses the same table; the lens works on word pieces whatever the "
        "word-level switch says."
    )


two_sentences()  # drawn whole, above the tabs: the number the tabs explain
st.caption(
    "Sections 2 to 5, one tab each, follow the sentence picked here"
    + (": the sidebar's first sentence, no longer the example pair above" if not pair else "")
    + "; the rollouts of tabs 2 and 4 stop after the layer picked inside them."
)
followed = st.radio(
    "Sentence to follow",
    ["first", "second"],
    horizontal=True,
    key="ex_sentence",
    bind="query-params",
    disabled=not pair,
)
merge_words = inputs.word_level  # the sidebar's shared switch
text = pair if followed == "second" and pair else inputs.text
trace = traces.trace_or_stop(
    model, sidebar.Inputs(text, None, model.name, inputs.scale, inputs.causal)
)
flow = information_flow_runs.information_flow(model, text, inputs)
view = word_level.WordView.of(trace, merge_words)
unit = "words" if merge_words else "word pieces"


def rollout_layer() -> int:
    """The layer a rollout stops after: a slider inside the tab it drives (2 and 4 share it)."""
    layer = st.slider(
        "After layer",
        0,
        model.n_layers - 1,
        model.n_layers - 1,
        key="ex_layer",
        bind="query-params",
    )
    return min(int(layer), model.n_layers - 1)  # a larger model's number in the URL: clamped


SECTIONS = {
    "2 · Rollout": attention_rollout,
    "3 · Flow": attention_flow,
    "4 · Norms": norm_contributions,
    "5 · Lens": logit_lens if model.is_decoder else encoder_lens,
}
# One section at a time, drawn only when its tab is open: all at once were six figures and a
# table, a first visit and every new sentence far heavier than the reference app's
# (bench/bench_browser.py; bench/RESULTS.md, Cited in code). The URL keeps the open tab.
display.head_switch()  # the readout of a long sentence's mixing matrices (one image each)
widgets.section_tabs(SECTIONS, key="ex_section")
