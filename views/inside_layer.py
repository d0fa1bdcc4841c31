"""5 · Inside a layer: where attention sits in a layer, and how much of the change it makes."""

import streamlit as st

import core
from core import inside_layer
from ui import (
    anatomy_text,
    display,
    inside_layer_charts,
    inside_layer_runs,
    models,
    predict,
    predict_answers,
    sidebar,
    state,
    tables,
    takeaway,
    traces,
    widgets,
    wording,
)
from ui.numbers import extremes, row_spans, signed, span

inputs, model = state.page_context()
name = models.label(model)
anatomy = anatomy_text.of(model)
norm = anatomy.norm_name

widgets.page_title("5 · Inside a layer")
st.markdown(
    "Attention is one of two sublayers in every layer. Around it run the **residual stream** "
    "(each sublayer adds its result to the token's vector instead of replacing it), "
    f"**{norm}** (which rescales each token's vector"
    + (" before each sublayer reads it" if anatomy.pre_norm else " after every addition")
    + ") and a **feed-forward network** that transforms each token on its own, without looking at the "
    "others. Only attention moves information between tokens; the feed-forward network does "
    "much of the rest of the work."
)

st.subheader(f"1 · One layer of {name}, drawn from its weights")
stages = inside_layer_runs.layer_stages(model)
attention_params = inside_layer.part_parameters(stages, "attention")
ffn_params = inside_layer.part_parameters(stages, "ffn")
takeaway.show(
    f"Per layer, attention holds {attention_params:,} trained numbers and the feed-forward "
    f"network {ffn_params:,}: "
    + (
        f"{ffn_params / attention_params:.1f} times as many in the part that looks at one token "
        "at a time."
        if ffn_params > attention_params
        else f"{attention_params / ffn_params:.1f} times as many in attention, the part that "
        "moves information between tokens."
    )
)
display.show_figure(
    inside_layer_charts.block_diagram(stages, f"{name}: one of its {model.n_layers} layers"),
    key="layer_diagram",
    filename="layer-diagram",
)
st.latex(anatomy_text.layer_latex(anatomy))  # one column, so it fits a phone's width
st.markdown(
    f"Widths and parameter counts are read from the loaded weights. Per layer the attention "
    f"sublayer holds {attention_params:,} trained numbers, the feed-forward network "
    f"({anatomy_text.ffn_words(anatomy)}) {ffn_params:,}: "
    + (
        f"{ffn_params / attention_params:.1f} times as many. "
        if ffn_params >= attention_params
        else f"{attention_params / ffn_params:.1f} times fewer. "
    )
    + anatomy_text.arrangement(anatomy)
)

st.subheader("2 · How much of each token's change comes from attention?")
st.markdown(
    "Each sublayer writes one vector per token into the stream: *a* from attention, *f* from "
    "the feed-forward network. Their lengths, measured on the sidebar sentence, compare the "
    "two contributions layer by layer"
    + ("." if anatomy.pre_norm else f" (before the {norm} that follows each addition).")
)
st.latex(
    r"\text{attention share}_i = \frac{\lVert a_i \rVert}{\lVert a_i \rVert + \lVert f_i \rVert}"
)
trace = traces.trace_or_stop(model, inputs)
sidebar.off_distribution_note(inputs, name)  # the sidebar's switches act on every run here
sizes = inside_layer_runs.sublayer_sizes(model, trace)
means = sizes.layer_means()  # (L,) each, averaged over the tokens
mean_a, mean_f, share = means["attention_update"], means["ffn_update"], means["attention_share"]


def sublayer_sizes_figure() -> None:
    """What each sublayer writes, layer by layer: the figure, its reading and its table."""
    display.show_bars(
        len(share),
        None,
        lambda: inside_layer_charts.sublayer_figure(
            mean_a, mean_f, share, f"{name}: what each sublayer adds"
        ),
        key="layer_sizes",
        filename="sublayer-sizes",
    )
    st.markdown(
        f"On this sentence attention writes {span(share, '.0%')} of the combined "
        f"update per layer, the feed-forward network the rest. A page that credits every change "
        "of a token's vector to attention overstates it: attention decides *which* tokens' "
        "information arrives, and the feed-forward layers do "
        f"{wording.how_much_of(*extremes(means['ffn_share']))} the transforming."
    )
    st.caption(
        f"The page recomputes every layer step by step from the run's inputs; its result matches "
        f"the run's own layer outputs to {sizes.max_rebuild_error:.1e}. The sidebar switches apply. "
        "A length is a rough measure: a long update that points along the stream changes its "
        "direction less than a short one across it."
    )
    norms = {
        "‖x‖ stream in": means["stream"].tolist(),
        "‖a‖ attention": mean_a.tolist(),
        ("‖h‖ = ‖x + a‖" if anatomy.pre_norm else f"‖h‖ after {norm}"): means[
            "mid_stream"
        ].tolist(),
        "‖f‖ feed-forward": mean_f.tolist(),
    }
    tables.static_table(
        {"layer": list(range(model.n_layers))} | norms | {"attention share": share.tolist()},
        decimals=dict.fromkeys(norms, 2) | {"attention share": 3},
    )


