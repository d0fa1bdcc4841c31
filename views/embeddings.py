"""Embedding projections: one word, one static point, many contextual points."""

import streamlit as st

from core import embeddings
from ui import charts, display, embeddings_charts, models, state, tables, widgets
from ui.escape import literal

inputs, model = state.page_context()
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

st.title("8 · Embedding projections")
st.markdown(
    "A word piece starts as one row of the vocabulary table: *bank* is the same row by the "
    "river and at the counter. Layer by layer, attention mixes in what the other tokens carry "
    "and a feed-forward network reworks each token, so each *bank* ends up somewhere different. "
    f"Below, the tokens of many sentences, squeezed from {model.d_model} dimensions into a "
    "picture."
)
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
points, skipped = state.point_set(model, tuple(sentences), scale=inputs.scale, causal=inputs.causal)
state.off_distribution_note(inputs, models.label(model))  # the sidebar's switches act here
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
    index=words.index("bank") if "bank" in words else 0,
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
    help="Layers are numbered from 0, as on every page: “after layer 5” is the last of six.",
)
state_name = charts.state_name(layer)
shown_word = literal(word)  # a word piece of the visitor's text: shown, never read as markup
method = c3.radio("Projection", ["PCA", "t-SNE"], key="emb_method", bind="query-params")
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
    "Every tab follows the word piece chosen here; tabs 1, 2, 4 and 5 show the chosen hidden "
    "state; Projection applies to tab 1, View to tabs 1 and 2."
)


def before_and_after() -> None:
    """Section 1: every token before the first layer and after the chosen state, projected."""
    st.subheader("1 · Before and after")
    if method_key == "tsne":
        st.caption(
            f"t-SNE keeps near neighbours near but distorts distances; perplexity "
            f"{embeddings.tsne_perplexity(shown.n_points):.0f} (clamped below the number of points)."
        )
    left, right = st.columns(2)  # the figures first, what they show under them
    with left:
        coords = state.projection(shown.static, method_key, n_components, ids=shown.token_ids)
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
        coords = state.projection(shown.hidden[layer], method_key, n_components)
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
    sense_split()


def sense_split() -> None:
    """The split at a glance: cosines between occurrences of one sense and of two, by stage."""
    occurrence_senses = [senses[shown.sentence[i]] for i in chosen]
    split = embeddings.sense_split(embeddings.cosine_by_layer(shown, chosen), occurrence_senses)
    stages = ["static"] + [charts.state_name(index) for index in range(model.n_layers + 1)]
    if not split.measured:
        st.caption(
            f"The split by sense needs two occurrences of '{shown_word}' with one sense and one "
            "with another, in the page's example sentences."
        )
        return
    display.show_weight_bars(
        stages,
        {"same sense": split.same, "other sense": split.other},
        f"'{shown_word}': how alike two occurrences are",
        key="emb_senses",
        y_title="mean cosine between two occurrences",
        filename="sense-split",
        decimals=3,
    )
    st.caption(
        f"{state_name[0].upper()}{state_name[1:]}, two occurrences with the same sense have a "
        f"mean cosine of {split.same[layer + 1]:.3f}, two with different senses "
        f"{split.other[layer + 1]:.3f}; in the static table both are 1, one row."
    )


def path_through_layers() -> None:
    """Section 2: the followed word piece's occurrences, state by state."""
    st.subheader(f"2 · The path of '{shown_word}' through the layers")
    st.markdown(
        "All layers share one PCA plane here, so a step in the picture is the projection of a real "
        "change of the vector onto that plane (moves across the plane do not show). Much of the motion is shared by every token (the whole cloud drifts from layer to "
        "layer); the gaps between the coloured paths are what the context adds. The embedding output "
        "already differs between sentences: position vectors were added. Grey: every token, "
        f"{state_name}."
    )
    paths = state.trajectory_projection(shown.hidden, n_components)
    fig = embeddings_charts.trajectory_figure(
        paths,
        chosen,
        shown.tokens,
        shown.sentence,
        shown.sentences,
        layer,
        f"'{shown_word}', states 0 … {model.n_layers}",
        senses,
    )
    display.show_figure(fig, key="emb_paths", filename="trajectories")


def nearest_words() -> None:
    """Section 3: the nearest rows of the input table to each occurrence, state by state."""
    st.subheader("3 · Which vocabulary words is it closest to?")
    st.latex(
        r"\text{neighbours}(h) = \operatorname{top}_5\; \cos(h, W_v),\ v \in \text{vocabulary}"
    )
    unit_table, allowed = state.vocabulary_view(model)
    ids, cosines = embeddings.nearest_by_stage(shown, chosen, unit_table, allowed)
    stages = ["static"] + [charts.state_name(index) for index in range(model.n_layers + 1)]
    labels = embeddings_charts.occurrence_labels(chosen, shown.tokens, shown.sentence, senses)
    # A static table, not st.dataframe: its cells wrap on a phone instead of being cut at the
    # right edge, and it has no toolbar to float over the formula above.
    st.table(
        embeddings_charts.neighbour_table(ids, cosines, model.tokenizer, stages, labels),
        hide_index=True,
    )
    st.caption(
        "Every layer adds its result to the token's vector instead of replacing it, so the word "
        "itself usually stays first. The runners-up are where the sense shows: try 'monitor' on a "
        "desk against 'monitor' a patient. Special tokens such as [unused7] are left out."
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
        display.show_figure(fig, key="emb_cosine", filename=f"cosine-state{layer}")
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
    st.markdown(
        "In the static table every pair has cosine 1: one row. The embedding output (emb) "
        "already differs a little, since each occurrence has its own position; through the layers "
        "the occurrences mostly separate further (not always steadily: follow the line), and occurrences with the same sense tend to stay closer than occurrences across "
        "senses (with the default sentences: the two river banks, the two money banks)."
    )
    if len(chosen) < 2:
        st.caption(
            f"'{shown_word}' occurs once: add a sentence that uses it again to compare occurrences."
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
        other, _ = state.point_set(
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
        st.metric("mean cosine between a token's two versions", f"{comparison.mean_cosine:.3f}")


SECTIONS = {
    "1 · Before and after": before_and_after,
    "2 · Path": path_through_layers,
    "3 · Nearest words": nearest_words,
    "4 · Occurrences": occurrences_alike,
    "5 · √d_k switch": scaling_switch,
}
# One section at a time, drawn only when its tab is open: all five at once were five large
# figures and a table, a first visit and every change far heavier than the reference app's
# (bench/bench_browser.py; bench/RESULTS.md, Cited in code). The URL keeps the open tab.
widgets.section_tabs(SECTIONS, key="emb_section")

st.caption(
    "Sources: Ethayarajh (2019), how contextual BERT's word vectors are; Coenen et al. (2019), "
    "word senses in BERT's geometry; van der Maaten & Hinton (2008), t-SNE."
)
