"""Every page's takeaway: the one sentence on its first screen states numbers computed here,
independently of the page (numpy on the model's weights or the toy's vectors)."""

from __future__ import annotations

import json
import re

import numpy as np
from conftest import assert_no_exception, open_tab, run_page, takeaway_text, written_share
from shown import html_figures, shown

from core import by_hand
from ui import numbers


def softmax_rows(scores: np.ndarray) -> np.ndarray:
    """(n, n) -> (n, n): each row's softmax, in float64."""
    shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


def test_by_hand_takeaway_states_each_words_weight_on_itself():
    at = run_page("views/by_hand.py")
    assert_no_exception(at)
    words = ["money", "bank", "grows"]  # the page's default sentence
    x = np.array([by_hand.TOY_VECTORS[w] for w in words], dtype=np.float64)  # (n, 4)
    kept = softmax_rows(x @ x.T).diagonal()
    most, least = int(kept.argmax()), int(kept.argmin())
    said = takeaway_text(at)
    assert f"**{words[most]}** keeps {kept[most]:.3f}" in said
    assert f"**{words[least]}** only {kept[least]:.3f}" in said


def test_context_takeaway_states_the_shared_words_cosines(model):
    at = run_page("views/context.py")
    assert_no_exception(at)
    table = model.word_vectors().astype(np.float64)
    tokenizer = model.tokenizer
    outputs = []
    for words in (["money", "bank", "grows"], ["river", "bank", "flows"]):
        x = table[[tokenizer.id_of(w) for w in words]]  # (3, d_model) static rows
        outputs.append((softmax_rows(x @ x.T) @ x)[1])  # bank's row of Y
    first, second = outputs
    cosine = first @ second / np.linalg.norm(first) / np.linalg.norm(second)
    said = takeaway_text(at)
    assert "same vector in X (cosine 1.000)" in said
    assert f"their cosine is {cosine:.3f}: each has mixed in its own sentence" in said
    assert cosine < 0.9995
    # the same two cosines under the bars, as a number beside the weights that make them
    (metric,) = [m for m in at.metric if m.label.endswith("in Y")]
    assert metric.value == f"{cosine:.3f}"
    assert metric.proto.delta == f"−{1 - cosine:.3f}"  # a true minus sign


def entropy_bits(weights: np.ndarray) -> np.ndarray:
    """(..., n) rows of weights -> (...,) their entropy in bits (0 log 0 = 0)."""
    return -(weights * np.log2(np.where(weights > 0, weights, 1))).sum(axis=-1)


def test_scaling_takeaways_state_the_top_weight_and_the_switched_run(model):
    from core import scaling_masking

    at = run_page("views/scaling_masking.py", text="Time flies like an arrow.")
    assert_no_exception(at)
    # tab 1 opens on 8 random scores times c = 10: the largest weight at c = 10 and at c = 1
    scores = scaling_masking.random_scores(8).astype(np.float64)
    top = {c: softmax_rows((c * scores)[None, :]).max() for c in (1, 10)}
    assert top[10] > top[1]
    said = takeaway_text(at)
    assert f"c = 10 keeps their order, yet the largest gets {top[10]:.2f}" in said
    assert f"instead of {top[1]:.2f} at c = 1: the larger the scores" in said
    # tab 3 opens with scaling off: L0 H0's mean row entropy both ways, the final vectors' cosine
    open_tab(at, "sm_section", "3 · Switches")
    assert_no_exception(at)
    runs = [model.run("Time flies like an arrow.", scale=scale) for scale in (True, False)]
    trained, unscaled = (entropy_bits(r.attentions[0, 0].astype(np.float64)).mean() for r in runs)
    final = [r.hidden_states[-1].astype(np.float64) for r in runs]  # (n, d_model) each
    cosines = (final[0] * final[1]).sum(-1) / np.linalg.norm(final[0], axis=-1)
    cosines /= np.linalg.norm(final[1], axis=-1)
    said = takeaway_text(at)
    change = "sharper" if round(unscaled, 2) < round(trained, 2) else "flatter"
    assert f"With no scaling, the rows of L0 H0 are {change} than as trained" in said
    assert f"(mean entropy {unscaled:.2f} bits against {trained:.2f})" in said
    assert f"keep a mean cosine of {cosines.mean():.3f}" in said


