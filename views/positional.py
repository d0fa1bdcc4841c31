"""2b · Positional encoding: how word order gets into a model whose attention cannot see it."""

import streamlit as st

from core import positional
from ui import (
    anatomy_text,
    display,
    display_policy,
    models,
    positional_charts,
    positional_runs,
    predict,
    predict_answers,
    sidebar,
    state,
    tables,
    takeaway,
    terms,
    traces,
    widgets,
)
from ui.numbers import signed

inputs, model = state.page_context()
model_label = models.label(model)  # the model's name in the prose
MAX_SHUFFLE_TOKENS = 64  # the permutation experiment uses at most this many word pieces
MAX_RECOVERY_TOKENS = 32

anatomy = anatomy_text.of(model)  # the loaded model's own input, term by term
rotary = not anatomy.position_table  # no table: q and k are turned by position

widgets.page_title("2b · Positional encoding")
# Sections 6 and 7 read the sidebar sentence; a notice that it was cut shows up here, at the
# top, rather than far down where the sentence is first read.
sentence_notice = st.container()
st.markdown(
    "Attention scores are dot products between pairs of tokens. Swap two words and the same pairs "
    "are still there, so attention by itself has no idea of order. BERT and GPT-2 write "
    "position into each token's vector before the first layer, with a vector $P_p$ that "
    "depends only on the position $p$. Other schemes put position inside attention instead: "
    "relative positions (Shaw et al., 2018) and rotary embeddings (Su et al., 2021). "
    # the loaded model's own input: in the paragraph, not a box of its own, so the first tab's
    # encoding reaches the first screen. Its whole formula waits in the folded note under the
    # tabs, after the segment row and the norm it names are defined there.
    + anatomy_text.positions_sentence(anatomy, model_label).removesuffix(".")
    + " (tab 3)."
)


def sized_encodings(own_width: bool = False) -> positional.Encodings:
    """The sliders that size the encodings, drawn inside the tab they drive (tabs 1 to 5 share
    their values, which the URL keeps). own_width: the sinusoid takes the model's width, to sit
    beside its table, so no d_model slider is drawn (it would act on nothing there)."""
    left, right = st.columns(2)
    n_positions = left.slider("Positions", 8, 512, 100, key="pos_length", bind="query-params")
    d_model = (
        model.d_model
        if own_width
        else right.slider("d_model", 16, 512, 128, step=16, key="pos_dmodel", bind="query-params")
    )
    return positional.encodings(
        n_positions, d_model, None if rotary else positional_runs.position_rows(model)
    )


def sinusoid_section() -> None:
    """1 · The sinusoid: a clock hand per pair of dimensions."""
    st.subheader("1 · The sinusoid")
    payoff_box = st.container()  # the takeaway and the encoding, above the sliders that size it
    n_positions, d_model, sinusoid, learned = sized_encodings()  # its sliders
    _, shortest, longest = positional.wavelength_ladder(d_model)  # pair 0's and the last pair's
    last_turns = n_positions / longest  # how far the slowest pair turns down the map
    with payoff_box:
        takeaway.show(
            # what the map below shows, checkable there: fast stripes on the left, flat columns
            # on the right (the cosines between positions are tab 4's question)
            f"Each of these {n_positions} positions gets a row of sines and cosines of its own: "
            f"columns 0 and 1 repeat every {shortest:.2f} positions"
            + (  # a thinned map (every k-th row) cannot show every turn
                ""
                if display_policy.reduced_in_heatmap(n_positions)
                else f", {n_positions / shortest:.0f} times down the map,"
            )
            + f" and the last two every {longest:,.0f}, "
            + (
                f"so across these {n_positions} rows they hardly change."
                if last_turns < 0.05
                else f"{last_turns:.2f} of a turn across these {n_positions} rows."
            )
        )
        # the encoding and its first columns as curves side by side, so the takeaway's count of
        # turns can be read off a curve, then how it is made
        map_column, curves_column = st.columns([3, 2])
        fig = positional_charts.position_heatmap(
            sinusoid,
            # short lines: a phone's plot is ~350 px wide
            "The original Transformer's sinusoids<br>"
            f"<sup>{n_positions} positions × {d_model} dimensions, sized below<br>"
            f"Vaswani et al., 2017: not {model_label}'s own positions (tab 3)</sup>",
        )
        with map_column:
            display.show_matrix(
                sinusoid.shape,
                None,
                lambda: fig,
                key="pos_sinusoid",
                filename="sinusoidal-encoding",
            )
    if display_policy.reduced_in_heatmap(n_positions):
        st.caption(
            f"The heatmap shows every {positional_charts.thin_rows(n_positions)[1]}th position."
        )
    dims = st.multiselect(
        "Dimensions to draw as curves",
        list(range(d_model)),
        # the takeaway's columns: the first pair (0 and 1) and the last two
        default=[0, 1, d_model - 2, d_model - 1],
        key="pos_dims",
        bind="query-params",
    )
    with curves_column:
        curves = positional_charts.dimension_curves(
            sinusoid, dims, "Single dimensions over position"
        )
        display.show_figure(curves, key="pos_curves", filename="sinusoid-dimensions")
    st.latex(
        r"\begin{gathered}PE_{p,\,2i} = \sin(\omega_i\,p),\quad PE_{p,\,2i+1} = \cos(\omega_i\,p),"
        r"\\ \omega_i = 10000^{-2i/d_{\text{model}}}\end{gathered}"
    )
    st.markdown(
        "Each pair of dimensions is a clock hand turning at its own speed: pair 0 turns one radian "
        "per position, the last pair needs tens of thousands of positions for one turn. Together the "
        "hands give every position a distinct reading."
    )


