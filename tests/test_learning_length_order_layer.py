"""What the course taught weakly, against independent computations:

- page 1: its payoff depends on the rows' length (short table rows vs layer 0's long inputs);
- page 2: W_q, W_k and W_v separate asking, being found and handing over; attention computes
  every position at once and cannot see order without positions;
- page 5: why the residual stream, LayerNorm and the feed-forward non-linearity are there, and
  encoders vs decoders.

The independent computations are float64 numpy from the word-piece, position and segment
tables, or transformers' BertModel through hooks, never the code under test.
"""

from __future__ import annotations

import html
import math
import re

import numpy as np
import pytest
import torch
from conftest import BAD_INPUTS, answer_every_question, assert_no_exception, run_page
from shown import html_figures

from core import context, inside_layer, positional, qkv

CONTEXT, QKV, INSIDE = "views/context.py", "views/qkv.py", "views/inside_layer.py"
A, B = "money bank grows", "river bank flows"
SENTENCE = "Time flies like an arrow."


def _texts(at) -> str:
    return " ".join(e.value for e in [*at.markdown, *at.caption, *at.info, *at.warning])


def _cells(column) -> list[str]:
    """A static table's text cells as the visitor reads them (escape.literal's references
    decoded)."""
    return [html.unescape(str(cell)) for cell in column]


def _softmax_rows(scores: np.ndarray) -> np.ndarray:
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    return weights / weights.sum(axis=1, keepdims=True)


def _cosine(u: np.ndarray, v: np.ndarray) -> float:
    return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))


def _embedding_rows(model, ids, positions: bool = True) -> np.ndarray:
    """(n,) ids -> (n, d) LayerNorm(word + segment 0 [+ position]) from the tables, float64."""
    rows = model.word_embeddings.double().numpy()[ids]
    rows = rows + model.segment_embeddings.double().numpy()[0]
    if positions:
        rows = rows + model.position_embeddings.double().numpy()[: len(ids)]
    gain, shift = (t.double().numpy() for t in model.embedding_norm)
    centred = rows - rows.mean(axis=1, keepdims=True)
    spread = np.sqrt(centred.var(axis=1, keepdims=True) + model.dims.layer_norm_eps)
    return centred / spread * gain + shift


# ---- page 1: the payoff at two lengths ----------------------------------------------------------
def test_table_mean_length_is_the_mean_row_norm(model):
    table = model.word_embeddings.double()
    expected = float(table.norm(dim=1).mean())
    assert context.table_mean_length(model) == pytest.approx(expected, rel=1e-9)
    assert 1.0 < expected < 1.15  # the issue measured ≈ 1.07 on MiniLM


def test_layer_zero_rows_are_what_the_first_layer_reads(model):
    sentence = context.layer_zero_sentence(model, A)
    trace = model.run(A)
    assert sentence.tokens == trace.tokens[1:-1] == ("money", "bank", "grows")
    np.testing.assert_allclose(sentence.vectors, trace.hidden_states[0][1:-1], atol=1e-6)
    ids = [model.tokenizer.id_of(t) for t in trace.tokens]
    np.testing.assert_allclose(sentence.vectors, _embedding_rows(model, ids)[1:-1], atol=1e-4)


def test_self_leads_are_the_margin_of_each_rows_own_score():
    scores = np.array([[5.0, 2.0, 4.5], [1.0, 3.0, 0.0], [0.0, 9.0, 2.0]])
    np.testing.assert_allclose(context.self_leads(scores), [0.5, 2.0, -7.0])
    assert context.self_leads(np.array([[2.0]])).tolist() == [np.inf]  # nothing to beat


