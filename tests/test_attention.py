"""Properties of the attention math, checked on many random inputs (hypothesis)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from core import attention as attn

SETTINGS = settings(max_examples=40, deadline=None)


@st.composite
def qkv(draw, max_n: int = 9, max_d: int = 16):
    """Random float64 query/key/value with shapes (n, d) drawn from a seed."""
    n = draw(st.integers(1, max_n))
    n_k = draw(st.integers(1, max_n))
    d = draw(st.integers(1, max_d))
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    scale = draw(st.sampled_from([0.1, 1.0, 5.0]))
    query = torch.randn(n, d, generator=generator, dtype=torch.float64) * scale
    key = torch.randn(n_k, d, generator=generator, dtype=torch.float64) * scale
    value = torch.randn(n_k, d, generator=generator, dtype=torch.float64)
    return query, key, value


@SETTINGS
@given(qkv(), st.booleans())
def test_rows_sum_to_one(tensors, scale):
    query, key, value = tensors
    _, attn_weights = attn.scaled_dot_product_attention(query, key, value, scale=scale)
    torch.testing.assert_close(
        attn_weights.sum(-1), torch.ones(query.shape[0], dtype=torch.float64)
    )
    assert (attn_weights >= 0).all()


@SETTINGS
@given(qkv(), st.booleans())
def test_causal_weights_vanish_above_the_diagonal(tensors, scale):
    query, _, _ = tensors
    n = query.shape[0]
    _, attn_weights = attn.scaled_dot_product_attention(
        query, query, query, attn.causal_mask(n), scale
    )
    assert torch.all(attn_weights.triu(diagonal=1) == 0)
    torch.testing.assert_close(attn_weights.sum(-1), torch.ones(n, dtype=torch.float64))


@SETTINGS
@given(qkv(), st.data())
def test_masked_keys_get_zero_weight(tensors, data):
    query, key, value = tensors
    n_k = key.shape[0]
    is_real = torch.tensor(data.draw(st.lists(st.booleans(), min_size=n_k, max_size=n_k)))
    is_real[data.draw(st.integers(0, n_k - 1))] = True  # at least one key stays visible
    mask = attn.padding_mask(is_real)[:1].expand(query.shape[0], n_k)
    _, attn_weights = attn.scaled_dot_product_attention(query, key, value, mask)
    assert torch.all(attn_weights[:, ~is_real] == 0)
    torch.testing.assert_close(
        attn_weights.sum(-1), torch.ones(query.shape[0], dtype=torch.float64)
    )


def test_fully_masked_row_gives_zero_weights_not_nan():
    query = torch.randn(3, 4)
    mask = torch.tensor([[True, False, True], [False, False, False], [True, True, True]])
    output, attn_weights = attn.scaled_dot_product_attention(query, query, query, mask)
    assert not torch.isnan(attn_weights).any() and not torch.isnan(output).any()
    assert torch.all(attn_weights[1] == 0) and torch.all(output[1] == 0)
    torch.testing.assert_close(attn_weights[[0, 2]].sum(-1), torch.ones(2))


@SETTINGS
@given(qkv())
def test_unscaled_equals_plain_softmax_of_qk(tensors):
    query, key, value = tensors
    output, attn_weights = attn.scaled_dot_product_attention(query, key, value, scale=False)
    expected_weights = torch.softmax(query @ key.T, dim=-1)
    torch.testing.assert_close(attn_weights, expected_weights)
    torch.testing.assert_close(output, expected_weights @ value)


@SETTINGS
@given(qkv())
def test_scaled_equals_softmax_of_qk_over_sqrt_d(tensors):
    query, key, value = tensors
    _, attn_weights = attn.scaled_dot_product_attention(query, key, value, scale=True)
    d = query.shape[-1]
    torch.testing.assert_close(attn_weights, torch.softmax(query @ key.T / np.sqrt(d), dim=-1))


@SETTINGS
@given(qkv(), st.randoms(use_true_random=False))
def test_parameter_free_attention_is_permutation_equivariant(tensors, rng):
    x, _, _ = tensors
    order = list(range(x.shape[0]))
    rng.shuffle(order)
    perm = torch.tensor(order)
    y, attn_weights = attn.parameter_free_attention(x)
    y_perm, attn_weights_perm = attn.parameter_free_attention(x[perm])
    torch.testing.assert_close(y_perm, y[perm])
    torch.testing.assert_close(attn_weights_perm, attn_weights[perm][:, perm])


@SETTINGS
@given(st.integers(1, 6), st.integers(1, 8), st.integers(1, 6))
def test_split_then_merge_heads_is_identity(n_heads, n, d_head):
    x = torch.randn(n, n_heads * d_head)
    heads = attn.split_heads(x, n_heads)
    assert heads.shape == (n_heads, n, d_head)
    torch.testing.assert_close(
        heads[1 % n_heads], x[:, (1 % n_heads) * d_head : (1 % n_heads + 1) * d_head]
    )
    torch.testing.assert_close(attn.merge_heads(heads), x)


def _random_weights(d_model: int, generator: torch.Generator) -> attn.AttentionWeights:
    def proj() -> attn.Projection:
        w = torch.randn(d_model, d_model, generator=generator, dtype=torch.float64) / d_model**0.5
        return attn.Projection(w, torch.randn(d_model, generator=generator, dtype=torch.float64))

    return attn.AttentionWeights(proj(), proj(), proj(), proj())


@pytest.mark.parametrize("n_heads", [1, 2, 4])
def test_multi_head_attention_equals_per_head_loop(n_heads):
    """The batched computation equals the textbook loop over heads, concatenate, W_O."""
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(5, 8, generator=generator, dtype=torch.float64)
    weights = _random_weights(8, generator)
    result = attn.multi_head_attention(x, x, weights, n_heads)
    d_head = 8 // n_heads
    outputs = []
    for h in range(n_heads):
        cols = slice(h * d_head, (h + 1) * d_head)
        q, k, v = weights.query(x)[:, cols], weights.key(x)[:, cols], weights.value(x)[:, cols]
        outputs.append(torch.softmax(q @ k.T / d_head**0.5, -1) @ v)
    torch.testing.assert_close(result.output, weights.output(torch.cat(outputs, dim=-1)))


def test_removing_every_head_leaves_only_the_output_bias():
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(4, 8, generator=generator, dtype=torch.float64)
    weights = _random_weights(8, generator)
    result = attn.multi_head_attention(
        x, x, weights, 2, head_keep=torch.zeros(2, dtype=torch.float64)
    )
    torch.testing.assert_close(result.output, weights.output.bias.expand(4, 8))


def test_attention_hook_takes_value_then_point_as_every_model_hook():
    """hook(value, point), as core/transformer.py's Hook; None keeps the value."""
    generator = torch.Generator().manual_seed(5)
    x = torch.randn(4, 8, generator=generator, dtype=torch.float64)
    weights = _random_weights(8, generator)
    seen: list[str] = []

    def hook(value: torch.Tensor, point: str) -> torch.Tensor | None:
        assert isinstance(value, torch.Tensor) and isinstance(point, str)
        seen.append(point)
        if point == attn.ATTN_WEIGHTS:  # every query reads only the first key
            uniform = torch.zeros_like(value)
            uniform[..., 0] = 1.0
            return uniform
        return None

    result = attn.multi_head_attention(x, x, weights, 2, hook=hook)
    assert seen == [attn.QUERY, attn.KEY, attn.VALUE, attn.ATTN_WEIGHTS]
    # each row then carries the first token's value vector through W_O, computed here by hand
    expected = weights.output(weights.value(x)[0]).expand(4, 8)
    torch.testing.assert_close(result.output, expected)


def test_cross_attention_shapes():
    generator = torch.Generator().manual_seed(1)
    weights = _random_weights(8, generator)
    x_a, x_b = torch.randn(3, 8, dtype=torch.float64), torch.randn(6, 8, dtype=torch.float64)
    result = attn.multi_head_attention(x_a, x_b, weights, 4)
    assert result.attn_weights.shape == (4, 3, 6) and result.output.shape == (3, 8)


def test_segment_mask_keeps_sentences_apart():
    segments = torch.tensor([0, 0, 0, 1, 1])
    mask = attn.segment_mask(segments)
    assert mask[0, 2] and not mask[0, 3] and mask[4, 3]