def binary_section() -> None:
    """2 · Binary counting, the discrete ancestor."""
    st.subheader("2 · Counting in binary: the discrete ancestor")
    n_positions, d_model, sinusoid, learned = sized_encodings()  # its sliders
    wavelength_ratio, *wavelength_range = positional.wavelength_ladder(d_model)
    st.markdown(
        "Write the position in binary: the lowest bit alternates at every step, the next every two "
        "steps, bit *j* every $2^j$ steps. That is already a set of oscillators with halving "
        "frequencies. The sinusoid is the smooth version: continuous values instead of jumps. Both "
        "ladders are geometric: binary halves the frequency from bit to bit (ratio ½), the sinusoid "
        f"multiplies it by 10000^(−2/d) = {wavelength_ratio:.3f} from pair to pair, with "
        f"wavelengths from 2π ≈ {wavelength_range[0]:.2f} to {wavelength_range[1]:,.0f} positions "
        f"(at d_model = {d_model}; the limit for wide models is 2π·10⁴)."
    )
    bits = positional.binary_encoding(n_positions)
    last_bit = positional.n_bits_for(n_positions) - 1
    bit = st.slider("Bit j", 0, last_bit, min(2, last_bit), key="pos_bit", bind="query-params")
    left, right = st.columns(2)
    with left:
        fig = positional_charts.position_heatmap(
            bits,
            "Binary encoding (bit 0 = lowest)",
            x_title="bit j",
            symmetric=False,
            colorscale="Greys",
        )
        display.show_matrix(
            bits.shape, None, lambda: fig, key="pos_binary", filename="binary-encoding"
        )
    with right:
        square = positional.bit_of(range(n_positions), bit)
        smooth = positional.smooth_bit(range(n_positions), bit)
        display.show_figure(positional_charts.bit_figure(square, smooth, bit), key="pos_bitcurve")


