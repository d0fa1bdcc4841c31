"""10 · Explanations side by side: attention, rollout, flow, norms and gradients on one sentence,
their rank agreement, the deletion test, and the "is attention explanation?" lesson."""

import streamlit as st

from core import explanations, rollout, saliency
from ui import (
    anatomy_text,
    display,
    explanations_charts,
    explanations_runs,
    information_flow_runs,
    models,
    sidebar,
    state,
    tables,
    takeaway,
    terms,
    traces,
    widgets,
    word_level,
)
from ui.escape import literal
from ui.numbers import signed

inputs, model = state.page_context()
anatomy = anatomy_text.of(model)
special_names = anatomy_text.special_names(anatomy)  # "[CLS] and [SEP]", "" for none
display.head_switch()  # the readout of the scores' image past 12 pieces

widgets.page_title("10 · Explanations side by side")
st.markdown(
    "Six answers to *which word pieces made this?*, on one sentence: three read the attention "
    "weights, one the lengths of what attention carries, two the model's gradients (how much "
    "the output moves when a piece's vector is nudged). "
    "They do not have to agree. The deletion test at the end is one check of which of them "
    "tracks what the model uses on this sentence; it is not the final judge."
)

information_flow_runs.stop_unless_readable(model, inputs)
sidebar.off_distribution_note(inputs, models.label(model))  # the sidebar's switches act here

# 1 · What to explain.
pair = information_flow_runs.readable_pair(model, inputs)  # None when empty or unreadable
left, middle, right = st.columns([1.2, 1.6, 1])
followed = left.radio(
    "Sentence to explain",
    ["first", "second"],
    horizontal=True,
    key="xp_sentence",
    bind="query-params",
    disabled=not pair,
    help="Needs a second sentence in the sidebar.",
)
TARGETS = {
    "similarity": "its similarity to the other sentence",
    "embedding": "its own sentence vector",
}
if model.is_decoder:  # a decoder's output is its next piece, not a sentence vector
    target = "next piece"
else:
    if not pair:  # with no other sentence the gradients explain this one's own vector: say so
        st.session_state["xp_target"] = "embedding"
    target = middle.radio(
        "Gradients explain",
        list(TARGETS),
        format_func=TARGETS.__getitem__,
        key="xp_target",
        bind="query-params",
        disabled=not pair,
        help="Needs a second sentence in the sidebar for the similarity.",
    )
steps = right.select_slider(
    "Integrated-gradient steps", [8, 16, 32, 64], 32, key="xp_steps", bind="query-params"
)
if not pair:  # why the two choices are greyed out, in words and not only on hover
    st.caption(
        "Type a second sentence in the sidebar to explain either sentence"
        + ("." if model.is_decoder else ", or its similarity to the other one.")
    )
merge_words = inputs.word_level  # the sidebar's shared switch
second = followed == "second" and bool(pair)
text = pair if second else inputs.text
other = (inputs.text if second else pair) if target == "similarity" else None
trace = traces.trace_or_stop(
    model, sidebar.Inputs(text, None, model.name, inputs.scale, inputs.causal)
)
next_piece = None  # a decoder: the vocabulary row of the next piece explained
if model.is_decoder:
    with middle:
        next_piece = explanations_runs.next_piece_picker(model, text, inputs, key="xp_next")
wanted_steps = int(steps or 32)
steps = explanations_runs.ig_steps_for(trace.n_tokens, wanted_steps)
flow = information_flow_runs.information_flow(model, text, inputs)
gradients = explanations_runs.gradient_scores(model, text, other, inputs, steps, next_piece)
scores = explanations.side_by_side(flow, gradients)
labels = [explanations.METHOD_LABELS[name] for name in scores]
view = word_level.WordView.of(trace, merge_words)
unit = "word" if merge_words else "word piece"

if flow.flow is None:
    st.caption(
        f"{trace.n_tokens} word pieces: attention flow is left out of every table and chart "
        f"below, so {len(scores)} methods remain. It needs one maximum flow per pair of pieces and is "
        f"computed up to {rollout.MAX_FLOW_PIECES} pieces (Where the meaning comes from, §3)."
    )
