"""8 · Embedding projections: one word, one static point, many contextual points."""

import streamlit as st

from core import embeddings
from ui import (
    anatomy_text,
    charts,
    display,
    embeddings_charts,
    embeddings_runs,
    models,
    sidebar,
    state,
    tables,
    takeaway,
    terms,
    widgets,
    wording,
)
from ui.escape import literal

inputs, model = state.page_context()
model_label = models.label(model)  # the model's name in the prose
MAX_TEXT_CHARS = 20_000
MAX_FOLLOW = 12  # occurrences of the chosen word that get a label, a path and a table column
# The page's own example sentences, each with the sense of its ambiguous word that it was
# written for: the figures label and colour that word's points by it.
EXAMPLES = (
    ("I sat on the bank of the river and watched the water.", "river"),
    ("The bank raised its interest rates again.", "money"),
    ("We pulled the canoe up onto the muddy bank.", "river"),
    ("She paid the cheque in at the bank on Monday.", "money"),
    ("She bears the pain without a word.", "endures"),
    ("Two bears crossed the road near the forest.", "animal"),
    ("The monitor on my desk keeps flickering.", "screen"),
    ("Nurses monitor the patient through the night.", "watch over"),
    ("Fruit flies like a banana.", "insects"),
    ("The pilot flies to Paris every week.", "travels"),
)
# the same for the sidebar's example sentences, which the page adds at the end
SENSES = {**dict(EXAMPLES), "Time flies like an arrow.": "time passes"}
DEFAULT_SENTENCES = "\n".join(sentence for sentence, _ in EXAMPLES)

widgets.page_title("8 · Embedding projections")
st.markdown(
    "A word piece starts as one row of the vocabulary table: *bank* is the same row by the "
    "river and at the counter. Layer by layer, attention mixes in what the other tokens carry "
    "and a feed-forward network reworks each token, so each *bank* ends up somewhere different. "
    f"Below: the tokens of {len(EXAMPLES)} example sentences, each written for one sense of its "
    f"word, and of your sidebar sentence, squeezed from {model.d_model} dimensions into a "
    "picture (the folded box below lists the examples, and the switch under it leaves your "
    "sentence out)."
)
# The page's point comes first, above the controls it depends on: filled in once the word piece
# and the hidden state are chosen (payoff()).
payoff_box = st.container()
# The sentences fold away above the figures (an expander, always sent: a text box that is not
# drawn would lose its value); the figures come first.
sentences_box = st.expander("The sentences, and the sense each was written for: read or edit")
with sentences_box:
    text = st.text_area(
        "Sentences, one per line",
        value=DEFAULT_SENTENCES,
        key="emb_sentences",
        bind="query-params",
        height=190,
        max_chars=MAX_TEXT_CHARS,
    )
# In sight, not in the folded box: a learner who typed a sentence looks for it here
with_sidebar = st.toggle(
    "Add your sentence (the sidebar's) to these", True, key="emb_sidebar", bind="query-params"
)
# The box's lines first, so line k of the box is sentence sk; the sidebar sentence comes last.
lines = (text or "")[:MAX_TEXT_CHARS] + (("\n" + inputs.text) if with_sidebar else "")
sentences, notes = embeddings.split_sentences(lines)
if not sentences:
    st.info("Type one or more sentences in the box above, one per line.", icon="✍️")
    state.end_page()
points, skipped = embeddings_runs.point_set(
    model, tuple(sentences), scale=inputs.scale, causal=inputs.causal
)
sidebar.off_distribution_note(inputs, models.label(model))  # the sidebar's switches act here
for note in [*notes, *skipped]:
    st.caption(note)
if points.n_points == 0:
    st.info("None of the lines holds a readable word piece. Try ordinary words.", icon="✍️")
    state.end_page()

senses = [SENSES.get(sentence) for sentence in points.sentences]  # None: not one of the page's
with sentences_box:  # a static table: no scrolling grid's script to load for a folded detail
    tables.static_table(
        {
            "#": [f"s{s + 1}" for s in range(len(points.sentences))],
            "sentence": list(points.sentences),
            "sense": [sense or "—" for sense in senses],
            "word pieces": embeddings.sentence_sizes(points),
        },
        decimals={},
    )