def rotary_section() -> None:
    """3 · A rotary model's own positions: q and k turned, checked on the sidebar sentence."""
    st.subheader(f"3 · What {model_label} does instead: rotary positions")
    st.latex(
        r"\begin{gathered}R_p \begin{pmatrix}a_i\\ b_i\end{pmatrix} = "
        r"\begin{pmatrix}\cos p\theta_i & -\sin p\theta_i\\ \sin p\theta_i & "
        r"\cos p\theta_i\end{pmatrix}\begin{pmatrix}a_i\\ b_i\end{pmatrix},\quad "
        r"\theta_i = \Theta^{-2i/d_{\text{head}}}\\ (R_p q)\cdot(R_r k) = q \cdot R_{r-p}\, k"
        r"\end{gathered}"
    )
    with sentence_notice:
        trace = traces.trace_or_stop(model, inputs)
    st.markdown(
        f"{model_label} adds nothing to the word-piece vectors. Inside every head, each pair of "
        "a query's and a key's coordinates is turned like the sinusoid's clock hands (tab 5), "
        f"by p θ_i at position p, with Θ = {anatomy.dims.rope_theta:,.0f} and d_head = "
        f"{model.d_head}. A turned query meets a turned key through the difference of their "
        "turns only, so a score depends on how far apart two tokens are, not on where they sit "
        "(Su et al., 2021). Checked below on the sidebar sentence's own queries and keys."
    )
    left, middle, right = st.columns(3)
    layer = left.slider("Layer", 0, model.n_layers - 1, 0, key="pos_rot_layer", bind="query-params")
    head = middle.slider("Head", 0, model.n_heads - 1, 0, key="pos_rot_head", bind="query-params")
    shift = right.slider(
        "Move every token by s", 1, 64, 5, key="pos_rot_shift", bind="query-params"
    )
    layer, head = min(int(layer), model.n_layers - 1), min(int(head), model.n_heads - 1)
    check = positional_runs.rotary_check(model, trace, layer, head, int(shift))
    st.markdown(
        f"- The model's own turn: recomputing head {head}'s unturned q and k from what layer "
        f"{layer} reads and turning them here, in float64, gives the model's turned ones to "
        f"max |Δ| = **{check.max_turn_error:.1e}** (float32 rounding).\n"
        f"- Move every one of the {trace.n_tokens} tokens {check.shift} places on: every score "
        f"R_(p+s) q · R_(r+s) k stays what it was, to max |Δ| = **{check.max_shift_error:.1e}**. "
        "A table learned in training promises nothing of the kind (tab 4 measures how far one "
        "follows distance)."
    )
    display.show_matrix(
        check.scores.shape,
        None,
        lambda: positional_charts.position_heatmap(
            check.scores,
            f"Layer {layer}, head {head}: turned q · turned k",
            x_title="key position",
            colorbar_title="q·k",
            height=380,
        ),
        key="pos_rot_scores",
        filename=f"rotary-scores-L{layer}-H{head}",
    )
    st.caption(
        f"Pair 0 turns {check.frequencies[0]:.2f} radian per position (a full turn every "
        f"{check.periods[0]:.1f} positions); the last pair a full turn every "
        f"{check.periods[-1]:,.0f} positions."
    )


def learned_section() -> None:
    """3 · The model's learned table next to a sinusoid."""
    st.subheader(f"3 · What {model_label} learned instead")
    n_positions, d_model, sinusoid, learned = sized_encodings(own_width=True)  # its slider
    slow_share = positional.slow_drift_share(learned)
    # the slider may ask for more positions than the table has: say how many rows are drawn
    offset = anatomy.arch.position_offset  # rows before it are never read (RoBERTa)
    shown_rows = (
        (f"all {len(learned)} rows a run reads" if offset else f"all {len(learned)} of its rows")
        if len(learned) >= anatomy.dims.max_positions
        else (
            f"the first {len(learned)} rows a run reads"
            if offset
            else f"its first {len(learned)} rows"
        )
    )
    st.markdown(
        f"{model_label} does not use the formula: it learned "
        f"{anatomy_text.position_table_words(anatomy)}, each of {model.d_model} numbers, during "
        f"training. Below, {shown_rows} next to a "
        f"sinusoid of the same width. {slow_share:.0%} of the learned dimensions drift slowly "
        f"over these positions (the vertical streaks: a value correlates above "
        f"{positional.SLOW_DRIFT} with its value one position on), the others change faster, "
        "none is a clean wave. The colour scale stops at the "
        "99th percentile so that one unusual row does not wash out the rest."
    )
    left, right = st.columns(2)
    with left:
        fig = positional_charts.position_heatmap(
            learned, f"{model_label}: learned position vectors"
        )
        display.show_matrix(
            learned.shape, None, lambda: fig, key="pos_learned", filename="learned-positions"
        )
    with right:
        fig = positional_charts.position_heatmap(sinusoid, f"Sinusoid with d_model = {d_model}")
        display.show_matrix(
            sinusoid.shape,
            None,
            lambda: fig,
            key="pos_sinusoid_same",
            filename="sinusoid-same-width",
        )