if steps < wanted_steps:
    st.caption(
        f"{trace.n_tokens} word pieces: integrated gradients runs {steps} of the {wanted_steps} "
        "steps asked. Each step is a forward and a backward pass of the whole sentence, and one "
        f"request may ask for at most {explanations_runs.GRADIENT_WORK:,} word pieces × steps."
    )

# 2 · The table and the picture: the figure first, then what it measures.
st.subheader("1 · Every method, every " + unit)
merged = {label: view.scores(scores[name]) for label, name in zip(labels, scores, strict=True)}
# The page's point: the methods' answers side by side, and whether their top pieces agree
tops = explanations.top_pieces(scores, saliency.removable(trace.tokens, trace.special))
named = sorted({trace.tokens[index] for index in tops.values() if index is not None})
# a method whose every piece scores at or below 0 names none (its best still counts against)
naming = sum(index is not None for index in tops.values())
against = [explanations.METHOD_LABELS[name] for name, index in tops.items() if index is None]
none_above = f" ({' and '.join(against)}: no piece above 0, so none named)" if against else ""
# what "the output" is here, in the words the page's controls use
explained = (
    "the next piece" if next_piece is not None else "the two sentences' similarity"
    if other else "the sentence's own vector"
)  # fmt: skip
# the tokenizer's own pieces are left out of the answer, though the figure draws them
specials, _ = anatomy_text.specials_in_run(trace.tokens, trace.special)
left_out = f", {specials} left out" if specials else ""
takeaway.show(
    f"Which word piece counts most for {explained} (highest score{left_out})? {naming} of the "
    f"{len(tops)} methods"
    f"{none_above} name "
    + (
        "none."
        if not named
        else f"the same one, “{literal(named[0])}”."
        if len(named) == 1
        else f"{len(named)} different ones ({', '.join(f'“{literal(piece)}”' for piece in named)}): "
        "they answer different questions, and the deletion test below checks one of them."
    ),
    help=terms.ahead("gradient", "integrated gradients", here="views/explanations.py"),
)
methods_title = f"Scores per {unit}, each row ÷ its max |score|"
method_labels, by_method = list(merged), explanations_charts.stacked_scores(merged)  # (methods, n)
display.show_matrix(  # a row per method, scaled to its largest |score|
    by_method.shape,
    html=lambda: explanations_charts.methods_grid(
        by_method, method_labels, view.labels, methods_title, unit, "xp_methods"
    ),
    plotly=lambda: explanations_charts.methods_heatmap(
        by_method, method_labels, view.labels, methods_title
    ),
    key="xp_methods",
    filename="explanations",
)
# the rest of the rule behind "counts most", under the figure it would otherwise contradict
st.caption(
    f"“Counts most”: a method's highest score{left_out}; the sign counts, so a negative score, "
    "however large, counts against, and a method whose every piece scores 0 or below names none."
)
if next_piece is not None:
    shown_piece = literal(models.piece_text(model, next_piece))
    st.markdown(
        f"{models.label(model)} is a decoder: what it outputs is the next word piece, so the "
        f"gradients explain **f = log p(“{shown_piece}” | this sentence)**, the "
        "log-probability it gives that piece after the last one, read from the last position's "
        "vector, and the deletion test below measures the same f. The attention-based scores "
        "explain that last position's vector: each input piece's share of it."
    )
elif other:
    st.markdown(
        "The gradients explain **f = cos(this sentence, the other one)** with the other "
        "sentence's vector held fixed, and the deletion test below measures the same f. The "
        "attention-based scores cannot know about the other sentence: they explain this "
        "sentence's own vector, whatever the question."
    )
else:
    st.markdown(
        "The gradients explain **f = h̄ · ê**: how far the mean-pooled top layer h̄ reaches along "
        "the sentence's own final direction ê, held fixed (the sentence vector's length before "
        "it is scaled to 1; a cosine with itself would always be 1, with a zero gradient). The "
        "deletion test below measures the same f."
    )
