"""4 · Multi-head attention: every head of a layer, how their outputs are joined, and ablation."""

import streamlit as st

from core import head_roles, head_stats, induction, multi_head, scaling_masking
from ui import (
    anatomy_text,
    display,
    display_policy,
    formulas,
    heatmaps_runs,
    induction_charts,
    induction_runs,
    models,
    multi_head_charts,
    multi_head_runs,
    next_word,
    predict,
    predict_answers,
    scaling_masking_charts,
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
from ui.numbers import even_share, largest, span

MAX_ROWS = 64  # token rows drawn for the per-token matrices of section 2

inputs, model = state.page_context()
model_label = models.label(model)  # the model's name in the prose
anatomy = anatomy_text.of(model)
# grouped key/value heads (core/anatomy.py): only W_Q is a head's own, W_K and W_V its group's
own_weights = "W_Q (W_K and W_V its group's)" if anatomy.grouped_heads else "W_Q, W_K, W_V"
first_piece = multi_head_runs.first_piece_name(model)  # [CLS], <s> or "the first piece"
closing = anatomy_text.special_names_after(anatomy)  # [SEP], </s>, or "" when none

widgets.page_title("4 · Multi-head attention")
st.markdown(
    f"A layer of {model_label}, as in the Transformer of Vaswani et al. (2017), does not run one "
    "attention pattern but "
    f"{model.n_heads} of them side by side. "
    f"Each head has its own {own_weights} that map a {model.d_model}-wide token vector to "
    f"{model.d_head}-wide queries, keys and values, so each can score a different relation. "
    + (
        f"In {model_label} the {model.n_heads} query heads share {model.n_kv_heads} key/value "
        f"heads, {model.n_heads // model.n_kv_heads} query heads to each (grouped-query "
        "attention): each head still has its own query, so its own scores. "
        if anatomy.grouped_heads
        else ""
    )
    + "Their outputs are then glued together and mixed by one more matrix, W_O.",
    help=terms.ahead("W_O", "layer", here="views/multi_head.py"),
)
trace = traces.trace_or_stop(model, inputs)
sidebar.off_distribution_note(inputs, model_label)  # the sidebar's switches act in every section
labels = widgets.numbered(trace.tokens)
token_axes = (trace.tokens, trace.tokens)  # query and key labels of a self-attention heatmap
roles = multi_head_runs.role_scores(model)  # the named heads, measured once per model
# the two roles set side by side: previous and next token, or, under the causal mask the model
# was trained with (no key after the query), previous token and the query itself
ROLE_PAIR = head_roles.roles_for(roles.causal)
PARTNER = ROLE_PAIR[1]
partner_name = {"next": "next-token", "self": "self"}[PARTNER]  # "the next-token head"
prev_layer, prev_head, prev_mean = roles.best("previous")
# never the same head as two roles
other_layer, other_head, other_mean = roles.best(PARTNER, other_than=(prev_layer, prev_head))


def two_heads() -> tuple[bool, tuple[int, int, float], tuple[int, int, float], int]:
    """The first tab's two heads and the row it shows them on: (picked on this sentence?, the
    previous-token head's (layer, head, mean), its partner's, the focus row). Tab 1's question
    asks about another row, so both tabs read this one choice."""
    # The best previous- and next-token heads on this very sentence; with the causal mask on
    # (no next token to see) or under five pieces, the probe sentences' heads.
    first_here = head_roles.best_on_sentence(
        trace.attentions, trace.tokens, "previous", trace.special
    )
    second_here = (
        head_roles.best_on_sentence(
            trace.attentions, trace.tokens, PARTNER, trace.special, first_here[:2]
        )
        if first_here
        else None
    )
    here = [first_here, second_here]
    # the sentence's own heads only when the mask is as trained (a next-token head needs no
    # mask, the self pair needs the mask) and the sentence is long enough
    picked_here = inputs.causal == roles.causal and trace.n_tokens >= 5 and None not in here
    probes = [(prev_layer, prev_head, prev_mean), (other_layer, other_head, other_mean)]
    previous, partner = here if picked_here else probes
    focus = head_roles.neighbour_focus(
        trace.attentions[previous[0], previous[1]],
        trace.attentions[partner[0], partner[1]],
        trace.special,
        PARTNER,
    )
    focus = min(2, trace.n_tokens - 2) if focus is None else focus
    return picked_here, previous, partner, focus


def why_several_heads() -> None:
    """Why several heads: one softmax row is one mixture; two neighbours need two heads."""
    st.subheader("Why several heads: one softmax makes one mixture")
    picked_here, (p_layer, p_head, p_mean), (n_layer, n_head, n_mean), focus = two_heads()
    # each head is called by its role only when it earns the name against an even spread over
    # the same rows: this sentence's, or the probe sentences'
    p_chance, n_chance = (
        [head_roles.sentence_chance(trace.tokens, role, inputs.causal, trace.special)
         for role in ("previous", PARTNER)]
        if picked_here
        else [roles.chance["previous"], roles.chance[PARTNER]]
    )  # fmt: skip
    previous_weights = trace.attentions[p_layer, p_head]  # (n, n)
    next_weights = trace.attentions[n_layer, n_head]  # the partner role's head
    step = head_roles.ROLE_KEY[PARTNER]  # the partner's key: i + 1, or i itself
    partner_key = "the token after" if PARTNER == "next" else "the token itself"
    previous_label = wording.role_head_label("previous-token", "the token before", p_mean, p_chance)
    partner_label = wording.role_head_label(partner_name, partner_key, n_mean, n_chance)
    focus_trace_rows = {
        f"L{p_layer} H{p_head} ({previous_label})": previous_weights[focus],
        f"L{n_layer} H{n_head} ({partner_label})": next_weights[focus],
    }
    prev_row, next_row = focus_trace_rows.values()  # (n,) each: the focus token's weights
    # an even spread over the keys the focus row can see: 1/n, or 1/(i + 1) under the mask
    focus_keys = head_roles.keys_seen(trace.n_tokens, focus, inputs.causal)
    even = head_roles.even_weight(trace.n_tokens, focus, inputs.causal)
    both_hold = prev_row[focus - 1] > even and next_row[focus + step] > even
    masked_partner = inputs.causal and PARTNER == "next"  # the token after is beyond the mask
    takeaway.show(
        # the page's one spelling-out of the L·H· names the legend and the prose use
        f"For {literal(labels[focus])}, L{p_layer} H{p_head} (layer {p_layer}, head {p_head}) "
        "gives the token before "
        f"{prev_row[focus - 1]:.2f} of its row and L{n_layer} H{n_head} gives {partner_key} "
        f"{next_row[focus + step]:.2f} (an even spread over the {focus_keys} keys the row can "
        f"see: {even_share(focus_keys)}"
        + ("; the token after is masked, so every head gives it 0" if masked_partner else "")
        + "): "
        + (
            "two heads, two separate mixtures, where one row of weights could only split one "
            "budget between them."
            if both_hold
            else "on this sentence the two heads do not both keep their role for this token."
        )
    )
    display.show_weight_bars(
        labels,
        focus_trace_rows,
        # the takeaway's yardstick in the figure, where the bars can be held against it; under
        # the mask the row sees fewer keys than the bars list
        f"Where {literal(labels[focus])} looks, in two heads (an even spread over the "
        f"{focus_keys} keys it sees: {even_share(focus_keys)} each)",
        key="mh_two_mixtures",
    )
    two_things = "the word after it" if PARTNER == "next" else "its own value"
    st.markdown(
        "A row of α is one set of weights that sums to 1, so one head hands each token one weighted "
        "average of value vectors. A token that needs two things at once, say the word before it "
        f"and {two_things}, would get from one head a blend of both, with no way to tell them "
        "apart afterwards. Several heads give several separate mixtures, each from its own "
        f"{own_weights}, and W_O decides how to combine them."
        + (
            f" {model_label} is trained with the causal mask: in training no token saw a later "
            "one, so no head learned to look at the word after, and the second head here is the "
            "one that keeps most weight on the token itself."
            if PARTNER != "next"
            else ""
        )
    )
    found = (
        "The two heads that lean most to the token before and to "
        f"{partner_key} on this sentence, shown on the token where both hold best"
        if picked_here
        else "Two heads found by the measurement of tab 1 · All heads (on fixed probe sentences), "
        "here on "
        "the sidebar sentence"
    )
    prev_held, prev_rows = head_roles.role_holds(previous_weights, "previous", trace.special)
    next_held, next_rows = head_roles.role_holds(next_weights, PARTNER, trace.special)
    # which rows count (head_roles.role_holds): a token of the text whose key of the role is
    # one too; the pieces the tokenizer adds are neither
    counted = {
        "previous": "rows where the token and the one before it both come from the text",
        "next": "rows where the token and the one after it both come from the text",
        "self": "rows of tokens that come from the text",
    }
    specials = anatomy_text.special_names(anatomy)
    how_often = (
        f" Over the whole sentence, L{p_layer} H{p_head} puts its largest weight on the token "
        f"before in {prev_held} of the {prev_rows} {counted['previous']}, and L{n_layer} "
        f"H{n_head} on {partner_key} in {next_held} of the {next_rows} {counted[PARTNER]}"
        + (
            f" ({specials} {'are' if ' and ' in specials else 'is'} the tokenizer's "
            f"addition{'s' if ' and ' in specials else ''})."
            if specials
            else "."
        )
        if prev_rows and next_rows
        else ""
    )
    next_top_key, next_top_weight = largest(next_row)  # where the partner head's row goes
    neighbour_note = (
        f"{found}: L{p_layer} H{p_head} gives the token before, "
        f"{literal(labels[focus - 1])}, {prev_row[focus - 1]:.2f} of the row, and "
        f"L{n_layer} H{n_head} gives {partner_key}, {literal(labels[focus + step])}, "
        f"{next_row[focus + step]:.2f}; an even spread over the {focus_keys} "
        f"keys this row can see gives each {even_share(focus_keys)}"
        + (
            ". The causal mask is on, so no head may look at a later token, and the next-token "
            f"head's weight goes elsewhere ({next_top_weight:.2f} to "
            f"{literal(labels[next_top_key])})."
            if inputs.causal and PARTNER == "next"
            else ". Each row sums to 1: one head could only split one budget between the two "
            "keys, two heads keep them apart."
        )
        + how_often
    )
    st.caption(neighbour_note, help=terms.ahead("role score", here="views/multi_head.py"))


def all_heads() -> None:
    """1 · Every head of the picked layer, and the heads a measurement names."""
    layer = widgets.layer_slider(model)  # every head of one layer: no Head slider here
    st.subheader(f"1 · All {model.n_heads} heads of layer {layer}")
    st.latex(  # written from the sidebar's switches, as the grid below was computed
        r"\begin{gathered}"
        rf"\text{{head}}_h={formulas.attention(inputs.scale, inputs.causal, 'Q_h', 'K_h')}V_h,"
        r"\\ Q_h = X W_Q^h,\ K_h = X W_K^h,\ V_h = X W_V^h"
        + formulas.mask_row(inputs.causal)
        + r"\end{gathered}"
    )
    stats = heatmaps_runs.head_statistics(trace, False)
    on_previous = stats.on_previous[layer]  # (H,)

    def heads_grid() -> None:
        """Every head of the layer, drawn small, with how to read the patterns."""
        display.show_matrix(
            trace.attentions[layer].shape,
            None,
            lambda: multi_head_charts.heads_grid(trace.attentions[layer], trace.tokens, layer),
            "mh_grid",
        )
        if display_policy.averaged_in_heads_grid(trace.n_tokens):
            block = head_stats.block_size(trace.n_tokens, display_policy.HEADS_GRID_TOKENS)
            st.caption(
                f"{trace.n_tokens} tokens: each small map averages blocks of {block} tokens. "
                "Attention heatmaps draws any one head in full."
            )
        st.markdown(
            "Same sentence, same layer, different patterns. Look for a line just below the diagonal "
            "(each token looks at the one before), just above it (the one after), a bright first "
            f"column ({first_piece}) or an even wash; the measurement below names the heads that do "
            "each most "
            "strongly. The sidebar switches apply here"
            + (
                ": with the causal mask on, everything above the diagonal is 0."
                if inputs.causal
                else "."
            )
        )

    # the Overview's boldest line (layer, head, query, key, weight): its map opens on that head
    overview_line = head_stats.boldest_line(trace.attentions, trace.special)
    predict.ask_choice(
        "mh_previous_row",
        predict_answers.previous_token_row(
            trace.attentions[layer],
            trace.tokens,
            on_previous,
            stats.on_next[layer],
            layer,
            trace.special,
            # the rows already quoted: the first tab's and the Overview's strongest link
            shown_rows={two_heads()[3], overview_line[2]},
            causal=trace.options.causal,
            overview_line=overview_line,
        ),
        reveal=heads_grid,
        folded="the small maps of every head of this layer",
    )

    st.subheader("Heads with a name, found by measurement")
    st.markdown(
        f"For every head of {model_label}, the mean weight a word piece gives to the token "
        f"before it, the token after it, {first_piece}, and another occurrence of the same word, "
        "over "
        f"{len(multi_head_runs.probe_sentences())} fixed probe sentences (the list "
        "is below). The framed head scores highest; another model gives other heads."
    )
    st.latex(
        r"\begin{gathered}\text{prev}(h) = \operatorname{mean}_i\ \alpha^{h}_{i,i-1},\quad "
        r"\text{next}(h) = \operatorname{mean}_i\ \alpha^{h}_{i,i+1},\\ "
        r"\text{same}(h) = \operatorname{mean}_i \sum_{j\ne i,\ t_j = t_i} \alpha^{h}_{ij}"
        r"\end{gathered}"
    )
    role_columns = st.columns(2)
    shown_roles = head_roles.possible_roles(roles.causal)  # no next-token grid under the mask
    role_list = [(r, n) for r, n in multi_head_runs.role_names(model).items() if r in shown_roles]
    for k, (role, role_name) in enumerate(role_list):
        best_layer, best_head, best_mean = roles.best(role)
        with role_columns[k % 2]:
            display.show_matrix(
                roles.means[role].shape,
                None,
                lambda role=role, best=(best_layer, best_head), title=(f"{role_name}: best L{best_layer} H{best_head}, mean {best_mean:.2f}"): (
                    multi_head_charts.role_grid(roles.means[role], best, title)
                ),
                f"mh_role_{role}",
            )
    partner_key_of = {"next": "the token after", "self": "itself"}
    probe_lengths = multi_head_runs.probe_lengths(model)  # pieces of each probe sentence
    shortest, longest = min(probe_lengths), max(probe_lengths)
    previous_named = wording.earns_role_name(prev_mean, roles.chance["previous"])
    partner_named = wording.earns_role_name(other_mean, roles.chance[PARTNER])
    st.markdown(
        (
            f"The previous-token head L{prev_layer} H{prev_head} gives"
            if previous_named
            else f"L{prev_layer} H{prev_head}, the head that leans most to the token before, gives"
        )
        + f" the token before {prev_mean:.2f} of its weight on average over the probe sentences; "
        + (
            f"the {partner_name} head L{other_layer} H{other_head}, "
            if partner_named
            else f"L{other_layer} H{other_head}, the head that leans most to "
            f"{partner_key_of[PARTNER]}, "
        )
        + f"{other_mean:.2f} to {partner_key_of[PARTNER]}. An even spread over the "
        + (
            "keys a row can see (row i sees i + 1 under the causal mask) "
            if roles.causal
            else f"n keys of a row ({shortest} to {longest} pieces in the probe sentences) "
        )
        + f"gives the token before {roles.chance['previous']:.2f} on average over the same "
        f"rows, and {partner_key_of[PARTNER]} {roles.chance[PARTNER]:.2f}. "
        + (
            ""
            if previous_named and partner_named
            else f"A head is named for its role here only at {wording.NAMED_ROLE_MARGIN:g}× an "
            "even spread or more, so "
            + (
                "neither earns its role's name"
                if not (previous_named or partner_named)
                else "only one earns its role's name"
            )
            + f" in {model_label}. "
        )
        # the small maps are folded behind the question above until it is answered
        + "To see either head's whole pattern, set the Layer slider above to its layer and "
        "answer the question there (or press Show me): the small maps it opens draw every head."
    )
    same_layer, same_head, _ = roles.best("same_word")
    repeat = multi_head_runs.repeat_example(
        model, multi_head_runs.probe_sentences()[2], same_layer, same_head
    )
    if repeat is not None:
        layer_zero = (
            " Layer 0 sees only each piece's row of the word-piece table"
            + "".join(f" plus its {term}" for term in anatomy_text.embedding_terms(anatomy)[1:])
            + ": both occurrences arrive as the same table row"
            + (" plus a different position row" if anatomy.position_table else "")
            + ", so a head of layer 0 can find the same piece but cannot tell one sense, or one "
            "part of speech, from the other."
            if same_layer == 0
            else ""
        )
        # "Same-word head" names the highest score over the probe sentences; on this sentence
        # its largest weight may go elsewhere, and the prose says where.
        largest = (
            " That is the largest weight in its row."
            if repeat.top_key == repeat.first
            else f" Its largest weight here goes to {literal(repeat.top_piece)} (piece "
            f"{repeat.top_key}), {repeat.top_weight:.2f}: its name comes from its average over "
            "the probe sentences, not from where most of its weight goes."
        )
        st.markdown(
            f"In “{literal(multi_head_runs.probe_sentences()[2])}”, L{same_layer} H{same_head}, the "
            "head with the highest same-word score over the probe sentences, lets the second "
            f"*{literal(repeat.word)}* (piece {repeat.second}) give the first (piece "
            f"{repeat.first}) {repeat.weight:.2f} of its weight, against "
            f"{even_share(repeat.keys_seen)} for an even spread over the "
            f"{repeat.keys_seen} pieces it "
            + ("sees under the causal mask" if repeat.causal else "sees")
            + f"; it gives itself "
            f"{repeat.to_itself:.2f}, {first_piece} {repeat.to_cls:.2f}"
            + (f" and {closing} {repeat.to_sep:.2f}." if closing else ".")
            + f"{largest}{layer_zero}"
        )
    widgets.folded(
        "Probe sentences",
        "mh_probes",
        lambda: st.dataframe(
            {"sentence": list(multi_head_runs.probe_sentences())}, hide_index=True
        ),
    )


def framing(found: induction.FoundScores) -> str:
    """How the tokenizer frames the repeated sequence, in words."""
    before = " ".join(literal(t) for t in found.start_tokens)
    after = " ".join(literal(t) for t in found.end_tokens)
    if before and after:
        return f"{before} before the first copy, {after} after the second"
    if before or after:
        return f"{before} before the first copy" if before else f"{after} after the second copy"
    return "nothing around it, so the first copy starts at position 0"


def induction_heads_found() -> None:
    """Previous-token and induction scores of every head, on repeated random pieces."""
    st.subheader("Previous-token and induction heads, on repeated random pieces")
    found = induction_runs.measured_scores(model)
    length, n_sequences = found.segment_length, found.n_sequences
    st.markdown(
        "Olsson et al. (2022) find two jobs with a sequence that makes sense only through its "
        f"repeat: {length} word pieces drawn at random from {model_label}'s vocabulary (no "
        f"specials), then the same {length} pieces again. A head's **previous-token score** is "
        "the mean weight a piece gives the piece just before it. Its **induction score** is the "
        "mean weight a piece of the second copy gives the piece that followed its first "
        "occurrence: the piece that comes next this time too. A head that looks there and "
        "copies what it finds can predict the rest of the repeat, which random pieces allow in "
        f"no other way. Each score is the mean over {n_sequences} such sequences, framed as "
        f"{model_label}'s tokenizer frames any text: {framing(found)}."
    )
    st.latex(
        # two lines: side by side they are wider than a phone
        r"\begin{gathered}\text{prev}(h) = \operatorname{mean}_{i}\ \alpha^{h}_{i,\,i-1},\\ "
        r"\text{induction}(h) = \operatorname{mean}_{i \in \text{2nd copy}}\ "
        r"\alpha^{h}_{i,\,i-T+1}\end{gathered}"
    )
    display.show_matrix(
        found.scores.induction.shape,
        None,
        lambda: induction_charts.score_grid(found.scores, "Every head, two scores"),
        "mh_induction_grid",
    )
    scores, bar = found.scores, induction_charts.CROSSING_BAR
    prev_layer_best, prev_head_best, prev_best = scores.best("previous_token")
    ind_layer, ind_head, ind_best = scores.best("induction")
    even_previous, even_induction = found.even_spread
    inductive = [induction_charts.head_name(*at) for at in scores.at_least("induction", bar)]
    verdict = (
        f"{len(inductive)} head{'s' if len(inductive) != 1 else ''} "
        f"({', '.join(inductive)}) give the next piece {bar:g} of their weight or more: "
        "induction heads by that bar."
        if inductive
        else f"No head gives the next piece {bar:g} of its weight: by that bar, {model_label} "
        "shows no induction head on these sequences."
    )
    # the scores are named as roles only where they earn it against the same even spread
    named_previous = wording.earns_role_name(prev_best, even_previous)
    named_induction = wording.earns_role_name(ind_best, even_induction)
    st.markdown(
        f"The highest previous-token score is L{prev_layer_best} H{prev_head_best}'s "
        f"({prev_best:.2f}), the highest induction score L{ind_layer} H{ind_head}'s "
        f"({ind_best:.2f}). A head that spread every row evenly over the pieces it may see "
        f"would score {even_previous:.2f} and {even_induction:.2f}"
        + (
            "."
            if named_previous and named_induction
            else f", and a head is named for its role only at {wording.NAMED_ROLE_MARGIN:g}× "
            "an even spread or more: "
            + (
                "neither score earns its role's name here."
                if not (named_previous or named_induction)
                else f"only the {'previous-token' if named_previous else 'induction'} score "
                "does here."
            )
        )
        + f" {verdict}"
    )
    if model.is_decoder:
        st.caption(
            f"{model_label} is a decoder: each piece sees only the pieces before it, as in the "
            "models Olsson et al. (2022) measured. The Lab trains a two-layer decoder from "
            "scratch and shows these heads forming."
        )
    else:
        st.caption(
            "Olsson et al. (2022) defined both scores for decoders, which see only earlier "
            "pieces and must predict the next one: looking at the piece after the earlier copy "
            f"is how a head predicts it. {model_label} is an encoder, sees both ways and "
            "predicts no next piece, so here the scores only say where a head looks. The Lab "
            "trains a two-layer decoder and shows both heads forming."
        )
    st.caption(
        "Olsson et al. (2022) tie induction heads to in-context learning, a model's use of "
        "earlier parts of a text to predict later ones. For small attention-only models they "
        "give causal evidence; for large models they call their own evidence “preliminary and "
        "indirect”."
    )


def back_to_one_vector() -> None:
    """2 · Concatenating the heads and W_O: back to one d_model vector per token."""
    st.subheader("2 · From heads back to one vector per token")
    layer, head = widgets.layer_head_picker(model)
    st.latex(
        r"\begin{gathered}\operatorname{MultiHead}(X)=\big[\text{head}_0\,\|\,\cdots\,\|\,"
        r"\text{head}_{H-1}\big]\,W_O^\top + b_O\\ =\sum_h \text{head}_h\,W_O^{h} + b_O"
        r"\end{gathered}"
    )
    n, width = trace.n_tokens, model.n_heads * model.d_head
    st.markdown(
        f"Head {head} outputs one {model.d_head}-wide row per token ({n} × {model.d_head}). "
        f"Concatenating all heads gives {n} × {width}; W_O ({model.d_model} × {width}) maps that "
        f"back to {model.d_model} dimensions. Read the sum form: each head writes through its own "
        f"{model.d_head} rows of W_Oᵀ (outlined for head {head}). The transpose is a matter of "
        f"storage: torch keeps W_O as (out, in) = ({model.d_model} × {width}) and computes "
        "x W_Oᵀ; the paper's Wᴼ is already (in × out) and needs none."
    )
    left, right = st.columns([1, 2])
    with left:
        display.show_matrix(
            (trace.n_tokens, model.d_head),
            None,
            lambda: multi_head_charts.token_matrix_heatmap(
                multi_head.head_outputs(trace, layer)[head],
                trace.tokens,
                f"head {head} output ({n} × {model.d_head})",
                "head dimension",
                max_rows=MAX_ROWS,
            ),
            "mh_head_output",
        )
    with right:
        concatenated = multi_head.concatenated_heads(trace, layer)
        display.show_matrix(
            concatenated.shape,
            None,
            lambda: multi_head_charts.head_block_heatmap(
                concatenated,
                model.n_heads,
                model.d_head,
                f"concatenation of all heads ({n} × {width})",
                trace.tokens,
                "token",
                highlight=head,
                max_rows=MAX_ROWS,
            ),
            "mh_concat",
        )
        tables.download_matrix(concatenated, labels, range(width), f"concat-L{layer}", key="mh_csv")
    st.caption(
        "Colours on this tab: blue above zero, red below, each figure scaled to its largest "
        "|value|."
    )
    if n > MAX_ROWS:
        st.caption(f"The two matrices above show the first {MAX_ROWS} of {n} tokens.")
    w_o = multi_head_runs.output_projection(model, layer)
    w_o_slices = w_o.per_head  # (H, d_head, d_model)
    display.show_matrix(
        w_o_slices[head].shape,
        None,
        lambda: multi_head_charts.weights_heatmap(
            w_o_slices[head],
            [str(d) for d in range(model.d_head)],
            f"Layer {layer}: head {head}'s slice of W_Oᵀ ({model.d_head} × {model.d_model})",
            "model dimension",
            height=380,
            y_title=f"dimension of head {head}",
            max_labels=8,
        ),
        "mh_w_o",
    )
    st.caption(
        f"W_Oᵀ stacks {model.n_heads} such slices, one per head ({width} × {model.d_model} in all); "
        "only the chosen head's slice is drawn. The full matrix is in the CSV."
    )
    tables.download_matrix(
        w_o.stacked,
        range(width),
        range(model.d_model),
        f"W_O-transposed-L{layer}",
        key="mh_w_o_csv",
    )


def value_weighted() -> None:
    """3 · Raw α against the value-weighted share ‖α v W_O‖."""
    st.subheader("3 · Looking is not moving: the value-weighted view")
    layer, head = widgets.layer_head_picker(model)
    st.latex(
        r"\lVert \alpha_{ij}\, v_j W_O^{h} \rVert = \alpha_{ij}\,\lVert v_j W_O^{h}\rVert,"
        r"\qquad \text{share}_{ij} = \frac{\lVert \alpha_{ij} v_j W_O^{h}\rVert}"
        r"{\sum_k \lVert \alpha_{ik} v_k W_O^{h}\rVert}"
    )
    spot = head_roles.parking_spot(  # None: neither place compared passes the parking rule
        trace.attentions, trace.tokens, trace.special, trace.options.causal
    )
    first_name, other_name = head_roles.sink_names(trace.tokens, trace.special)
    compared = [literal(first_name)] + (
        [literal(other_name)] if head_roles.has_other_specials(trace.tokens, trace.special) else []
    )
    st.markdown(
        "A weight α_ij says how much token *i* looks at token *j*; what actually reaches token *i* "
        "is α_ij times j's value, carried through W_O. When that value vector is short, a large "
        "weight moves almost nothing. Kobayashi et al. (2020) found that in BERT-base much of the "
        "weight on [SEP] and punctuation comes with such short vectors; in "
        f"{model_label}, on this sentence, "
        + wording.parking_verdict(literal(spot) if spot else None, compared)
        + " (Attention heatmaps measures it and states the rule). "
        "The share rescales each row of contribution sizes to sum to 1, so it sits on the "
        "same scale as α."
    )
    attn_weights = trace.attentions[layer]
    share = multi_head_runs.value_weighted_share(model, trace, layer)
    title = f"L{layer} H{head}: "
    left, right = st.columns(2)
    with left:
        display.show_matrix(
            attn_weights[head].shape,
            None,
            lambda: scaling_masking_charts.reduced_heatmap(
                attn_weights[head], *token_axes, title + "α"
            ),
            "mh_raw",
        )
    with right:
        display.show_matrix(
            share[head].shape,
            None,
            lambda: scaling_masking_charts.reduced_heatmap(
                share[head], *token_axes, title + "value-weighted share", colorbar_title="share"
            ),
            "mh_share",
        )
    left, right = st.columns(2)
    with left:
        display.show_matrix(
            attn_weights[head].shape,
            None,
            lambda: multi_head_charts.disagreement_heatmap(
                attn_weights[head], share[head], trace.tokens, "Where they disagree: share − α"
            ),
            "mh_disagreement",
        )
        st.caption(
            "Blue: the key contributes more than its weight suggests. "
            "Red: the raw weight overstates what this key contributes."
        )
    with right:
        gap = multi_head.raw_vs_weighted_gap(attn_weights, share)
        display.show_bars(
            len(gap), None, lambda: multi_head_charts.gap_by_head_figure(gap, head, layer), "mh_gap"
        )
        st.caption("0 = α and the share agree; 1 = they point at entirely different keys.")
    st.markdown("**Largest disagreements in this head**")
    st.dataframe(
        multi_head.disagreement_table(attn_weights[head], share[head], labels), hide_index=True
    )


def removed_name(removed: set[tuple[int, int]]) -> str:
    """'L2 H5' for one removed head, else '3 heads' (a figure's title, phone-wide)."""
    if len(removed) == 1:
        ((removed_layer, removed_head),) = removed
        return f"L{removed_layer} H{removed_head}"
    return f"{len(removed)} heads"


def remove_heads() -> None:
    """4 · Ablation: zero heads inside the forward pass and measure how far tokens move."""
    st.subheader("4 · Remove heads and watch the output change")
    layer = widgets.layer_slider(model)  # the layer whose heads the lists below start from
    st.markdown(
        "Removing a head sets its output to zero before W_O, in the model's own forward pass; "
        "everything after it is recomputed. The residual connection still carries each token's "
        "vector past the layer, so even removing every head of a layer does not erase the tokens. "
        f"{model_label} was never trained with a head missing: part of a change may come from the "
        "unusual input the later layers then receive, not only from what the head did.",
        help=terms.ahead("residual connection"),
    )
    everything = st.toggle(
        f"Remove all {model.n_heads} heads of layer {layer}",
        value=False,  # the section starts from one head removed, not a whole layer
        key="mh_ablate_layer",
        bind="query-params",
    )
    choices = {
        f"layer {lyr} · head {h}": (lyr, h)
        for lyr in range(model.n_layers)
        for h in range(model.n_heads)
    }
    picked = st.multiselect(
        "…and/or these heads", list(choices), key="mh_ablate", bind="query-params"
    )
    removed = {choices[name] for name in picked}
    if everything:
        removed |= {(layer, h) for h in range(model.n_heads)}
    if not removed:
        # Nothing picked: the section opens on the layer's strongest writer removed, measured
        # on this sentence, instead of on an empty page.
        write_lengths = multi_head_runs.head_write_lengths(model, trace, layer)  # (H,)
        strongest, longest = largest(write_lengths)
        removed = {(layer, strongest)}
        st.caption(
            f"Nothing picked yet, so this shows layer {layer}'s head {strongest} removed: on this "
            f"sentence it writes the longest vectors into the tokens, ‖head · W_Oʰ‖ = "
            f"{longest:.2f} on average (the layer's heads: {span(write_lengths, '.2f')}). Pick "
            "heads above to choose your own."
        )
    ablated = traces.trace(
        model,
        inputs.text,
        inputs.pair,
        scale=inputs.scale,
        causal=inputs.causal,
        ablate=frozenset(removed),
    )
    cosines = scaling_masking.layer_cosines(trace, ablated)  # (L + 1, n)
    moved = scaling_masking.summarize_cosines(cosines[-1])  # the last row: final vectors

    def ablation_figures() -> None:
        """How far each token's vector turned, finally and after every layer."""
        display.show_bars(
            trace.n_tokens,
            None,
            lambda: scaling_masking_charts.per_token_bars(
                trace.tokens,
                {"1 − cosine": scaling_masking.how_far_moved(cosines[-1])},
                f"Final vectors with {removed_name(removed)} removed",
                "1 − cosine",  # short: a phone's plot cut the long title; the caption says it
            ),
            "mh_ablation_final",
        )
        display.show_matrix(
            cosines.shape,
            None,
            lambda: multi_head_charts.layer_cosine_heatmap(
                cosines, trace.tokens, "Cosine to the full model after every layer"
            ),
            "mh_ablation_layers",
        )
        st.caption(
            f"Bars: 1 − cosine between each token's final vector here and in the full model; 0 "
            f"means it did not turn at all, and the taller the bar, the more removing the heads "
            f"changed it. In the heatmap the top row holds the "
            f"embeddings and each row below it the vectors after one layer; a cosine of 1 means "
            f"the same direction as in the full model. "
            f"Mean final cosine {moved.mean:.3f}; the token that moved most is "
            f"{literal(labels[moved.most_moved])} ({moved.lowest:.3f})."
        )

    predict.ask_choice(
        "mh_first_turned_row",
        predict_answers.first_turned_row(cosines, removed, model.n_heads),
        reveal=ablation_figures,
        folded="how far each token turned, finally and layer by layer",
    )
    next_word.after_removing(model, inputs.text, removed, key="mh_ablation")  # decoders


SECTIONS = {
    "Why several heads": why_several_heads,
    "1 · All heads": all_heads,
    "2 · Back to one vector": back_to_one_vector,
    "3 · Looking vs moving": value_weighted,
    "4 · Remove heads": remove_heads,
    "5 · Induction heads": induction_heads_found,  # a tab of its own: tab 1 holds five figures
}
# One section at a time, drawn only when its tab is open: all of them at once were 13 figures,
# a first visit and every new sentence far heavier than the reference app's
# (bench/bench_browser.py; bench/RESULTS.md, Cited in code). The URL keeps the open tab.
widgets.section_tabs(SECTIONS, key="mh_section")
st.caption(  # the count read from the tabs; below them, so the first tab's figure opens the page
    f"The page has {len(SECTIONS)} sections, one tab each. Sections 1 to 4 have a Layer slider "
    "inside their tab (2 and 3 a Head slider too), which keeps its place from tab to tab. “Why "
    "several heads” picks its two heads by measuring every head on the sidebar sentence; section "
    "1 names heads measured on fixed probe sentences."
)

st.caption(
    "Sources: Vaswani et al. (2017), multi-head attention; Clark et al. (2019) and Voita et al. "
    "(2019), heads with nameable jobs in BERT-base and in translation models; Michel et al. "
    "(2019), removing heads; Kobayashi et al. (2020), the value-weighted view."
)