def near_positions_section() -> None:
    """4 · Similarity of positions against their distance."""
    st.subheader("4 · Near positions look alike")
    # the sinusoid at the model's width, as the table it is compared with: a d_model slider here
    # would act only on the figures the question keeps folded
    sized = sized_encodings(own_width=True)  # its slider
    # every code is compared on the same rows, so their R² are measured alike
    n_positions, d_model, sinusoid, learned = sized.on_common_rows()
    st.caption(f"The sinusoid here has {model_label}'s width, d_model = {d_model}.")
    if n_positions < sized.n_positions:
        st.caption(
            f"{model_label}'s learned table has {n_positions} rows: this section compares the "
            f"first {n_positions} positions of every code."
        )
    kind = st.radio(
        "Similarity", ["cosine", "dot"], horizontal=True, key="pos_sim", bind="query-params"
    )
    st.latex(
        r"PE_p \cdot PE_q = \sum_i \cos\big(\omega_i\,(p - q)\big)"
        r"\quad\text{depends on } p - q \text{ only}"
    )
    encodings = {
        "sinusoidal": sinusoid,
        "binary (±1 bits)": positional.binary_encoding(n_positions, signed=True),
        **(
            {  # the angles the model turns by: its own position code
                "rotary angles": positional.rotary_encoding(
                    n_positions, model.d_head, anatomy.dims.rope_theta
                )
            }
            if rotary
            else {"learned": learned}
        ),
    }
    profiles = {}

    def similarity_figures() -> None:
        """The three tables' similarities, their R² and the similarity against distance."""
        for column, (name, vectors) in zip(st.columns(3), encodings.items(), strict=True):
            similarity = positional.similarity_matrix(vectors, kind)
            profiles[name] = positional.distance_profile(similarity)[0]
            with column:
                fig = positional_charts.position_heatmap(
                    similarity,
                    f"{name}: {kind}",
                    x_title="position q",
                    colorbar_title=kind,
                    height=380,
                )
                display.show_matrix(
                    similarity.shape,
                    None,
                    lambda fig=fig: fig,
                    key=f"pos_sim_{name}",
                    filename=f"position-similarity-{name}",
                )
                share = positional.explained_by_distance(similarity)
                st.metric(
                    "explained by distance |p − q| alone (R²)",
                    f"{share:.2f}",
                    help=terms.ahead("R²"),
                )
                labels = [str(p) for p in range(n_positions)]
                tables.download_matrix(
                    similarity, labels, labels, f"similarity-{kind}", key=f"pos_csv_{name}"
                )
        fig = positional_charts.distance_figure(profiles, "Average similarity against distance")
        display.show_figure(fig, key="pos_profile", filename="similarity-vs-distance")
        st.markdown(
            "For the sinusoid the similarity is exactly a function of the distance (R² = 1). Binary codes "
            "follow distance only loosely: 7 and 8 are neighbours but differ in four bits. "
            + (
                f"{model_label}'s rotary angles are sines and cosines of position too; R² above says "
                "how much of their similarity distance alone explains."
                if rotary
                else "Nobody told the learned table about distance; R² above says how much of its "
                "similarity distance alone explains, which training alone put there."
            )
        )

    predict.ask_choice(
        "pos_distance",
        # the question compares the model's learned table, which rotary lacks: none to ask
        None if rotary else predict_answers.distance_explains(model, n_positions, kind),
        reveal=similarity_figures,
        folded="the three similarity maps with their R² and the curve against distance",
    )