st.latex(r"\text{grad}\times\text{input}_j = \frac{\partial f}{\partial x_j}\cdot x_j")
st.latex(
    r"\text{IG}_j = x_j \cdot \frac{1}{m}\sum_{k=1}^{m} "
    r"\frac{\partial f}{\partial x_j}\Big(\tfrac{k - 1/2}{m}\, x\Big)"
)
# completeness, the check Sundararajan et al. advise: does the IG sum reach what it shares out?
ig_check = (
    f"here the sum is off by {signed(gradients.ig_gap, 4)} of f(input) − f(zero) = "
    f"{gradients.ig_difference:+.4f} ({gradients.ig_miss:.0%}) with {gradients.ig_steps} steps"
)
ig_rule = f"within {saliency.IG_TOLERANCE:.0%}"
st.markdown(
    "*xⱼ* is the word piece's row of the embedding table"
    + anatomy_text.left_as_they_are(anatomy)
    + ". Integrated gradients (Sundararajan et al., 2017) walks from an all-zero input to the "
    "real one and averages the gradient on the way; its scores add up to f(input) − f(zero) "
    "once the steps suffice. Sundararajan et al. (2017) found 20 to 300 steps enough to come "
    f"{ig_rule} and advise checking the sum: "
    + (f"{ig_check}." if gradients.ig_converged else f"{ig_check}, further off than that.")
)
if not gradients.ig_converged:
    # a pre-norm model without position rows starts the path at an all-zero stream, where its
    # first norm divides by a length near zero (ε under the square root): more steps need not help
    singular = anatomy.pre_norm and not anatomy.position_table
    st.warning(
        "Integrated gradients did not converge on this sentence: its scores do not add up to "
        "what they share out, so they are left out of every table, chart and verdict below. "
        + (
            f"{models.label(model)} adds no position rows, so the path starts at an all-zero "
            f"input, which the first {anatomy.norm_name} divides by a length near zero: more "
            "steps need not fix that."
            if singular
            else "More steps (the slider above) may fix it."
        ),
        icon="⚠️",
    )
table = {
    unit: view.labels,
    **{label: [round(float(v), 5) for v in merged[label]] for label in labels},
}
widgets.folded(
    "The scores as a table",
    "xp_table",
    lambda: st.dataframe(table, hide_index=True, height=320),
)
tables.download_matrix(
    [list(row) for row in zip(*merged.values(), strict=True)],
    widgets.numbered(view.labels),
    labels,
    "explanations",
    label=f"Download the per-{unit.replace(' ', '-')} table as CSV",
    key="xp_csv",
)
st.caption(
    "Attention-based scores are shares (≥ 0, summing to 1); gradient scores are signed: blue "
    "pushes f up, red pulls it down (blue is positive on every figure of the app). Gradient × "
    "input is local: it describes a small nudge of this input, not what removing a word would "
    "do. Integrated gradients goes the whole way instead, adding up gradients from all-zero word "
    "vectors to the real ones, so its scores share out f(input) − f(all zero) when they "
    f"converge (off by {signed(gradients.ig_gap, 4)} here). A zero row is still not a removed piece: the piece keeps "
    "its place"
    + (" and its position row" if anatomy.position_table else "")
    + ", so neither method predicts the deletion test below."
)

# 3 · Agreement.
allowed = saliency.removable(trace.tokens, trace.special)
rho = explanations.rank_agreement(scores, allowed)
st.subheader("2 · Do the methods agree? Spearman's ρ")
st.markdown(
    "Rank the word pieces by each method (special pieces"
    + (f", {special_names}," if special_names else "")
    + " left out) and "
    "correlate the ranks: "
    "1 = same order, 0 = unrelated, −1 = reversed. Computed on word pieces."
)
display.show_html_figure(  # a few methods: HTML, every ρ written in
    explanations_charts.agreement_grid(rho, labels, "Rank agreement between methods", name="xp_rho")
)