predict.ask_choice(
    "layer_majority",
    predict_answers.attention_majority(share, ffn_params / attention_params),
    reveal=sublayer_sizes_figure,
    folded="the sizes of a and f in every layer, with their table",
)
st.subheader("3 · Why the stream, the norm and the bend")
kept = means["kept_direction"]
floor = inside_layer_runs.activation_floor(model)  # the lowest output of the model's activation
units_off = means["units_off"]
modest = extremes(kept)[0] >= 0.8  # the corrections turn x by less than ~37 degrees on average
# Where the norms sit decides whether the error signal has a bare identity path back.
if anatomy.arch.norm_position == "pre":  # x + a(norm(x)): the stream is a chain of plain sums
    gradient_path = (
        f"{name} normalises before each sublayer, off the stream, so from the last layer back to "
        "the first the error signal has a path along the identity, however little a sublayer "
        "passes back"
        + (
            " (only the one norm after the last layer sits on it)."
            if anatomy.arch.final_norm
            else "."
        )
    )
else:  # norm(x + a(x)): every way back passes through a norm's derivative
    gradient_path = (
        f"In {name}, though, every LayerNorm sits on the stream itself (see **LayerNorm** below): "
        "each sum is normalised before the next layer reads it, so the error signal passes "
        "through every norm's derivative on its way back, not along a bare identity."
    )
st.markdown(
    "**The residual stream** carries each token's vector past every sublayer unchanged and adds "
    "the sublayer's result to it: x + a, not a alone. A sublayer therefore learns a correction "
    "to what it receives"
    + (
        ", and here the corrections are modest: adding *a* turns *x* by little, "
        if modest
        else ": "
    )
    + f"cosine(x, x + a) = {span(kept)} (layer means, this sentence). In "
    "training, the derivative of the sum is the identity plus the sublayer's own derivative. "
    + gradient_path
    + " He et al. (2016) introduced this shortcut to make very deep networks trainable."
)
st.latex(r"\frac{\partial\,(x + a(x))}{\partial x} = I + \frac{\partial a}{\partial x}")
# How far apart the longest and shortest vectors are, before and after the LayerNorm.
spread_before, spread_after = sizes.spread("ffn_sum"), sizes.spread("output")
stream_means = means["stream"]  # (L,) mean ‖x‖ entering each layer
if anatomy.pre_norm:
    norm_story = (
        f"{anatomy_text.norm_definition(anatomy, model.d_model)} Here it sits before each "
        "sublayer: the sublayer reads a normalised copy, and the stream itself is never "
        f"normalised inside a layer. On this sentence the stream is {stream_means[0]:.1f} long "
        f"entering layer 0 and {means['output'][-1]:.1f} leaving the last layer (means "
        "over tokens)"
        + (f"; a final {norm} follows the last layer" if anatomy.final_norm else "")
        + ". Xiong et al. (2020) showed that with the norm before each sublayer the gradients "
        "near the output stay well-behaved at the start of training, so such models need less "
        "of a slow start of the learning rate."
    )
else:
    norm_story = (
        f"{anatomy_text.norm_definition(anatomy, model.d_model)} "
        "The sums it receives vary widely in size: on this sentence h + f is "
        f"{span(sizes.ffn_sum, '.1f')} long, token by token and layer by "
        f"layer, and the same vectors after the {norm} are {span(sizes.output, '.1f')}"
        f": the longest is {spread_after:.1f} times the shortest, against "
        f"{spread_before:.1f} times before the norm. So the next layer's weights meet inputs in "
        + ("a narrow band of lengths" if spread_after < spread_before / 2 else "a band of lengths")
        + f", whatever came before, which steadies training. In this post-{norm} arrangement the "
        "norm sits on the residual path itself; Xiong et al. (2020) showed that this makes the "
        "gradients near the output large early in training, one reason such models need a slow "
        "start of the learning rate and later models normalise before each sublayer."
    )