counts = embeddings.word_counts(points)
words = sorted(counts, key=lambda w: (-counts[w][0], -counts[w][1], w))
c1, c2, c3, c4 = st.columns([2, 2, 1, 1])
word = c1.selectbox(
    "Word piece to follow",
    words,
    # "bank" (page 1's word), else a readable piece: never a special, which a decoder always
    # sees at position 0 alone, so its occurrences would all be one vector
    index=words.index(
        embeddings.default_word(words, counts, anatomy_text.of(model).special_pieces)
    ),
    help="Word pieces found in the most sentences come first.",
    key="emb_word",
    bind="query-params",
)
layer = c2.select_slider(  # a hidden state: 0 … L, named as every page names it
    "Token vectors",
    list(range(model.n_layers + 1)),
    value=model.n_layers,
    format_func=charts.state_name,  # "embedding output", "after layer 0", …
    key="emb_layer",
    bind="query-params",
    help="Each choice is a **hidden state**: the tokens' vectors between two layers. Layers are "
    f"numbered from 0, as on every page: “after layer {model.n_layers - 1}” is the last of "
    f"{model.n_layers}.",
)
state_name = charts.state_name(layer)
shown_word = literal(word)  # a word piece of the visitor's text: shown, never read as markup
method = c3.radio(
    "Projection",
    ["PCA", "t-SNE"],
    key="emb_method",
    bind="query-params",
    help=terms.ahead("PCA", "t-SNE", here="views/embeddings.py"),
)
n_dims = c4.radio("View", ["2D", "3D"], key="emb_view", bind="query-params")
n_components = 3 if n_dims == "3D" else 2
followed = embeddings.pick_occurrences(points, word, MAX_FOLLOW)  # indices into all points
shown = embeddings.cap_points(points, followed)
chosen = embeddings.pick_occurrences(shown, word, MAX_FOLLOW)  # the same tokens, inside `shown`
if counts[word][1] > MAX_FOLLOW:
    st.caption(
        f"'{shown_word}' occurs {counts[word][1]} times; {MAX_FOLLOW} of them, spread over the "
        "sentences, are followed below."
    )
if shown.n_points < points.n_total:
    st.caption(
        f"{points.n_total:,} tokens in all; the plots show {shown.n_points} of them: every "
        f"'{shown_word}' plus an even random sample of the rest."
    )
method_key = "tsne" if method == "t-SNE" else "pca"
st.caption(
    "Every tab follows the word piece chosen here and shows the chosen hidden state (tab 2 as "
    "its grey tokens, beside every state); Projection applies to tab 1, View to tabs 1 and 2."
)


def before_and_after() -> None:
    """Section 1: every token before the first layer and after the chosen state, projected."""
    st.subheader("1 · Before and after")
    if method_key == "tsne":
        st.caption(
            f"t-SNE keeps near neighbours near but distorts distances; perplexity "
            f"{embeddings.tsne_perplexity(shown.n_points):.0f} (clamped below the number of points)."
            " Its axes mean nothing and their units are arbitrary: read who sits near whom."
        )
    left, right = st.columns(2)  # the figures first, what they show under them
    with left:
        coords = embeddings_runs.projection(
            shown.static, method_key, n_components, ids=shown.token_ids
        )
        fig = embeddings_charts.projection_figure(
            coords,
            shown.tokens,
            shown.sentence,
            shown.sentences,
            chosen,
            "Static (context-free)",
            method,
            senses,
            one_point=True,
        )
        display.show_figure(fig, key="emb_static", filename="static-projection")
    with right:
        coords = embeddings_runs.projection(shown.hidden[layer], method_key, n_components)
        fig = embeddings_charts.projection_figure(
            coords,
            shown.tokens,
            shown.sentence,
            shown.sentences,
            chosen,
            f"Contextual, {state_name}",
            method,
            senses,
        )
        display.show_figure(fig, key="emb_context", filename=f"contextual-projection-state{layer}")
    st.markdown(
        f"Left: the static vectors (rows of the word-piece table): every *{shown_word}* is the same "
        f"point. Right: the same tokens, {state_name}, one star per occurrence, coloured and "
        "labelled by the sense its sentence was written for (a sentence of your own by its "
        "number). Grey: every other token."
    )
    if method_key == "pca":
        static_kept = embeddings.explained_variance(shown.static, n_components, shown.token_ids)
        context_kept = embeddings.explained_variance(shown.hidden[layer], n_components)
        st.caption(
            "Each PCA axis is a direction of largest spread among these very points, so its "
            "units are arbitrary (and its sign too): compare distances, not coordinates. The "
            f"{n_components} axes keep {' + '.join(f'{v:.0%}' for v in static_kept)} of the "
            f"static vectors' variance and {' + '.join(f'{v:.0%}' for v in context_kept)} of "
            "the contextual ones'; the rest is spread across dimensions the picture cannot show."
        )