def test_the_payoff_needs_short_rows(model):
    """Table rows: the neighbours keep a share and the two banks part. Layer-0 rows and table
    rows stretched to their length: softmax(X Xᵀ) is the identity and the cosine stays 1."""
    effect = context.length_effect(model, A, B, "bank")
    table = model.word_vectors().astype(np.float64)
    ids_a, ids_b = (model.tokenizer.pieces(text)[1] for text in (A, B))
    cls, sep = model.tokenizer.id_of("[CLS]"), model.tokenizer.id_of("[SEP]")
    zero_a = _embedding_rows(model, [cls, *ids_a, sep])[1:-1]
    zero_b = _embedding_rows(model, [cls, *ids_b, sep])[1:-1]
    table_lengths = np.linalg.norm(np.concatenate([table[ids_a], table[ids_b]]), axis=1)
    zero_lengths = np.linalg.norm(np.concatenate([zero_a, zero_b]), axis=1)
    stretch = zero_lengths.mean() / table_lengths.mean()
    assert effect.stretch == pytest.approx(stretch, rel=1e-5)
    cases = {
        "table_rows": (table[ids_a], table[ids_b]),
        "layer_zero": (zero_a, zero_b),
        "stretched_rows": (table[ids_a] * stretch, table[ids_b] * stretch),
    }
    for name, (x_a, x_b) in cases.items():
        measured = getattr(effect, name)
        weights_a, weights_b = _softmax_rows(x_a @ x_a.T), _softmax_rows(x_b @ x_b.T)
        diagonal = np.concatenate([np.diag(weights_a), np.diag(weights_b)])
        np.testing.assert_allclose(measured.self_weights, diagonal, atol=1e-5, err_msg=name)
        lengths = np.linalg.norm(np.concatenate([x_a, x_b]), axis=1)
        np.testing.assert_allclose(measured.lengths, lengths, rtol=1e-5, err_msg=name)
        after = _cosine((weights_a @ x_a)[1], (weights_b @ x_b)[1])  # bank is piece 1 of both
        assert measured.pair.cosine_after == pytest.approx(after, abs=1e-5), name
        scores_a = x_a @ x_a.T
        lead = scores_a[0, 0] - max(scores_a[0, 1], scores_a[0, 2])  # money's row
        assert measured.self_leads[0] == pytest.approx(lead, rel=1e-4), name
    np.testing.assert_allclose(effect.table_rows.lengths, table_lengths, rtol=1e-5)
    # the page's claims, on these numbers
    assert effect.table_rows.self_weights.max() < 0.8 and effect.table_rows.pair.cosine_after < 0.95
    assert effect.layer_zero.lengths.min() > 5 * effect.table_rows.lengths.max()
    assert effect.layer_zero.self_weights.min() >= 0.9995
    assert effect.layer_zero.pair.cosine_after == pytest.approx(1.0, abs=5e-4)
    assert effect.stretched_rows.self_weights.min() >= 0.9995


def test_the_length_lesson_is_none_when_the_run_drops_the_word(model):
    text = "x " * 510 + "bank"  # bank is piece 511: page 1 keeps it, a run keeps 510 pieces
    assert "bank" in context.static_sentence(model, text).tokens
    assert context.length_effect(model, text, B, "bank") is None


def test_context_page_shows_the_length_lesson_with_live_numbers(model):
    at = run_page(CONTEXT)
    assert_no_exception(at)
    texts = _texts(at)
    mean_length = float(model.word_embeddings.double().norm(dim=1).mean())
    assert f"{mean_length:.2f} on average over all 30,522" in texts
    trace_a, trace_b = model.run(A), model.run(B)
    zero = np.concatenate([trace_a.hidden_states[0][1:-1], trace_b.hidden_states[0][1:-1]])
    lengths = np.linalg.norm(zero.astype(np.float64), axis=1)
    assert f"{lengths.min():.1f}–{lengths.max():.1f} long" in texts
    assert "softmax(X Xᵀ) is the identity to three decimals" in texts
    assert "the length decides, not the direction" in texts
    table = at.table[0].value
    kinds = _cells(table["rows of X"])
    assert kinds[:2] == ["table rows (steps 1–4)", "read by layer 0's heads"]
    assert re.fullmatch(r"table rows × \d+\.\d", kinds[2])
    cosines = _cells(table.iloc[:, -1])
    assert cosines[0].startswith("1.000 → 0.9") and cosines[1] == cosines[2] == "1.000 → 1.000"
    # the bars: bank's softmax row in sentence A, from the table's rows and from layer 0's
    bars = html_figures(at)["ctx_length"]
    assert bars["rows"] == ["money", "bank", "grows"]
    x = model.word_vectors()[[model.tokenizer.id_of(t) for t in ("money", "bank", "grows")]]
    short = _softmax_rows(x.astype(np.float64) @ x.T.astype(np.float64))[1]
    long = _softmax_rows(zero[:3].astype(np.float64) @ zero[:3].T.astype(np.float64))[1]
    expected = np.stack([short, long], axis=1).ravel()  # bar by bar: a row per token
    np.testing.assert_allclose(bars["numbers"], expected, atol=0.0051)