def test_information_flow_takeaway_states_the_pairs_cosine_before_and_after(model):
    from core import similarity

    at = run_page("views/information_flow.py", text="Time flies like an arrow.")
    assert_no_exception(at)
    _, first, second = similarity.EXAMPLE_PAIRS[0]  # the sidebar holds one sentence
    states = [model.run(s).hidden_states.astype(np.float64) for s in (first, second)]
    pooled = [h.mean(axis=1) for h in states]  # (L + 1, d_model) each
    cosines = (pooled[0] * pooled[1]).sum(-1)
    cosines /= np.linalg.norm(pooled[0], axis=-1) * np.linalg.norm(pooled[1], axis=-1)
    said = takeaway_text(at)
    assert f"the example pair have cosine {cosines[-1]:.3f} after the last layer" in said
    assert f"at the embedding output gives {cosines[0]:.3f}" in said
    peak = int(cosines.argmax())  # where the two are most alike, named when it is in between
    if 0 < peak < len(cosines) - 1:
        assert f"on the way it reaches {cosines[peak]:.3f} (after layer {peak - 1})" in said
    texts = " ".join(c.value for c in at.caption) + " ".join(m.value for m in at.markdown)
    assert "sentence-transformers" not in texts and "test_" not in texts
    assert "no longer the example pair above" in texts  # where the page switches sentences


SENTENCE = "Time flies like an arrow."


def ordinary(tokens) -> np.ndarray:
    """(n,) True for a word piece the tokenizer did not add."""
    return np.array([token not in ("[CLS]", "[SEP]") for token in tokens])


def test_overview_and_head_view_name_the_boldest_line_over_every_head(model):
    trace = model.run(SENTENCE)
    weights = trace.attentions.astype(np.float64)  # (L, H, n, n)
    keep = ordinary(trace.tokens)
    best = (-1.0, None)
    for index in np.ndindex(weights.shape):  # every weight between two ordinary pieces
        layer, head, query, key = index
        if keep[query] and keep[key] and query != key and weights[index] > best[0]:
            best = (weights[index], index)
    weight, (layer, head, query, key) = best
    arrow = f"{trace.tokens[query]} → " + ("itself" if query == key else trace.tokens[key])
    line = f"L{layer} H{head}'s {arrow}, {weight:.2f}"
    # lines that read the same at two decimals look as bold: the sentence says how many
    tied = [
        index[:2]
        for index in np.ndindex(weights.shape)
        if keep[index[2]] and keep[index[3]] and index[2] != index[3]
        and f"{weights[index]:.2f}" == f"{weight:.2f}"
    ]  # fmt: skip
    in_head = tied.count((layer, head))
    assert len(tied) > 1, "this sentence has ties (four lines of L0 H2 read 1.00 on MiniLM)"
    where = "all in that head" if in_head == len(tied) else f"{in_head} in that head"
    line += f" (one of {len(tied)} lines at {weight:.2f}, {where})"
    for page in ("views/overview.py", "views/head_view.py"):
        at = run_page(page, text=SENTENCE)
        assert_no_exception(at)
        said = takeaway_text(at)
        assert line in said, (page, said)
        # the figure opens on the head the sentence names
        sliders = {s.label: s.value for s in at.slider}
        assert (sliders["Layer"], sliders["Head"]) == (layer, head), (page, sliders)
        figure = {"views/overview.py": "map below"}.get(page, "figure")
        assert f"the {figure} opens on that head (layer {layer}, head {head})" in said, (page, said)
    # the head view's title states the line's weight, which its opacity alone cannot show
    spec = json.loads(at.get("plotly_chart")[0].proto.spec)
    title = spec["layout"]["title"]["text"]
    assert f"boldest line between ordinary pieces: {arrow}, {weight:.2f}" in title, title
    assert f"as {len(trace.tokens)} word pieces" in takeaway_text(run_page("views/overview.py"))


def test_heatmaps_takeaway_counts_sinks_and_the_previous_token_head(model):
    at = run_page("views/heatmaps.py", text=SENTENCE)
    assert_no_exception(at)
    trace = model.run(SENTENCE)
    weights = trace.attentions.astype(np.float64)  # (L, H, n, n)
    special = ~ordinary(trace.tokens)
    parked = weights[..., special].sum(-1).mean(-1)  # (L, H) mean weight on [CLS] and [SEP]
    n = len(trace.tokens)
    # the rows that count: a real word piece after a real word piece (page 4's rule too)
    rows = [i for i in range(1, n) if not special[i] and not special[i - 1]]
    previous = np.stack([weights[..., i, i - 1] for i in rows], -1).mean(-1)  # (L, H)
    layer, head = np.unravel_index(previous.argmax(), previous.shape)
    said = shown(takeaway_text(at))  # the specials as a visitor reads them
    sinks, heads = int((parked >= 0.5).sum()), parked.size
    counted = "none of the" if sinks == 0 else "all" if sinks == heads else f"{sinks} of"
    assert f"{counted} {heads} heads park at least half of a row on [CLS] and [SEP]" in said
    assert f"L{layer} H{head} gives the token before {previous[layer, head]:.2f}" in said
    assert f"against {previous.mean():.2f} for the average head" in said
    assert "counted as a token before" not in said, said