st.markdown(norm_story)
act = anatomy.activation_name
bend = (
    f"so the {act} of the gate projection, multiplied into the up projection, is what lets the "
    "feed-forward network compute something new: "
    if anatomy.gated
    else f"so the {act} between them is what lets the feed-forward network compute something new: "
)
st.markdown(
    "**The feed-forward network's bend.** For given weights, attention's output is αV, a "
    "weighted average of value vectors: it is linear in the values and can only blend what the "
    "tokens already carry. Two linear maps in a row are one linear map "
    + ("(W_down W_up" if anatomy.gated else "(W_2 W_1")
    + " would fold into a single matrix), "
    + bend
    + f"large positive inputs to {act} pass almost unchanged, negative ones are "
    + (f"squeezed to between {signed(floor, 2)} and 0" if floor < 0 else "set to 0")
    + f". Which of the {anatomy.dims.d_ff:,} units a token switches off depends "
    f"on its own vector; here {span(units_off, '.0%')} of them get a "
    "negative input (layer means). A non-linear transform of each position on its own is what "
    "this sublayer adds to attention's mixing."
)
activation_column = anatomy_text.activation_input_label(anatomy)
tables.static_table(
    {
        "layer": list(range(model.n_layers)),
        "cos(x, x + a)": kept.tolist(),
        ("‖h‖ = ‖x + a‖" if anatomy.pre_norm else f"‖x + a‖ before {norm}"): row_spans(
            sizes.attention_sum, ".1f"
        ),
        ("‖y‖ = ‖h + f‖" if anatomy.pre_norm else f"‖h + f‖ before {norm}"): row_spans(
            sizes.ffn_sum, ".1f"
        ),
    }
    | (
        {}
        if anatomy.pre_norm  # y is h + f itself: no norm after it
        else {"‖y‖ after": row_spans(sizes.output, ".1f")}
    )
    | {activation_column: units_off.tolist()},
    decimals={"cos(x, x + a)": 3, activation_column: 3},
)
st.caption(
    f"Per layer over the sentence's tokens: the cosine and the share of {act} inputs below zero "
    "are means, the lengths are smallest–largest."
)

st.subheader("4 · Encoders and decoders: BERT and GPT")
later = inside_layer_runs.weight_on_later_tokens(trace)
st.markdown(
    (
        "The layer above is a **decoder** layer: each token reads only itself and the tokens "
        "before it (page 3 shows the causal mask). An **encoder** layer is the same without "
        "the mask: every token reads every other, on both sides. On the sidebar sentence, "
        if anatomy.is_decoder
        else "The layer above is an **encoder** layer: every token reads every other, on both "
        "sides. A **decoder** layer is the same but for a causal mask: each token reads only "
        "itself and the tokens before it (page 3 shows the mask). On the sidebar sentence, "
    )
    + f"{name}'s heads give {later:.0%} of a token's weight to tokens after it (mean over "
    "layers, heads and tokens); in a decoder that share is 0 by construction."
    + (" The sidebar's causal mask is on, which is why it is 0 here too." if inputs.causal else "")
    + " What each is trained for follows from what it can see:"
)
tables.static_table(
    {
        "kind": ["encoder", "decoder", "encoder–decoder"],
        "each token reads": [
            "both sides",
            "itself and earlier pieces",
            "encoder: both sides; decoder: itself, earlier pieces and the encoder's output",
        ],
        "trained to": [
            "fill in hidden word pieces from both sides (masked-word prediction; BERT also "
            "next-sentence prediction)",
            "predict the next word piece",
            "write the output text piece by piece from the input text (translation)",
        ],
        "example": [
            "BERT (Devlin et al., 2019)",
            "GPT (Radford et al., 2018, 2019)",
            "the Transformer (Vaswani et al., 2017)",
        ],
    },
    decimals={},
)
st.markdown(
    "**Cross-attention** sits only in the decoder of an encoder–decoder: each decoder layer has "
    "a third sublayer, between its causal self-attention and its feed-forward network, whose "
    "queries come from the decoder and whose keys and values come from the encoder's final "
    "output. That is how the text being written reads the text it translates; page 3, section "
    "5, tries the formula across two sentences. "
    + (
        f"{name} is an encoder of BERT's shape. It keeps every second layer of a 12-layer "
        "MiniLM, which was distilled from a larger encoder's self-attention (Wang et al., 2020), "
        "and was then fine-tuned with a contrastive loss for sentence similarity: it was never "
        "trained by masked-word prediction."
        if model.name == core.BUNDLED
        else f"{name} is {'a decoder' if anatomy.is_decoder else 'an encoder'} of "
        f"{anatomy.family_name}'s shape."
    )
)
st.caption(
    f"Sources: Vaswani et al. (2017) and {anatomy_text.model_papers(model, anatomy)} for the "
    f"layer; He et al. (2016), residual connections; {anatomy_text.norm_paper(anatomy)}; "
    + ("Shazeer (2020), the gated feed-forward (SwiGLU); " if anatomy.gated else "")
    + "Xiong et al. (2020), where the norm sits."
)