def payoff() -> None:
    """The split at a glance: cosines between occurrences of one sense and of two, by stage,
    with the page's takeaway read from them."""
    occurrence_senses = [senses[shown.sentence[i]] for i in chosen]
    cosine_tables = embeddings.cosine_by_layer(shown, chosen)  # static, then states 0..L
    split = embeddings.sense_split(cosine_tables, occurrence_senses)
    stages = ["static"] + [charts.state_name(index) for index in range(model.n_layers + 1)]
    state_here = f"{state_name[0].upper()}{state_name[1:]}"
    if not split.measured:
        mean_here = float(embeddings.mean_off_diagonal(cosine_tables)[layer + 1])
        takeaway.show(
            f"Every '{shown_word}' starts as one row of the table (cosine 1). {state_here}, its "
            f"{len(chosen)} occurrences have a mean cosine of {mean_here:.3f}"
            + (": each has taken on its own sentence." if round(mean_here, 3) < 1.0 else ".")
            if len(chosen) >= 2
            else f"'{shown_word}' occurs once here: add a sentence that uses it again, and see "
            "what context makes of each occurrence."
        )
        st.caption(
            f"The split by sense needs two occurrences of '{shown_word}' with one sense and one "
            "with another, in the page's example sentences."
        )
        return
    same, other = float(split.same[layer + 1]), float(split.other[layer + 1])
    # Two means can differ while the pairs behind them overlap: the verdict is tab 2's, read from
    # each occurrence's nearest other occurrence at this state, never from the gap in the means.
    match = embeddings.sense_match(shown, chosen, occurrence_senses)
    nearest = (
        f", and for {int(match.matched[layer])} of {match.counted} the nearest other "
        f"'{shown_word}' has its own sense (a random pick: {match.chance:.0%}): "
        f"{sorting_verdict(match, layer)}.{tie_sentence(match, layer)}"
        if match.measured
        else "."
    )
    takeaway.show(
        f"Every '{shown_word}' starts as one row of the table (cosine 1). {state_here}, two with "
        f"the same sense have a mean cosine of {same:.3f}, two with different senses "
        f"{other:.3f}{nearest}"
    )
    # The takeaway's two numbers, each in a figure beside it: the means (left) and the count of
    # nearest occurrences that share their sense (right, when the example sentences allow it).
    means_column, nearest_column = st.columns([3, 2]) if match.measured else (st.container(), None)
    with means_column:
        display.show_weight_bars(
            stages,
            {"same sense": split.same, "other sense": split.other},
            f"'{shown_word}': how alike two occurrences are",
            key="emb_senses",
            y_title="mean cosine between two occurrences",
            filename="sense-split",
            decimals=3,
        )
    if nearest_column is not None:
        with nearest_column:
            fig = embeddings_charts.sense_match_figure(
                match.matched,
                match.counted,
                match.chance,
                f"Nearest other '{shown_word}': same sense?",
            )
            display.show_figure(fig, key="emb_sense_match", filename="sense-match")