def test_inside_layer_takeaway_counts_each_sublayers_weights(model):
    at = run_page("views/inside_layer.py", text=SENTENCE)
    assert_no_exception(at)
    d, d_ff = model.d_model, model.dims.d_ff
    attention = 4 * (d * d + d)  # W_q, W_k, W_v, W_O with their biases
    feed_forward = d * d_ff + d_ff + d_ff * d + d  # two matrices with their biases
    said = takeaway_text(at)
    assert f"attention holds {attention:,} trained numbers" in said, said
    assert (
        f"the feed-forward network {feed_forward:,}: {feed_forward / attention:.1f} times" in said
    )


def test_positional_takeaway_reads_the_sinusoid_map_it_opens_on(model):
    import json

    from ui import models

    at = run_page("views/positional.py", text=SENTENCE)
    assert_no_exception(at)
    n, d = 100, 128  # the sliders' defaults
    # ω_i = 10000^(-2i/d): pair 0 turns once per 2π positions, the last pair i = d/2 - 1
    shortest, longest = 2 * np.pi, 2 * np.pi * 10000.0 ** ((d - 2) / d)
    said = takeaway_text(at)
    assert (
        f"columns 0 and 1 repeat every {shortest:.2f} positions, {n / shortest:.0f} times" in said
    )
    assert f"the last two every {longest:,.0f}, so across these {n} rows they hardly change" in said
    assert "mean cosine" not in said  # the map shows values, not the similarities of rows
    # the map says whose scheme it is: the original Transformer's, not the loaded model's
    (first,) = [c for c in at.get("plotly_chart") if "pos_sinusoid" in c.proto.id]
    title = json.loads(first.proto.spec)["layout"]["title"]["text"]
    assert "original Transformer" in title and "Vaswani et al., 2017" in title, title
    assert f"not {models.label(model)}'s own positions" in title, title
    # the intro names no term the page has not taught yet: the input's whole formula (segment
    # row, LayerNorm) waits in the folded note under the tabs, after it defines both
    (intro,) = [m for m in at.markdown if "Other schemes put position inside attention" in m.value]
    assert "LayerNorm" not in intro.value and "segment" not in intro.value, intro.value


def own_weight_alone_largest(weights: np.ndarray) -> tuple[int, int]:
    """(rows whose own weight beats every other key by more than 1e-6, rows where another key
    comes within 1e-6 of an own weight that is the largest): a tie is no win, as on page 8."""
    others = weights.copy()
    np.fill_diagonal(others, -np.inf)
    gap = weights.diagonal() - others.max(axis=1)  # (n,)
    return int(np.sum(gap > 1e-6)), int(np.sum(np.abs(gap) <= 1e-6))


def test_qkv_takeaway_counts_rows_that_pick_themselves_for_a_trained_head(model):
    at = run_page("views/qkv.py", text=SENTENCE, query={"qkv_source": "trained head"})
    assert_no_exception(at)
    trace = model.run(SENTENCE)
    x = trace.hidden_states[0].astype(np.float64)  # what layer 0 reads
    one_vector, _ = own_weight_alone_largest(softmax_rows(x @ x.T))
    query, key = (a[0, 0].astype(np.float64) for a in (trace.queries, trace.keys))
    projected, _ = own_weight_alone_largest(softmax_rows(query @ key.T / np.sqrt(model.d_head)))
    said = takeaway_text(at)
    n = len(trace.tokens)
    assert f"to the token itself in {one_vector} of {n} rows" in said, said
    assert f"these W_q and W_k do in {projected} of {n}" in said
    # the maps the sentence reads follow it: 1 where a row's largest weight goes
    marked = np.asarray(html_figures(at)["qkv_winners_projected"]["numbers"]).reshape(n, n)
    alone_on_diagonal = (marked.diagonal() == 1) & (marked.sum(axis=1) == 1)  # (n,)
    assert int(alone_on_diagonal.sum()) == projected