def test_context_page_says_when_the_run_drops_the_shared_word():
    at = run_page(CONTEXT, query={"ctx_a": "x " * 510 + "bank"})
    assert_no_exception(at)
    assert "lies beyond the 510 word pieces a run keeps" in _texts(at)


# ---- page 2: three jobs, three matrices; all at once, blind to order ----------------------------
def test_rows_that_pick_themselves_count_the_diagonal_alone_at_the_row_max_a_tie_no_win():
    weights = np.array([[0.6, 0.4, 0.0], [0.7, 0.2, 0.1], [0.1, 0.1, 0.8]])
    assert qkv.rows_that_pick_themselves(weights) == 2
    assert qkv.rows_tied_with_another(weights) == 0
    # rows 0 and 1 are two copies of one word: each ties with the other, and neither wins
    tied = np.array([[0.4, 0.4, 0.2], [0.4, 0.4, 0.2], [0.3, 0.3, 0.4]], dtype=np.float32)
    assert qkv.rows_that_pick_themselves(tied) == 1
    assert qkv.rows_tied_with_another(tied) == 2


def _own_is_largest(weights: np.ndarray) -> tuple[int, int]:
    """(rows whose own weight beats every other key's by more than 1e-6, rows whose own weight
    another key comes within 1e-6 of): a tie is no win, as on page 8."""
    others = weights.copy()
    np.fill_diagonal(others, -np.inf)
    gap = weights.diagonal() - others.max(axis=1)  # (n,)
    return int(np.sum(gap > 1e-6)), int(np.sum(np.abs(gap) <= 1e-6))


def _qkv_counts(x: np.ndarray) -> tuple[tuple[int, int], tuple[int, int]]:
    """Page 1's softmax(X Xᵀ) and the page's default random head (d_k 8, seed 0), counted."""
    projections = qkv.random_projections(x.shape[1], 8, seed=0)
    query, key = x @ projections.w_query, x @ projections.w_key
    head = _softmax_rows(query @ key.T / np.sqrt(8))
    return _own_is_largest(_softmax_rows(x @ x.T)), _own_is_largest(head)


def _counted(count: int, tied: int, n: int) -> str:
    return f"{count} of {n} rows" + (
        f" (in {tied} more, another key ties it: no win)" if tied else ""
    )


@pytest.mark.parametrize("sentence", [SENTENCE, "the bank by the river and the bank of the town"])
def test_qkv_page_counts_the_rows_whose_own_key_wins(model, sentence):
    """A repeated word's copies have equal rows of X and tie exactly: no copy wins."""
    at = run_page(QKV, text=sentence)
    assert_no_exception(at)
    x = model.run(sentence).static.astype(np.float64)  # (n, d): what Steps 1-6 read
    (own, own_tied), (here, here_tied) = _qkv_counts(x)
    n = len(x)
    texts = _texts(at)
    assert f"to itself in {_counted(own, own_tied, n)}" in texts, texts
    assert f"goes to the token itself in {_counted(here, here_tied, n)}" in texts
    verdict = (  # the conclusion follows the two counts
        "looking and being found have come apart" if here < own else "here they have not"
    )
    assert f"{_counted(here, here_tied, n)}: {verdict}" in texts
    if sentence != SENTENCE:  # the repeated pieces tie, and the page says why
        assert own + own_tied == n and own_tied >= 2 and "tie for the largest weight" in texts


@pytest.mark.parametrize("source", ["random", "trained"])
def test_a_head_is_blind_to_order_until_positions_are_added(model, source):
    trace = model.run(SENTENCE)
    projections = (
        qkv.random_projections(model.d_model, 8, seed=0)
        if source == "random"
        else qkv.head_projections(model, 2, 5)
    )
    test = qkv.order_test(
        model, trace.input_ids, trace.segments, trace.special, trace.tokens, projections, scale=True
    )
    order = positional.shuffle_order(trace.n_tokens, 0, trace.segments, trace.special)
    assert test.shuffled_tokens == tuple(trace.tokens[i] for i in order) and test.moved
    assert test.shuffled_tokens[0] == "[CLS]" and test.shuffled_tokens[-1] == "[SEP]"

    def head(x: np.ndarray) -> np.ndarray:  # float64, from the projections' arrays
        query = x @ projections.w_query + projections.b_query
        key = x @ projections.w_key + projections.b_key
        value = x @ projections.w_value + projections.b_value
        return _softmax_rows(query @ key.T / np.sqrt(projections.d_k)) @ value

    ids = np.array(trace.input_ids)
    for positions, measured in (
        (False, test.gap_without_positions),
        (True, test.gap_with_positions),
    ):
        out = head(_embedding_rows(model, ids, positions))
        out_shuffled = head(_embedding_rows(model, ids[order], positions))
        expected = float(np.abs(out_shuffled - out[order]).max())
        assert measured == pytest.approx(expected, abs=1e-3 * max(1.0, expected)), positions
    assert test.gap_without_positions < 1e-4 * test.largest_output  # rounding only
    assert test.gap_with_positions > 0.05 * test.largest_output  # a real difference