# 4 · Deletion.
st.subheader("3 · The deletion test")
if next_piece is not None:
    quantity, y_title = "the log-probability", f"log p(“{shown_piece}”)"
    measured = f"log p(“{shown_piece}” | the shortened sentence) at its last piece"
elif other:
    quantity, y_title = "the cosine", "cosine to the other sentence"
    measured = "the cosine of the shortened sentence's vector to the other sentence"
else:
    quantity, y_title = "the projection", "h̄ · ê of the full sentence"  # phone-wide
    measured = "h̄ · ê, the shortened sentence's mean-pooled vector along the full sentence's ê"
rankings = explanations.deletion_rankings(
    scores,
    trace.tokens,
    explanations_runs.random_orders_for(trace.n_tokens, len(scores)),
    special=trace.special,
)
n_orders = sum(explanations.is_random(name) for name in rankings)
st.markdown(
    f"Remove each method's top *k* word pieces from the input, run the model again and measure "
    f"{measured}: the same f the gradients explain. A method that found what the model uses "
    "should make its curve fall faster than removing pieces at random. Chance is not one line: "
    f"{n_orders} seeded random orders make the grey band (lowest to highest), their mean dotted."
)
st.caption(
    "One faithfulness check among several (DeYoung et al., 2020, ERASER), not the judge: a "
    "shortened sentence is an input the model never saw in training, so part of a fall may come "
    "from the input being odd rather than from losing what mattered. For that reason Hooker et "
    "al. (2019), evaluating image classifiers, retrain the model on such inputs before they "
    "measure (ROAR)."
)
k_max = explanations_runs.deletion_steps(allowed)
curves = None
if trace.n_tokens > explanations_runs.MAX_GRADIENT_PIECES:
    st.info(
        f"Left out at {trace.n_tokens} word pieces (up to {explanations_runs.MAX_GRADIENT_PIECES}): "
        f"{k_max + 1} re-runs of every method would take the server tens of seconds.",
        icon="🛑",
    )
elif k_max == 0:
    st.info("There is no word piece to remove: type a sentence with words.", icon="✍️")
else:
    every_curve = explanations_runs.deletion_curves(
        model, text, other, inputs, rankings, k_max, next_piece
    )
    curves, chance = explanations.split_chance(every_curve)
    named = {explanations.METHOD_LABELS.get(name, name): values for name, values in curves.items()}
    fig = explanations_charts.deletion_figure(
        named,
        (chance.low, chance.mean, chance.high),
        n_orders,
        f"Deletion test: {y_title}",
        f"f = {quantity[4:]}",
    )
    display.show_figure(fig, key="xp_deletion", filename="deletion-test")

# 5 · The lesson, with this sentence's numbers.
st.subheader("4 · Is attention explanation?")
names = list(scores)
lesson = [
    "Jain & Wallace (2019) found, on recurrent (BiLSTM) text classifiers with an attention "
    "layer rather than on transformers, that attention weights often disagree with "
    "gradient-based and leave-one-out importance and that very different weights can give the "
    "same prediction: "
    "*attention is not explanation*. Wiegreffe & Pinter (2019) answered that this depends on "
    "what one asks of an explanation, and that attention is *a* signal, to be tested rather "
    "than trusted. On this sentence:",
]
if "integrated_gradients" in names:
    attention_vs_ig = rho[names.index("attention"), names.index("integrated_gradients")]
    rollout_vs_ig = rho[names.index("rollout"), names.index("integrated_gradients")]
    lesson.append(
        f"- last-layer attention and integrated gradients rank the pieces with ρ = "
        f"{signed(attention_vs_ig, 2, plus='')}; rollout and integrated gradients with ρ = "
        f"{signed(rollout_vs_ig, 2, plus='')};"
    )
else:
    lesson.append("- integrated gradients did not converge here (§1), so no ρ with it is given;")