def test_qkv_takeaway_compares_like_with_like_under_the_causal_mask(model):
    """With the sidebar's causal mask on, both counts are of masked rows: X Xᵀ's as well as the
    projected head's (row i weighs keys 0..i). "the" twice: unmasked, its first copy ties with
    the second (no win); masked, it cannot see the second and wins."""
    sentence = "the cat saw the dog"
    at = run_page("views/qkv.py", text=sentence, state={"causal": True})  # the random head
    assert_no_exception(at)
    trace = model.run(sentence, causal=True)
    x = trace.static.astype(np.float64)  # the static rows the random head reads: no positions
    n = len(trace.tokens)
    later = np.triu(np.ones((n, n), dtype=bool), 1)  # (n, n) the keys after each row
    one_vector, _ = own_weight_alone_largest(softmax_rows(np.where(later, -np.inf, x @ x.T)))
    unmasked, _ = own_weight_alone_largest(softmax_rows(x @ x.T))
    assert one_vector != unmasked  # the case this test reads: the mask changes the count
    assert f"to the token itself in {one_vector} of {n} rows" in takeaway_text(at)


def test_qkv_takeaway_counts_a_repeated_words_tie_as_no_win():
    # "the" twice: its two copies share a row of X, so in softmax(X Xᵀ) they tie for the top
    sentence = "the cat saw the dog"
    at = run_page("views/qkv.py", text=sentence)
    assert_no_exception(at)
    said = takeaway_text(at)
    assert "another key ties it: no win" in said, said
    assert "tied with another key" not in said


def test_multi_head_takeaway_reads_the_two_heads_rows_from_the_trace(model):
    import re

    at = run_page("views/multi_head.py", text=SENTENCE)
    assert_no_exception(at)
    said = shown(takeaway_text(at))
    found = re.search(
        r"For (\d+):(\S+), L(\d) H(\d+) \(layer \3, head \4\) gives the token before ([\d.]+) "
        r"of its row and "
        r"L(\d) H(\d+) gives the token after ([\d.]+) \(an even spread over the (\d+) keys "
        r"the row can see: (1/\d+ [=≈] [\d.]+)\)",
        said,
    )
    assert found, said
    focus = int(found[1])
    trace = model.run(SENTENCE)
    assert trace.tokens[focus] == found[2]
    weights = trace.attentions.astype(np.float64)  # (L, H, n, n)
    before = weights[int(found[3]), int(found[4]), focus, focus - 1]
    after = weights[int(found[6]), int(found[7]), focus, focus + 1]
    assert (found[5], found[8]) == (f"{before:.2f}", f"{after:.2f}")
    assert (found[9], found[10]) == (str(len(trace.tokens)), written_share(len(trace.tokens)))
    assert ("two heads, two separate mixtures" in said) == (
        min(before, after) > 1 / len(trace.tokens)
    )
    # the caption says which rows its counts cover: a text piece whose neighbour is one too
    text_piece = ordinary(trace.tokens)
    rows = [i for i in range(1, len(text_piece)) if text_piece[i] and text_piece[i - 1]]
    head_rows = weights[int(found[3]), int(found[4])]
    held = sum(int(np.argmax(head_rows[i])) == i - 1 for i in rows)
    captions = shown(" ".join(c.value for c in at.caption))
    assert (
        f"on the token before in {held} of the {len(rows)} rows where the token and the one "
        "before it both come from the text" in captions
    ), captions
    assert "([CLS] and [SEP] are the tokenizer's additions)" in captions


def test_explanations_takeaway_names_pieces_of_the_sentence():
    at = run_page("views/explanations.py", text=SENTENCE)
    assert_no_exception(at)
    said = shown(takeaway_text(at))
    # the question names what the gradients explain: with no second sentence, its own vector
    rule = (
        "Which word piece counts most for the sentence's own vector (highest score, [CLS] and "
        "[SEP] left out)? "
    )
    assert said.startswith(rule), said
    # the rule that makes the figure agree, under it: [CLS] (1.00 in some rows) and a negative
    # cell (gradient × input's strongest) are not "what matters most"
    (rule_caption,) = [shown(c.value) for c in at.caption if c.value.startswith("“Counts most”")]
    assert rule_caption.startswith(
        "“Counts most”: a method's highest score, [CLS] and [SEP] left out; the sign counts, so a "
        "negative score, however large, counts against"
    ), rule_caption
    # "k of the 6 methods (…: no piece above 0, so none named) name …": a method whose best
    # piece still scores below 0 names none, and the count says so
    found = re.match(
        r"(\d) of the 6 methods(?: \((.*?): no piece above 0, so none named\))? name ",
        said.removeprefix(rule),
    )
    assert found, said
    naming, against = int(found[1]), found[2]
    assert naming + (len(against.split(" and ")) if against else 0) == 6, said
    answer = said.removeprefix(rule)[found.end() :]
    named = (
        answer.split("(")[1].split(")")[0].split(", ")
        if "(" in answer
        else [answer.removeprefix("the same one, ").rstrip(".")]
    )
    named = [piece.strip("“”") for piece in named]  # each quoted, so "." reads as a piece
    assert set(named) <= {"time", "flies", "like", "an", "arrow", "."}, said