def test_qkv_page_shows_both_gaps_and_points_to_positions():
    at = run_page(QKV, text=SENTENCE, query={"qkv_section": "8 · All at once"})
    assert_no_exception(at)
    texts = _texts(at)
    assert "8 pieces take 8 steps" in texts and "Vaswani et al. (2017)" in texts
    without, with_positions = (float(metric.value) for metric in at.metric)
    assert without < 1e-4 < 0.1 < with_positions
    assert "positional" in [link.proto.page for link in at.get("page_link")]
    # a sentence with one word has nothing to shuffle
    at = run_page(QKV, text="bank", query={"qkv_section": "8 · All at once"})
    assert_no_exception(at)
    assert any("something to shuffle" in info.value for info in at.info)


# ---- page 5: why the residual stream, LayerNorm and the bend; encoders and decoders ------------
@pytest.fixture(scope="module")
def reference(model):
    from core.reference import load_reference

    return load_reference(model.model_dir)


def test_sublayer_sizes_before_and_after_each_norm_match_transformers(model, reference):
    """‖x + a‖, ‖h + f‖ (what each LayerNorm receives), ‖y‖, cos(x, x + a) and the share of
    negative GELU inputs, against the tensors transformers' BertModel passes between modules."""
    trace = model.run(SENTENCE)
    seen: dict[str, list[np.ndarray]] = {"sum_a": [], "sum_f": [], "y": [], "widened": []}

    def keep(name: str, of_input: bool):
        def hook(_module, inputs, output=None):
            tensor = inputs[0] if of_input else output
            seen[name].append(tensor[0].detach().double().numpy())

        return hook

    hooks = []
    for layer in reference.encoder.layer:
        norm_a, norm_f = layer.attention.output.LayerNorm, layer.output.LayerNorm
        hooks.append(norm_a.register_forward_pre_hook(keep("sum_a", True)))
        hooks.append(norm_f.register_forward_pre_hook(keep("sum_f", True)))
        hooks.append(norm_f.register_forward_hook(keep("y", False)))
        hooks.append(layer.intermediate.dense.register_forward_hook(keep("widened", False)))
    try:
        with torch.inference_mode():
            reference(
                input_ids=torch.tensor(np.array(trace.input_ids))[None],
                token_type_ids=torch.tensor(np.array(trace.segments))[None],
            )
    finally:
        for hook in hooks:
            hook.remove()
    assert all(len(tensors) == model.n_layers for tensors in seen.values())
    sizes = inside_layer.sublayer_sizes(model, trace)
    for layer in range(model.n_layers):
        x = trace.hidden_states[layer].astype(np.float64)
        sum_a = seen["sum_a"][layer]
        np.testing.assert_allclose(sizes.attention_sum[layer], np.linalg.norm(sum_a, axis=1), 1e-4)
        np.testing.assert_allclose(
            sizes.ffn_sum[layer], np.linalg.norm(seen["sum_f"][layer], axis=1), 1e-4
        )
        np.testing.assert_allclose(
            sizes.output[layer], np.linalg.norm(seen["y"][layer], axis=1), 1e-4
        )
        cosines = (x * sum_a).sum(axis=1) / (
            np.linalg.norm(x, axis=1) * np.linalg.norm(sum_a, axis=1)
        )
        np.testing.assert_allclose(sizes.kept_direction[layer], cosines, atol=1e-5)
        # a GELU input within rounding of 0 may fall either side: allow one unit per token
        off = (seen["widened"][layer] < 0).mean(axis=1)
        np.testing.assert_allclose(sizes.units_off[layer], off, atol=1.5 / model.dims.d_ff)
    # the LayerNorm brings the sums' spread of lengths back to one scale
    assert sizes.ffn_sum.max() / sizes.ffn_sum.min() > 3 * sizes.output.max() / sizes.output.min()