def path_through_layers() -> None:
    """Section 2: the followed word piece's occurrences, state by state."""
    st.subheader(f"2 · The path of '{shown_word}' through the layers")
    paths = embeddings_runs.trajectory_projection(shown.hidden, chosen, n_components)
    fig = embeddings_charts.trajectory_figure(
        paths,
        chosen,
        shown.tokens,
        shown.sentence,
        shown.sentences,
        layer,
        f"'{shown_word}', emb → after layer {model.n_layers - 1}",  # short: a phone's width
        senses,
    )
    display.show_figure(fig, key="emb_paths", filename="trajectories")
    st.markdown(
        "Each path is one occurrence, its markers numbered by state (emb, then each layer) and "
        "growing towards the last. What is drawn is the vector's direction, the thing a cosine "
        "compares, with each state's mean direction over all tokens taken away: that drift is "
        "shared by every token and would hide the rest. One PCA plane (its units arbitrary, as "
        "in tab 1), fitted on these occurrences at every state, holds every path. Grey: every "
        f"token, {state_name}."
    )
    sense_match_line()


def sense_match_line() -> None:
    """Whether each occurrence's nearest other occurrence shares its sense, state by state (the
    figure beside the takeaway draws it)."""
    occurrence_senses = [senses[shown.sentence[i]] for i in chosen]
    match = embeddings.sense_match(shown, chosen, occurrence_senses)
    if not match.measured:
        st.caption(
            f"Whether context sorts '{shown_word}' by sense shows with two occurrences of one sense "
            "and one of another, in the page's example sentences."
        )
        return
    first, last = int(match.matched[0]), int(match.matched[-1])
    last_state = model.n_layers  # hidden state L: after the last layer
    st.markdown(
        f"At the embedding output, {first} of {match.counted} occurrences of '{shown_word}' have "
        f"an occurrence with their own sense as their nearest; after layer {model.n_layers - 1}, "
        f"{last} of {match.counted} (a random pick: {match.chance:.0%}): "
        f"{sorting_verdict(match, last_state)}.{tie_sentence(match, 0)}"
        f"{tie_sentence(match, last_state)} The figure “Nearest other "
        f"'{shown_word}': same sense?” at the top of the page draws every state."
    )


def sorting_verdict(match: embeddings.SenseMatch, state: int) -> str:
    """Whether context sorts the followed word by sense by hidden state `state`: the one rule
    (ui.wording.sense_sorting) the takeaway and tab 2 both read, from the same counts."""
    return wording.sense_sorting(
        int(match.matched[0]), int(match.matched[state]), match.counted, match.chance
    )


def tie_sentence(match: embeddings.SenseMatch, state: int) -> str:
    """' At …, k of the n are tied: …' when k occurrences have a rival of their own sense and one
    of another equally near at hidden state `state` (as when every occurrence is one vector,
    so nothing tells the senses apart there), else ''."""
    tied = int(match.tied[state])
    if not tied:
        return ""
    where = "At the embedding output" if state == 0 else f"After layer {state - 1}"
    who = (
        f"all {tied} are"
        if tied == match.counted
        else f"{tied} of the {match.counted} {'is' if tied == 1 else 'are'}"
    )
    return (
        f" {where}, {who} tied: an occurrence of the same sense and one of another sense are "
        "equally near, and a tie counts as no match."
    )


