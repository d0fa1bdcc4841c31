"""Learning path 5: where attention sits in a layer, and how much of the change it makes."""

import streamlit as st

from core import block
from ui import course_charts, course_state, models, state, widgets

inputs, model = state.page_context()
name = models.label(model)

st.title("5 · Inside a layer")
st.markdown(
    "Attention is one of two sublayers in every layer. Around it run the **residual stream** "
    "(each sublayer adds its result to the token's vector instead of replacing it), "
    "**LayerNorm** (which rescales each token's vector after every addition) and a "
    "**feed-forward network** that transforms each token on its own, without looking at the "
    "others. Only attention moves information between tokens; the feed-forward network does "
    "much of the rest of the work."
)

st.subheader(f"1 · One layer of {name}, drawn from its weights")
st.latex(  # one column, so it fits a phone's width
    r"\begin{aligned} a &= \operatorname{MultiHead}(x) \\ h &= \operatorname{LayerNorm}(x + a)"
    r"\\ f &= W_2\,\operatorname{GELU}(W_1 h) \\ y &= \operatorname{LayerNorm}(h + f)\end{aligned}"
)
stages = block.layer_stages(model)
widgets.show_figure(
    course_charts.block_diagram(stages, f"{name}: one of its {model.n_layers} layers"),
    key="layer_diagram",
    filename="layer-diagram",
)
attention_params = sum(s.parameters for s in stages[1:4])
ffn_params = sum(s.parameters for s in stages[5:7])
st.markdown(
    f"Widths and parameter counts are read from the loaded weights. Per layer the attention "
    f"sublayer holds {attention_params:,} trained numbers, the feed-forward network "
    f"{ffn_params:,}: {ffn_params / attention_params:.1f} times as many. This is the "
    "post-LayerNorm arrangement of the original BERT; many later models normalise before each "
    "sublayer instead."
)

st.subheader("2 · How much of each token's change comes from attention?")
st.markdown(
    "Each sublayer writes one vector per token into the stream: *a* from attention, *f* from "
    "the feed-forward network. Their lengths, measured on the sidebar sentence, compare the "
    "two contributions layer by layer (before the LayerNorm that follows each addition)."
)
st.latex(
    r"\text{attention share}_i = \frac{\lVert a_i \rVert}{\lVert a_i \rVert + \lVert f_i \rVert}"
)
trace = state.trace_or_stop(model, inputs)
sizes = course_state.sublayer_sizes(model, trace)
means = sizes.layer_means()  # (L,) each, averaged over the tokens
mean_a, mean_f, share = means["attention_update"], means["ffn_update"], means["attention_share"]
widgets.show_figure(
    course_charts.sublayer_figure(mean_a, mean_f, share, f"{name}: what each sublayer adds"),
    key="layer_sizes",
    filename="sublayer-sizes",
)
st.markdown(
    f"On this sentence attention writes {min(share):.0%}–{max(share):.0%} of the combined "
    f"update per layer, the feed-forward network the rest. A page that credits every change "
    "of a token's vector to attention overstates it: attention decides *which* tokens' "
    "information arrives, and the feed-forward layers do much of the transforming."
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
    "‖h‖ after LayerNorm": means["mid_stream"].tolist(),
    "‖f‖ feed-forward": mean_f.tolist(),
}
widgets.static_table(
    {"layer": list(range(model.n_layers))} | norms | {"attention share": share.tolist()},
    decimals=dict.fromkeys(norms, 2) | {"attention share": 3},
)
st.caption(
    "Sources: Vaswani et al. (2017) and Devlin et al. (2019) for the layer; Geva et al. (2021), "
    "feed-forward layers as key–value memories; Kobayashi et al. (2021), measuring attention "
    "together with the residual stream and LayerNorm."
)