def test_activation_floor_is_the_lowest_gelu_output(model):
    """GELU(x) = x Φ(x), its minimum found here on a grid around x = -0.75 with math.erf."""
    lowest = min(
        x * 0.5 * (1 + math.erf(x / math.sqrt(2))) for x in (-1 + k * 1e-5 for k in range(50_001))
    )
    assert model.dims.activation == "gelu"
    assert inside_layer.activation_floor(model) == pytest.approx(lowest, abs=1e-7)
    assert round(lowest, 2) == -0.17


def test_weight_on_later_tokens_equals_explicit_loops(model):
    rng = np.random.default_rng(1)
    weights = rng.random((2, 3, 5, 5)).astype(np.float32)
    weights /= weights.sum(axis=-1, keepdims=True)
    total = 0.0
    for layer in range(2):
        for head in range(3):
            for i in range(5):
                total += sum(float(weights[layer, head, i, j]) for j in range(i + 1, 5))
    assert inside_layer.weight_on_later_tokens(weights) == pytest.approx(total / 30, rel=1e-6)
    assert inside_layer.weight_on_later_tokens(model.run(SENTENCE, causal=True).attentions) == 0.0
    assert inside_layer.weight_on_later_tokens(model.run(SENTENCE).attentions) > 0.05


def test_inside_layer_page_explains_the_stream_the_norm_and_the_bend(model):
    at = run_page(INSIDE, text=SENTENCE)
    assert_no_exception(at)
    texts = _texts(at)
    trace = model.run(SENTENCE)
    sizes = inside_layer.sublayer_sizes(model, trace)
    kept = sizes.kept_direction.mean(axis=1)
    assert f"cosine(x, x + a) = {kept.min():.2f}–{kept.max():.2f}" in texts
    assert f"h + f is {sizes.ffn_sum.min():.1f}–{sizes.ffn_sum.max():.1f} long" in texts
    assert f"after the LayerNorm are {sizes.output.min():.1f}–{sizes.output.max():.1f}" in texts
    off = sizes.units_off.mean(axis=1)
    assert f"{off.min():.0%}–{off.max():.0%} of them get a negative input" in texts
    assert "squeezed to between −0.17 and 0" in texts
    for source in ("He et al. (2016)", "Ba, Kiros & Hinton, 2016", "Xiong et al. (2020)"):
        assert source in texts
    # the encoder/decoder section: the measured share on later tokens, the three kinds, sources
    attentions = trace.attentions.astype(np.float64)
    later = np.mean(
        [np.triu(a, k=1).sum(axis=-1) for a in attentions.reshape(-1, *attentions.shape[2:])]
    )
    assert f"heads give {later:.0%} of a token's weight to tokens after it" in texts
    kinds = at.table[2].value
    assert _cells(kinds["kind"]) == ["encoder", "decoder", "encoder–decoder"]
    trained_to = _cells(kinds["trained to"])
    assert "masked-word prediction" in trained_to[0] and "next word piece" in trained_to[1]
    examples = _cells(kinds["example"])
    for source in ("Devlin et al., 2019", "Radford et al., 2018, 2019", "Vaswani et al., 2017"):
        assert any(source in cell for cell in examples), source
    assert "queries come from the decoder" in texts and "encoder's final output" in texts
    assert "Wang et al., 2020" in texts  # MiniLM's own training, not masked-word prediction


def test_inside_layer_page_under_the_causal_switch_says_why_the_share_is_zero():
    from conftest import ROOT
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    answer_every_question(at)  # the figures questions fold are drawn
    at.session_state["text"] = SENTENCE
    at.session_state["causal"] = True  # the sidebar's switch
    at.run()
    at.switch_page(INSIDE)
    at.run()
    assert_no_exception(at)
    texts = _texts(at)
    assert "give 0% of a token's weight" in texts and "causal mask is on" in texts


@pytest.mark.parametrize("name", ["empty", "html", "ten_thousand"])
def test_changed_pages_survive_bad_input(name):
    for page in (INSIDE, QKV):
        at = run_page(page, text=BAD_INPUTS[name])
        assert_no_exception(at)
    at = run_page(QKV, text=BAD_INPUTS[name], query={"qkv_section": "8 · All at once"})
    assert_no_exception(at)
    if name == "html":  # the shuffled pieces are shown as text, never as markup
        assert any("script" in element.value for element in at.text)