def nearest_in_context() -> None:
    """Section 3: the tokens of the other sentences nearest to each occurrence, at one state."""
    st.subheader(f"3 · Which tokens of the other sentences is '{shown_word}' closest to?")
    st.latex(
        r"\begin{gathered}\text{neighbours}(h_i) = \operatorname{top}_5\, \cos(h_i, h_j)"
        r"\\ j \in \text{other sentences, same state}\end{gathered}"
    )
    ids, cosines = embeddings.contextual_neighbours(shown, chosen, layer)
    matched, counted = embeddings.first_neighbour_shares_sense(shown, chosen, ids, senses)
    if counted:
        st.markdown(
            f"{state_name[0].upper()}{state_name[1:]}, {matched} of {counted} occurrences of "
            f"'{shown_word}' with a known sense have, as their nearest token in another sentence, "
            f"a '{shown_word}' with the same sense."
        )
    labels = embeddings_charts.occurrence_labels(chosen, shown.tokens, shown.sentence, senses)
    # A static table, not st.dataframe: its cells wrap on a phone instead of being cut at the
    # right edge, and it has no toolbar to float over the formula above.
    st.table(
        embeddings_charts.neighbour_table(
            ids, cosines, word, shown.tokens, shown.sentence, senses, labels
        ),
        hide_index=True,
    )
    st.caption(
        f"Every token is compared as it is {state_name} (the slider above), so the neighbours "
        "carry their own context too: a river *bank* may sit nearest to another river *bank*, "
        "or to *river* itself. Tokens of its own sentence are left out: they share its context "
        "trivially."
    )


def occurrences_alike() -> None:
    """Section 4: cosines between the occurrences, at one state and over all of them."""
    st.subheader(f"4 · How alike are the occurrences of '{shown_word}'?")
    cosine_tables = embeddings.cosine_by_layer(shown, chosen)
    labels = embeddings_charts.occurrence_labels(chosen, shown.tokens, shown.sentence, senses)
    left, right = st.columns(2)
    with left:
        # cosine_tables[0] is the static table, cosine_tables[s + 1] hidden state s
        fig = embeddings_charts.cosine_heatmap(
            cosine_tables[layer + 1], labels, f"Cosine, {state_name}"
        )
        display.show_matrix(
            cosine_tables[layer + 1].shape,
            None,
            lambda: fig,
            key="emb_cosine",
            filename=f"cosine-state{layer}",
        )
        tables.download_matrix(
            cosine_tables[layer + 1], labels, labels, f"cosine-{word}-state{layer}", key="emb_csv"
        )
    with right:
        # raw word: layer_lines escapes its legend names itself
        means = {f"mean over pairs of '{word}'": embeddings.mean_off_diagonal(cosine_tables)}
        fig = embeddings_charts.layer_lines(
            means,
            ["static", *charts.state_axis(model.n_layers + 1)["ticktext"]],
            "Before → after",
            "cosine",
        )
        display.show_figure(fig, key="emb_cos_lines", filename="cosine-by-layer")
    mean_by_stage = embeddings.mean_off_diagonal(cosine_tables)  # static, emb, each layer
    if len(chosen) >= 2:
        at_emb, at_end = float(mean_by_stage[1]), float(mean_by_stage[-1])
        position_rows = anatomy_text.of(model).position_table
        st.markdown(
            "In the static table every pair has cosine 1: one row. At the embedding output (emb) "
            f"the mean over pairs is {at_emb:.3f}"
            + (
                ": each occurrence has its own position row. "
                if position_rows
                else f": {model_label} adds no position row, so every occurrence is still the same "
                "row. "
            )
            + f"After layer {model.n_layers - 1} it is {at_end:.3f}"
            + f": through the layers the occurrences {wording.moved_apart(at_emb, at_end)} on "
            "average (follow the line: not always steadily). " + by_sense(cosine_tables)
        )
    if len(chosen) < 2:
        st.caption(
            f"'{shown_word}' occurs once: add a sentence that uses it again to compare occurrences."
        )


def stage_runs(states: list[int]) -> str:
    """Hidden states as prose, consecutive layers joined: [0, 1, 2, 3] -> 'at the embedding
    output and after layers 0–2'."""
    parts = ["at the embedding output"] if 0 in states else []
    layers = [s - 1 for s in states if s > 0]  # state s is the output of layer s - 1
    runs: list[list[int]] = []
    for layer_number in layers:
        if runs and layer_number == runs[-1][-1] + 1:
            runs[-1].append(layer_number)
        else:
            runs.append([layer_number])
    parts += [
        f"after layer {run[0]}" if len(run) == 1 else f"after layers {run[0]}–{run[-1]}"
        for run in runs
    ]
    return " and ".join(parts)