if curves is not None:
    changes = {name: explanations.mean_change(values) for name, values in curves.items()}
    chance_changes = chance.changes
    verdict = explanations.fastest_falls(changes, chance_changes)
    fastest = verdict.fastest
    named = [f"**{explanations.METHOD_LABELS.get(n, n)}**" for n in fastest]
    fastest_names = named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]
    several = len(fastest) > 1
    others = ", ".join(
        f"{explanations.METHOD_LABELS.get(name, name)} {signed(change)}"
        for name, change in changes.items()
        if name not in fastest
    )
    chance_mean, chance_sd, chance_low, chance_high = verdict.chance
    chance_numbers = (
        f"{signed(chance_mean)} on average, sd {chance_sd:.3f}, "
        f"from {signed(chance_low)} to {signed(chance_high)}"
    )
    band = f"the {n_orders} random orders: {chance_numbers}"
    over_k = "k = 1" if k_max == 1 else f"k = 1…{k_max}"
    moved = f"{signed(verdict.lowest)} on average over {over_k}"
    tied = f"; their {len(fastest)} curves lie on top of each other" if several else ""
    longer = ", a longer sentence" if trace.n_tokens <= rollout.MAX_FLOW_PIECES else ""
    if k_max == 1:
        lesson.append(
            f"- with one piece to remove, every order removes that piece "
            f"({signed(verdict.lowest)}), so the deletion test cannot tell the methods apart: "
            "type a longer sentence."
        )
    elif verdict.beats_chance:
        lesson += [
            f"- removing the pieces that {fastest_names} {'rank' if several else 'ranks'} "
            f"first moves {quantity} furthest down: {moved}{tied}, faster than every one of "
            f"{band} (the others: {others or 'none'});",
            (
                "- so on this sentence, by this one check, these methods tie: their curves "
                "coincide (a short sentence often leaves them the same pieces to remove)."
                if several
                else "- so on this sentence, by this one check, this method tracks what the "
                "model uses better than chance; the method whose picture looks clearest need "
                "not be the one that passes it."
            )
            + f" Try a paraphrase pair{longer}, or √d_k scaling off in the sidebar, and see "
            "whether the order holds.",
        ]
    elif verdict.lowest >= -explanations.TIE:
        lesson += [
            f"- no method lowers {quantity}: the lowest curve{'s' if several else ''}, "
            f"{fastest_names}, {'move' if several else 'moves'} it {moved}{tied} (the others: "
            f"{others or 'none'}; {band});",
            "- so here the deletion test cannot rank the methods: removing the pieces they "
            f"point at does not take away what {quantity} rests on. Try a paraphrase pair"
            + (", or the sentence's own vector as what the gradients explain." if other else "."),
        ]
    else:
        lesson += [
            f"- the fastest fall, {fastest_names}, {'move' if several else 'moves'} "
            f"{quantity} {moved}{tied}; {verdict.orders_beaten} of the {n_orders} random orders "
            f"move it less far down and {n_orders - verdict.orders_beaten} as far or further "
            f"({chance_numbers}; the other methods: {others or 'none'});",
            "- so here the deletion test cannot tell the methods from chance: "
            f"{n_orders - verdict.orders_beaten} of the {n_orders} random orders lower {quantity} "
            f"as far or further. Try a paraphrase pair{longer}, or √d_k scaling off in the "
            "sidebar.",
        ]
else:
    lesson.append(
        "- the deletion test, one check of which method tracks what the model uses, is left "
        "out here (see above): agreement alone cannot tell which is faithful."
    )
st.markdown("\n".join(lesson))
st.caption(
    "Abnar & Zuidema (2020) introduced rollout and flow; Kobayashi et al. (2020, 2021) the "
    "norm-based view of one layer; chaining such contributions through every layer, as norm "
    "rollout does, follows GlobEnc (Modarressi et al., 2022) and ALTI (Ferrando et al., 2022); "
    "Sundararajan et al. (2017) integrated gradients; DeYoung et al. (2020) ERASER; Hooker et "
    f"al. (2019) ROAR. Explained here: “{literal(text, max_chars=200)}”"
)