def rotation_section() -> None:
    """5 · A shift by k is a rotation; why sines need cosines."""
    st.subheader("5 · Moving k steps is a rotation")
    n_positions, d_model, sinusoid, learned = sized_encodings()  # its sliders
    st.latex(
        r"\begin{pmatrix}\sin\omega_i(p{+}k)\\ \cos\omega_i(p{+}k)\end{pmatrix} = "
        r"\begin{pmatrix}\cos\omega_i k & \sin\omega_i k\\ -\sin\omega_i k & \cos\omega_i k\end{pmatrix}"
        r"\begin{pmatrix}\sin\omega_i p\\ \cos\omega_i p\end{pmatrix}"
    )
    left, right = st.columns(2)
    offset = left.slider("Offset k", 1, 64, 5, key="pos_offset", bind="query-params")
    position = right.slider(
        "Position p", 0, n_positions - 1, min(3, n_positions - 1), key="pos_p", bind="query-params"
    )
    check = positional.rotation_check(offset, d_model, n_positions)
    st.markdown(
        f"One block-diagonal matrix $R_k$ (it depends on k, never on p) moves every position "
        f"forward by k = {offset}. Checked for all p = 0 … {n_positions - 1} and all {d_model} "
        f"dimensions: max |R_k·PE(p) − PE(p+k)| = **{check.max_abs_error:.1e}**. Vaswani et al. "
        "(2017) chose the sinusoid hoping that a layer could learn such a linear map and use it to "
        "attend k tokens back, whatever the position. That was a hypothesis, and "
        + (
            f"{model_label} adds no such vector; its rotary positions (tab 3) turn q and k by "
            "rotations of this kind inside attention."
            if rotary
            else f"{model_label} does not use it: its positions come from a learned table."
        )
    )

    pairs = sorted({0, 1, 2, d_model // 4, d_model // 2 - 1})
    st.dataframe(positional.rotation_rows(check, position, pairs), hide_index=True)

    st.subheader("5b · Why sine and cosine come in pairs")
    st.markdown(
        "A sine alone is ambiguous: sin(ωp) takes each value twice per turn, going up and coming "
        "down, so one number cannot tell the two positions apart. With its cosine partner the pair "
        "is a point on a circle, unique within a turn, and moving k steps is the rotation above. "
        "That rotation needs both halves: sin(ω(p + k)) = sin(ωp) cos(ωk) + cos(ωp) sin(ωk) "
        "reads the cosine of p. From the sine alone the shifted sine cannot be worked out at "
        "all, since two positions with one sine generally have different shifted sines; with "
        "the pair it is the fixed linear map R_k, the same for every p, which a layer's weights "
        "can hold. The pairing is also what makes the dot product depend on distance alone:"
    )
    st.latex(
        r"\begin{gathered}\sin a\,\sin b + \cos a\,\cos b = \cos(a-b)"
        r"\\ \text{but}\quad \sin a\,\sin b = \tfrac12\big[\cos(a-b) - \cos(a+b)\big]"
        r"\end{gathered}"
    )
    sine_only = positional.sine_only_encoding(n_positions, d_model)
    left, right = st.columns(2)
    for column, (label, vectors) in zip(
        (left, right), (("sine and cosine", sinusoid), ("sines only", sine_only)), strict=True
    ):
        similarity = positional.similarity_matrix(vectors, "dot")
        with column:
            fig = positional_charts.position_heatmap(
                similarity,
                f"{label}: PE_p · PE_q",
                x_title="position q",
                colorbar_title="dot",
                height=360,
            )
            display.show_matrix(
                similarity.shape,
                None,
                lambda fig=fig: fig,
                key=f"pos_pair_{label}",
                filename="sine-cosine-pairs",
            )
            st.metric(
                "explained by distance |p − q| alone (R²)",
                f"{positional.explained_by_distance(similarity):.2f}",
            )
    st.caption(
        "Without the cosines the a + b term survives: the similarity of two positions depends on "
        "where they are, not only on how far apart, which shows as the crossing stripes."
    )


def adding_section() -> None:
    """6 · Why adding position to the word vector does not blur either."""
    st.subheader("6 · Why adding does not blur: almost perpendicular directions")
    st.latex(
        r"\begin{gathered}a, b \text{ random unit vectors in } \mathbb{R}^n:\\ "
        r"\mathbb{E}[a\cdot b] = 0,\quad \operatorname{Var}[a\cdot b] = 1/n\end{gathered}"
    )
    samples = {f"n = {n}": positional.random_unit_dot_products(n) for n in (16, 64, 384, 1024)}
    fig = positional_charts.histograms(samples, "Dot products of random unit vectors", "a · b")
    display.show_figure(fig, key="pos_random", filename="random-dot-products")
    st.dataframe(
        [
            {"n": n, "measured variance": positional.spread(samples[f"n = {n}"])[1], "1/n": 1 / n}
            for n in (16, 64, 384, 1024)
        ],
        hide_index=True,
    )
    if rotary:
        st.info(
            f"{model_label} adds no position vector to its word-piece vectors (rotary positions, "
            "tab 3), so there is nothing to blur: word and position meet only inside each head, "
            "as a turn of its queries and keys.",
            icon=":material/location_on:",
        )
        return
    geometry = positional_runs.table_geometry(model)
    real = {
        "token · token": geometry.word_word,
        "position · position": geometry.position_position,
        "token · position": geometry.word_position,
    }
    fig = positional_charts.histograms(
        real, f"{model_label}: cosines of random pairs of rows", "cosine"
    )
    display.show_figure(fig, key="pos_real", filename="embedding-cosines")
    summary = {name: positional.spread(values) for name, values in real.items()}
    shared = geometry.shared
    # what remains once the shared direction is gone: cosines of the centred rows by distance
    profile = geometry.centred_by_distance
    # only distances the table has (a 64-row table has no rows 100 apart)
    distances = [d for d in (1, 10, 100) if d < len(profile)]
    by_distance = ", ".join(
        f"{'neighbours have cosine' if d == 1 else f'rows {d} apart'} "
        f"{signed(profile[d], 2, plus='')}"
        for d in distances
    )
    near, far = round(float(profile[1]), 2), round(float(profile[distances[-1]]), 2)
    remains = (
        "What remains is closeness in position"
        if near > far and near > 0
        else "Closeness in position does not show"
    )
    token_mean = summary["token · token"][0]
    alike = (  # compared at the two decimals both are shown with
        "Position rows look more alike than token rows on average"
        if round(shared.mean_cosine, 2) > round(token_mean, 2)
        else "Position rows look no more alike than token rows on average"
    )
    with sentence_notice:
        trace = traces.trace_or_stop(model, inputs)
    st.markdown(
        "Trained vectors are not random, yet a token row and a position row are still close to "
        f"perpendicular (mean cosine {summary['token · position'][0]:.3f}, variance "
        f"{summary['token · position'][1]:.4f}, against 1/{model.d_model} = "
        f"{1 / model.d_model:.4f} for random directions). {alike} "
        f"(mean cosine {signed(shared.mean_cosine, 2, plus='')} over random pairs, against "
        f"{signed(token_mean, 2, plus='')}). "
        f"The mean row, one direction every position row shares, holds "
        f"{shared.mean_row_share:.0%} of a row's squared length; "
        f"without it the mean cosine is {signed(shared.centred_mean_cosine, 2, plus='')}. "
        f"{remains}: without the mean row, {by_distance}, over all {model.max_positions} rows{' a run reads' if anatomy.arch.position_offset else ''} "
        "(tab 4 draws such a curve with the shared direction kept, for the positions it shows)."
    )

    st.markdown("**Adding against concatenating.** Concatenation keeps word and position apart:")
    st.latex(
        r"\begin{gathered}[w_i; p_i]\cdot[w_j; p_j] = w_i\cdot w_j + p_i\cdot p_j \\ "
        r"(w_i+p_i)\cdot(w_j+p_j) = w_i\cdot w_j + p_i\cdot p_j + \underbrace{w_i\cdot p_j + p_i\cdot w_j}_{\text{cross terms}}"
        r"\end{gathered}"
    )
    terms = positional_runs.score_terms(model, trace)
    later = (["segment row"] if anatomy.segment_rows else []) + (
        [anatomy.norm_name] if anatomy.embedding_norm else []
    )  # what the model does to x after word + position
    added_later = f" (before the {' and '.join(later)})" if later else ""
    st.markdown(
        "Concatenating costs extra width (d_word + d_position numbers per token); adding keeps "
        "d_model but lets words and positions meet in the cross terms. Measured on the sidebar "
        f"sentence with {model_label}'s own rows, the cross terms are "
        f"{terms.cross_share:.0%} of the total size of all three parts{added_later}. "
        "Near-perpendicular directions keep each cross term far below |w||p|, but adding is not a "
        "clean separation: the layers have to read past the mix. The table below shows that each "
        "part can still be read back."
    )

    st.markdown(
        f"So after $x = E_{{\\text{{token}}}} + P_p${added_later} both parts "
        "can still be read back: compare $x$ with "
        "every vocabulary row and every position row. Rank 1 means the right one is the most similar. "
        f"Your sentence from the sidebar (first {MAX_RECOVERY_TOKENS} pieces):"
    )
    recovery = positional_runs.recovery(model, trace, MAX_RECOVERY_TOKENS)
    st.dataframe(
        {
            "token": list(trace.tokens[:MAX_RECOVERY_TOKENS]),
            "cos(x, token)": recovery.cos_token,
            "token rank": recovery.token_rank,
            "best other token": recovery.best_other_token,
            "cos(x, position)": recovery.cos_position,
            "position rank": recovery.position_rank,
            "best other position": recovery.best_other_position,
        },
        hide_index=True,
    )


# What "positions removed" takes away, by the model's position scheme (core/weights.py's
# Architecture.positions).
POSITIONS_REMOVED = {
    "learned": "no position rows added to the input",
    "rotary": "no rotary turn of the queries and keys",
}


def order_verdict(removed: positional.PermutationResult, kept: positional.PermutationResult) -> str:
    """The word-order experiment's conclusion, worded by its own two numbers."""
    if removed.agrees:
        first = (
            f"With positions removed the two runs agree to rounding (largest difference "
            f"{removed.max_abs_diff:.1e} over every layer and head): every step treats the pieces "
            "alike, and the model reads a bag of words. "
        )
    else:
        first = (
            f"With positions removed the two runs still differ by up to "
            f"{removed.max_abs_diff:.3g}: something in this run reads order. "
        )
    if kept.agrees:
        return first + (
            f"With positions they agree as well (largest difference {kept.max_abs_diff:.1e}): on "
            "this sentence and shuffle, the positions change nothing this test can see."
        )
    return first + (
        f"With positions they differ by up to {kept.max_abs_diff:.3g}"
        + (": order reaches the model only through them." if removed.agrees else ".")
    )


def word_order_section() -> None:
    """7 · The sentence shuffled, with and without positions."""
    with sentence_notice:
        trace = traces.trace_or_stop(model, inputs)
    st.subheader("7 · Order counts only through position")
    # both runs use the sidebar's √d_k switch and no mask (the caption below says why)
    sidebar.off_distribution_note(inputs, model_label, causal=False)
    st.markdown(
        "Run your sentence and a shuffled copy (a word moves only within its own sentence) "
        "through all "
        "layers, then put the shuffled copy's attention rows and columns back in the original order: "
        f"once with positions removed ({POSITIONS_REMOVED[anatomy.arch.positions]}), once as "
        f"{model_label} reads them. {model_label} never ran without positions in training, so "
        "only whether the two runs agree means something there, not the patterns themselves."
    )
    if trace.n_tokens < 4:
        st.info("Type at least two word pieces in the sidebar to have something to shuffle.")
        return
    if trace.n_tokens > MAX_SHUFFLE_TOKENS:
        st.caption(f"Only the first {MAX_SHUFFLE_TOKENS} word pieces are shuffled.")
    if inputs.causal or model.is_decoder:
        st.caption(
            "Both runs are without the causal mask: a mask is itself a statement about order (the "
            "shuffled copy's mask, put back, is another mask), so with it the runs would differ "
            "even without positions."
            + (" Without it the model runs off its training, too." if model.is_decoder else "")
        )
    with st.columns([1, 3])[0]:
        seed = widgets.whole_number_input("Shuffle number", 0, 999, 0, key="pos_seed")
    results = {  # cached per sentence and shuffle: four forward passes
        label: positional_runs.permutation_experiment(
            model, trace, use_positions, seed, MAX_SHUFFLE_TOKENS
        )
        for label, use_positions in (("positions removed", False), ("with positions", True))
    }
    shuffled = results["with positions"]
    stay = anatomy_text.specials_stay(shuffled.tokens, shuffled.special)
    st.caption(f"The shuffled order the model read ({stay}):")
    # st.text, not st.code: plain text all the same, without the code highlighter's share of
    # browser work on a page load (bench/bench_browser.py)
    st.text(" ".join(shuffled.shuffled_tokens))

    def shuffled_runs() -> None:
        """The two runs' differences per layer, the verdict and the four heatmaps."""
        diffs = {label: result.max_abs_diff_per_layer for label, result in results.items()}
        display.show_html_figure(
            positional_charts.layer_diff_bars(
                diffs, "Original vs shuffled-and-put-back, every layer", name="pos_perm_layers"
            )
        )
        st.markdown(order_verdict(results["positions removed"], results["with positions"]))
        # Four heatmaps of every head: in the browser up to a quarter of the one-figure limit
        n_shuffled = len(results["with positions"].tokens)
        in_browser = display_policy.switches_in_browser(
            model.n_layers, 4 * model.n_heads, n_shuffled
        )
        layer, head = widgets.layer_head_picker(model, in_browser=in_browser)
        display.head_switch()  # the HTML heatmaps' in-browser switch, their hover and tap readout
        for column, (label, result) in zip(st.columns(2), results.items(), strict=True):
            with column:
                st.markdown(f"**{label}**")
                for put_back in (False, True):  # HTML: the page loads no plotly.js for them
                    display.show_html_figure(
                        positional_charts.permutation_grid(
                            result, put_back, label, layer, head, every_head=in_browser
                        )
                    )

    predict.ask_choice(
        "pos_bag_of_words",
        predict_answers.shuffle_without_positions(results["positions removed"]),
        reveal=shuffled_runs,
        folded="the differences layer by layer and the four heatmaps",
    )


SECTIONS = {
    "1 · Sinusoid": sinusoid_section,
    "2 · Binary": binary_section,
    "3 · Learned": rotary_section if rotary else learned_section,  # a rotary model: its own turn
    "4 · Near positions": near_positions_section,
    "5 · Rotation": rotation_section,
    "6 · Adding": adding_section,
    "7 · Word order": word_order_section,
}
# One section at a time, drawn only when its tab is open: all seven at once were 19 figures,
# a first visit far heavier than the reference app's (bench/bench_browser.py; bench/RESULTS.md). The
# URL keeps the open tab, so a link still opens the section it was copied from.
widgets.section_tabs(SECTIONS, key="pos_section")
# under the tabs, folded: between the intro and the tabs it kept the first tab's encoding
# off the first screen
with st.expander("Besides word and position: what else goes into the input"):
    st.caption(
        (
            "Position rows are not the only rows added here: a model that reads one or two "
            "sentences at once can add a **segment row**, row 0 of a small learned table to every "
            "token of the first sentence and row 1 to every token of the second, so each token "
            "carries which sentence it is in. "
            + (
                f"{model_label}'s table has one row, added to every token alike."
                if anatomy.segment_rows == 1
                else f"{model_label}'s table has {anatomy.segment_rows} rows."
            )
            if anatomy.segment_rows
            else f"{model_label} has no segment table: two sentences differ to it only by their "
            "pieces and where they stand."
        )
        + (
            f" The {anatomy.norm_name} around the sum rescales each token's vector before the first "
            "layer."
            if anatomy.embedding_norm
            else ""
        )
        + (
            ""
            if rotary
            else f" In all, {model_label}'s input at position p is "
            f"$x_p = {anatomy_text.embedding_latex(anatomy)}$."
        ),
        help=terms.ahead("LayerNorm", anatomy=anatomy) if anatomy.embedding_norm else None,
    )


st.caption(
    "Sources: Vaswani et al. (2017), sinusoidal encoding; Devlin et al. (2019), BERT's learned "
    "position table; Shaw et al. (2018), relative positions; Su et al. (2021), rotary embeddings."
)