def by_sense(cosine_tables: object) -> str:
    """Whether same-sense occurrences are closer than cross-sense ones, state by state, as
    measured here (the static table is left out: there every pair is one row, cosine 1)."""
    occurrence_senses = [senses[shown.sentence[i]] for i in chosen]
    split = embeddings.sense_split(cosine_tables, occurrence_senses)
    if not split.measured:
        return ""
    closer = [s for s in range(model.n_layers + 1) if split.same_closer[s + 1]]
    reversed_ = [s for s in range(model.n_layers + 1) if not split.same_closer[s + 1]]
    if not reversed_:
        return (
            "At every hidden state, two occurrences with the same sense are more alike (higher "
            "mean cosine) than two across senses."
        )
    numbers = "; ".join(
        f"{charts.state_name(s)}: {split.same[s + 1]:.3f} against {split.other[s + 1]:.3f}"
        for s in reversed_
    )
    if not closer:
        return (
            "At no hidden state are two occurrences with the same sense more alike than two "
            f"across senses (same sense against other sense, {numbers})."
        )
    return (
        "Two occurrences with the same sense are more alike (higher mean cosine) than two across "
        f"senses {stage_runs(closer)}, but not {stage_runs(reversed_)} (same sense against "
        f"other sense, {numbers})"
        + (": the sense shows once the layers have mixed in context." if reversed_ == [0] else ".")
    )


def scaling_switch() -> None:
    """Section 5: the same tokens with the √d_k switch the other way."""
    st.subheader("5 · What does the √d_k switch do to the points?")
    st.markdown(
        "The sidebar switches act inside every layer here too. Flip the toggle to run the same "
        "sentences with √d_k scaling the other way and see where each token lands. One of the "
        f"two runs then has √d_k off: {models.label(model)} on scores √d_k times larger than any "
        "it met in training, not a model trained without the factor."
    )
    if st.toggle(  # on at first: the section opens on the comparison it is about
        "Compare with the scaling switch flipped", True, key="emb_compare", bind="query-params"
    ):
        other, _ = embeddings_runs.point_set(
            model, tuple(sentences), scale=not inputs.scale, causal=inputs.causal
        )
        other_shown = embeddings.cap_points(other, followed)  # same seed, same sample
        names = (
            f"√d_k {'on' if inputs.scale else 'off'} (sidebar)",
            f"√d_k {'off' if inputs.scale else 'on'}",
        )
        comparison = embeddings.shared_plane(shown.hidden[layer], other_shown.hidden[layer])
        fig = embeddings_charts.comparison_figure(
            comparison.coords_first,
            comparison.coords_second,
            chosen,
            shown.tokens,
            names,
            f"{state_name[0].upper()}{state_name[1:]}: arrows follow '{shown_word}'",
        )
        display.show_figure(fig, key="emb_compare_fig", filename="scaling-comparison")
        st.caption(
            "Both runs share one PCA plane, fitted on all their points; its axes have arbitrary "
            "units, so compare the arrows' lengths with each other, not with the axis numbers."
        )
        st.metric("mean cosine between a token's two versions", f"{comparison.mean_cosine:.3f}")


SECTIONS = {
    "1 · Before and after": before_and_after,
    "2 · Path": path_through_layers,
    "3 · Nearest in context": nearest_in_context,
    "4 · Occurrences": occurrences_alike,
    "5 · √d_k switch": scaling_switch,
}
# One section at a time, drawn only when its tab is open: all five at once were five large
# figures and a table, a first visit and every change far heavier than the reference app's
# (bench/bench_browser.py; bench/RESULTS.md, Cited in code). The URL keeps the open tab.
with payoff_box:
    payoff()
widgets.section_tabs(SECTIONS, key="emb_section")

st.caption(
    "Sources: Ethayarajh (2019), how contextual BERT's word vectors are; Coenen et al. (2019), "
    "word senses in BERT's geometry; van der Maaten & Hinton (2008), t-SNE."
)