def test_the_boldest_line_joins_two_different_pieces():
    """Under the causal mask the first row can only look at itself (weight 1): the boldest line
    between two pieces is never a piece's line to itself."""
    from core import head_stats

    weights = np.zeros((1, 2, 3, 3))  # (L, H, n, n), causal rows
    weights[0, :, 0, 0] = 1.0  # the first piece: itself only
    weights[0, 0, 1, :2] = (0.3, 0.7)
    weights[0, 1, 1, :2] = (0.6, 0.4)  # head 1: row 1 gives piece 0 the largest other weight
    weights[0, :, 2, :] = (0.2, 0.1, 0.7)
    special = np.zeros(3, dtype=bool)
    assert head_stats.boldest_line(weights, special) == (0, 1, 1, 0, 0.6)


def test_ties_are_the_lines_that_print_as_the_boldest():
    """Lines between two different ordinary pieces whose weight prints like the boldest's at two
    decimals, counted by formatting each weight as the prose does."""
    from core import head_stats

    rng = np.random.default_rng(3)
    weights = rng.uniform(0, 0.9, (2, 3, 5, 5))  # (L, H, n, n)
    weights[1, 2, 3, 1] = 0.9987  # the boldest, "1.00"
    weights[1, 2, 2, 4] = 0.9951  # "1.00" in the same head
    weights[0, 0, 3, 2] = 0.9949  # "0.99": not a tie
    weights[0, 1, 4, 4] = 0.999  # a piece to itself: not a line the sentence counts
    weights[0, 1, 0, 3] = 0.998  # the first piece is special: not counted
    special = np.array([True, False, False, False, False])
    boldest = head_stats.boldest_line(weights, special)
    assert boldest[:4] == (1, 2, 3, 1)
    shown = f"{boldest[4]:.2f}"
    tied = [
        index[:2]
        for index in np.ndindex(weights.shape)
        if not special[index[2]] and not special[index[3]] and index[2] != index[3]
        and f"{weights[index]:.2f}" == shown
    ]  # fmt: skip
    assert (
        head_stats.ties_with_boldest(weights, special, boldest)
        == (
            len(tied),
            tied.count((1, 2)),
        )
        == (2, 2)
    )


def test_an_even_share_is_written_exactly_or_marked_as_rounded():
    assert [written_share(k) for k in (2, 3, 4, 8, 16, 40)] == [
        "1/2 = 0.50",
        "1/3 ≈ 0.33",
        "1/4 = 0.25",
        "1/8 = 0.125",
        "1/16 ≈ 0.06",
        "1/40 = 0.025",
    ]
    for keys in range(1, 60):
        assert numbers.even_share(keys) == written_share(keys), keys


def test_multi_head_takeaway_under_the_mask_says_the_token_after_is_masked():
    """With the causal mask on, the token after lies beyond it: the takeaway's even spread is
    over the keys the row sees, and says the token after gets 0 from every head."""
    import re

    at = run_page("views/multi_head.py", text=SENTENCE, state={"causal": True})
    assert_no_exception(at)
    said = shown(takeaway_text(at))
    found = re.search(r"For (\d+):\S+, .* \(an even spread over the (\d+) keys the row can", said)
    assert found, said
    assert int(found[2]) == int(found[1]) + 1  # row i sees keys 0..i under the mask
    assert "the token after is masked, so every head gives it 0" in said
    # the figure beside it carries the same yardstick, 1 / the keys the row sees
    bars = html_figures(at)["mh_two_mixtures"]
    keys_seen = int(found[2])
    assert (
        f"(an even spread over the {keys_seen} keys it sees: {written_share(keys_seen)} each)"
        in (bars["title"])
    ), bars["title"]
