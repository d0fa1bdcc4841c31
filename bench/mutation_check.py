"""Do the fast tests notice wrong math? Apply targeted mutations to a copy of core/ and see.

Each mutant below changes one thing in core/'s math: a sign, a transpose, an axis, an exponent,
a log base, a slice, a swapped argument. The script copies core/, tests/ and ui/ to a temporary
directory, writes one mutant at a time into the copy, runs the fast (non-browser) core tests
and the non-page tests of tests/test_explain.py, test_lab.py and test_course.py against it with
`pytest -x -m "not browser"` (in this process, so torch is imported once), and prints which
mutants survived (no test failed). The working tree is never touched. A mutant whose text no
longer occurs in core/ is reported as stale.

    python bench/mutation_check.py                 # every mutant (8-12 minutes on 2 busy cores)
    python bench/mutation_check.py --only heads    # mutants whose file or label contains "heads"
    python bench/mutation_check.py --only lab.py,words.py   # either text
    python bench/mutation_check.py --list          # list them, check each still applies

Mutants marked `equivalent` change the code without changing any result (the reason is given);
they are run and expected to survive, and are reported apart.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The fast suite: no browser, no AppTest, tiny random weights or the bundled MiniLM.
FAST_TESTS = [
    "tests/test_families.py",  # every family against transformers: first, it kills most
    "tests/test_core_forward.py",
    "tests/test_core_heads.py",
    "tests/test_core_scaling_learning.py",
    "tests/test_core_positional_geometry.py",
    "tests/test_attention.py",
    "tests/test_core_hooks.py",
    "tests/test_explain.py",
    "tests/test_lab.py",
    "tests/test_course.py",
]
# Tests that drive a whole page through AppTest: they need app.py and views/, which the copy
# does not hold, and they check what a page shows rather than the math (browser tests: -m).
PAGE_TESTS = [
    "tests/test_lab.py::test_page_trains_scrubs_and_keeps_earlier_runs",
    "tests/test_lab.py::test_a_copied_link_reopens_the_same_run",
    "tests/test_lab.py::test_hostile_link_values_are_clamped_or_ignored",
    "tests/test_lab.py::test_the_comparison_prose_says_what_the_counts_show",
    "tests/test_lab.py::test_the_comparison_shows_its_progress_or_its_trouble",
    "tests/test_course.py::test_by_hand_page_shows_numbers_a_learner_can_check",
    "tests/test_course.py::test_inside_layer_page_measures_both_sublayers",
    "tests/test_course.py::test_new_pages_survive_bad_input",
    "tests/test_course.py::test_changed_pages_state_the_corrected_claims",
    "tests/test_course.py::test_named_heads_show_their_role_on_the_example_they_are_shown_with",
]
# The test file to run first for each module (the rest follow, so any of them can kill).
FIRST_TEST = {
    "attention.py": "tests/test_attention.py",
    "transformer.py": "tests/test_families.py",
    "weights.py": "tests/test_core_forward.py",
    "text.py": "tests/test_core_forward.py",
    "multi_head.py": "tests/test_core_heads.py",
    "head_stats.py": "tests/test_core_heads.py",
    "scaling_masking.py": "tests/test_core_scaling_learning.py",
    "context.py": "tests/test_core_scaling_learning.py",
    "qkv.py": "tests/test_core_scaling_learning.py",
    "positional.py": "tests/test_core_positional_geometry.py",
    "embeddings.py": "tests/test_core_positional_geometry.py",
    **dict.fromkeys(
        [
            "rollout.py",
            "similarity.py",
            "saliency.py",
            "lens.py",
            "words.py",
            "explanations.py",
            "information_flow.py",
        ],
        "tests/test_explain.py",
    ),
    "lab.py": "tests/test_lab.py",
    **dict.fromkeys(["by_hand.py", "inside_layer.py", "head_roles.py"], "tests/test_course.py"),
}


NO_SHRINK = """
from hypothesis import Phase, settings

settings.register_profile("mutants", phases=[Phase.explicit, Phase.reuse, Phase.generate])
settings.load_profile("mutants")
"""


@dataclass(frozen=True)
class Mutant:
    file: str  # under core/
    old: str  # must occur exactly once in the file
    new: str
    label: str
    equivalent: str = ""  # why no result can change, for mutants expected to survive


M = Mutant
MUTANTS = [
    # ---- attention.py -------------------------------------------------------------------------
    M("attention.py", ".tril()", ".triu()", "causal mask: upper instead of lower triangle"),
    M(
        "attention.py",
        "return is_real.unsqueeze(0).expand(n, n)",
        "return is_real.unsqueeze(1).expand(n, n)",
        "padding mask: query axis instead of key axis",
    ),
    M(
        "attention.py",
        "return segments.unsqueeze(1) == segments.unsqueeze(0)",
        "return segments.unsqueeze(1) != segments.unsqueeze(0)",
        "segment mask: negated",
    ),
    M(
        "attention.py",
        "torch.matmul(query, key.transpose(-2, -1), out=out)",
        "torch.matmul(key, query.transpose(-2, -1), out=out)",
        "scores: K Qᵀ instead of Q Kᵀ (transposed)",
    ),
    M(
        "attention.py",
        "scores.mul_(d_head**-0.5)",
        "scores.mul_(d_head**0.5)",
        "scale: √d_head instead of 1/√d_head (exponent sign)",
    ),
    M(
        "attention.py",
        "scores.mul_(d_head**-0.5)",
        "scores.mul_(d_head**-1)",
        "scale: 1/d_head (exponent)",
    ),
    M(
        "attention.py",
        "d_head = query.shape[-1]",
        "d_head = query.shape[-2]",
        "scale: d_head read from the token axis",
    ),
    M(
        "attention.py",
        'return scores.masked_fill(~mask, float("-inf"))',
        'return scores.masked_fill(mask, float("-inf"))',
        "apply_mask: masks the allowed pairs",
    ),
    M(
        "attention.py",
        "return torch.softmax(scores, dim=-1, out=out)",
        "return torch.softmax(scores, dim=-2, out=out)",
        "softmax over queries instead of keys (axis)",
    ),
    M(
        "attention.py",
        "return attn_weights.masked_fill_(fully_masked, 0.0)",
        "return attn_weights",
        "fully masked row: uniform instead of zero",
    ),
    M(
        "attention.py",
        "output = attn_weights @ value  # each",
        "output = attn_weights.transpose(-2, -1) @ value  # each",
        "sdpa output: αᵀ V",
    ),
    M(
        "attention.py",
        "return x.view(*batch, n, n_heads, d_head).transpose(-3, -2)",
        "return x.view(*batch, n_heads, n, d_head)",
        "split_heads: reshape without the transpose",
    ),
    M(
        "attention.py",
        "return x.transpose(-3, -2).reshape(*batch, n, n_heads * d_head)",
        "return x.reshape(*batch, n, n_heads * d_head)",
        "merge_heads: reshape without the transpose",
    ),
    M(
        "attention.py",
        "return F.linear(x, self.weight, self.bias)",
        "return F.linear(x, self.weight.T, self.bias)",
        "projection: Wᵀ instead of W",
    ),
    M(
        "attention.py",
        'scores.masked_fill_(~mask, float("-inf"))',
        'scores.masked_fill_(mask, float("-inf"))',
        "multi-head: masks the allowed pairs",
    ),
    M(
        "attention.py",
        "head_outputs = head_outputs * head_keep.view(-1, 1, 1)",
        "head_outputs = head_outputs * (1 - head_keep.view(-1, 1, 1))",
        "head ablation inverted",
    ),
    M(
        "attention.py",
        "key = split_heads(weights.key(x_key_value), n_kv_heads)",
        "key = split_heads(weights.key(x_query), n_kv_heads)",
        "cross-attention: keys from the query sentence",
    ),
    M(
        "attention.py",
        "value = split_heads(weights.value(x_key_value), n_kv_heads)",
        "value = split_heads(weights.key(x_key_value), n_kv_heads)",
        "values through W_K",
    ),
    M(
        "attention.py",
        "head_outputs = attn_weights @ value  # (..., H, n_q, d_head)",
        "head_outputs = attn_weights.transpose(-2, -1) @ value  # (..., H, n_q, d_head)",
        "multi-head output: αᵀ V",
    ),
    # ---- transformer.py (the one forward path) -------------------------------------------------------------------------------
    M(
        "transformer.py",
        "        if self.options.causal:",
        "        if not self.options.causal:",
        "Trace.scores: causal mask when not causal",
    ),
    M(
        "transformer.py",
        "attention_scores(torch.tensor(queries), torch.tensor(keys), self.options.scale)",
        "attention_scores(torch.tensor(keys), torch.tensor(queries), self.options.scale)",
        "Trace.scores: K Qᵀ",
    ),
    M(
        "transformer.py",
        "attention_scores(torch.tensor(queries), torch.tensor(keys), self.options.scale)",
        "attention_scores(torch.tensor(queries), torch.tensor(keys), True)",
        "Trace.scores: always scaled",
    ),
    M(
        "transformer.py",
        "        return F.gelu(x)  # BERT's exact (erf) GELU",
        '        return F.gelu(x, approximate="tanh")',
        "activation: tanh GELU for gelu",
    ),
    M(
        "transformer.py",
        '            return F.gelu(x, approximate="tanh")',
        "            return F.gelu(x)",
        "activation: erf GELU for gelu_new",
    ),
    M(
        "transformer.py",
        "            return F.relu(x)",
        "            return F.gelu(x)",
        "activation: GELU for relu",
    ),
    M(
        "transformer.py",
        "        return torch.arange(n) + self.arch.position_offset",
        "        return torch.arange(n) + self.arch.position_offset + 1",
        "positions shifted by one",
    ),
    M(
        "transformer.py",
        "            x = x + self.segment_embeddings[rows]",
        "            x = x + self.segment_embeddings[1 - rows]",
        "segments swapped",
    ),
    M(
        "transformer.py",
        "h = self._layer_norm(x + attention.output, weights.attn_norm)",
        "h = self._layer_norm(x - attention.output, weights.attn_norm)",
        "residual: minus the attention output",
    ),
    M(
        "transformer.py",
        "return LayerSteps(attention, h, ffn, self._layer_norm(h + ffn, weights.ffn_norm))",
        "return LayerSteps(attention, h, ffn, self._layer_norm(h - ffn, weights.ffn_norm))",
        "residual: minus the feed-forward",
    ),
    M(
        "transformer.py",
        "return LayerSteps(attention, h, ffn, self._layer_norm(h + ffn, weights.ffn_norm))",
        "return LayerSteps(attention, h, ffn, self._layer_norm(h + ffn, weights.attn_norm))",
        "second LayerNorm uses the first one's weights",
    ),
    M(
        "transformer.py",
        "return F.layer_norm(x, (self.d_model,), weight, bias, self.dims.layer_norm_eps)",
        "return F.layer_norm(x, (self.d_model,), bias, weight, self.dims.layer_norm_eps)",
        "LayerNorm: γ and β swapped",
    ),
    M(
        "transformer.py",
        "return F.layer_norm(x, (self.d_model,), weight, bias, self.dims.layer_norm_eps)",
        "return F.layer_norm(x, (self.d_model,), weight, bias, 1e-1)",
        "LayerNorm: wrong ε",
    ),
    M(
        "transformer.py",
        "        keep[removed] = 0.0",
        "        keep[removed] = 1.0",
        "ablation keeps the head",
    ),
    M(
        "transformer.py",
        "removed = [head for (lyr, head) in ablate if lyr == layer]",
        "removed = [head for (lyr, head) in ablate if lyr != layer]",
        "ablation in the wrong layers",
    ),
    M(
        "transformer.py",
        "mask = causal_mask(x.shape[-2]) if options.causal else None",
        "mask = None",
        "causal switch ignored",
    ),
    M(
        "transformer.py",
        "        self.keys.append(attention.key)",
        "        self.keys.append(attention.query)",
        "Trace.keys holds queries",
    ),
    M(
        "transformer.py",
        "        self.values.append(attention.value)",
        "        self.values.append(attention.key)",
        "Trace.values holds keys",
    ),
    M(
        "transformer.py",
        "static=_readonly(self.word_embeddings[input_ids]),",
        "static=_readonly(self.position_embeddings[: len(input_ids)]),",
        "static vectors from the position table",
    ),
    M(
        "transformer.py",
        "        self.hidden_states = [embedded]",
        "        self.hidden_states = []",
        "hidden_states lose the embedding output",
    ),
    # ---- the other families (issue 37): killed by tests/test_families.py ----------------------
    M(
        "transformer.py",
        "h = x + attention.output",
        "h = x - attention.output",
        "pre-norm: minus the attention output",
    ),
    M(
        "transformer.py",
        "ffn = self._feed_forward(self._layer_norm(h, weights.ffn_norm), weights)",
        "ffn = self._feed_forward(self._layer_norm(h, weights.attn_norm), weights)",
        "pre-norm: feed-forward reads the attention norm",
    ),
    M(
        "transformer.py",
        "inverse_rms = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.dims.layer_norm_eps)",
        "inverse_rms = torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + self.dims.layer_norm_eps)",
        "RMSNorm: sum instead of mean",
    ),
    M(
        "transformer.py",
        "return weights.ffn_out(self._activation(weights.ffn_gate(h)) * weights.ffn_in(h))",
        "return weights.ffn_out(self._activation(weights.ffn_in(h)) * weights.ffn_gate(h))",
        "SwiGLU: gate and up swapped",
    ),
    M(
        "transformer.py",
        "            hidden = self._layer_norm(hidden, self.final_norm)",
        "            hidden = hidden",
        "readout without the final norm",
    ),
    M(
        "transformer.py",
        "return torch.cumsum(real, dim=-1) * real + padding_idx",
        "return torch.cumsum(real, dim=-1) * real + padding_idx - 1",
        "RoBERTa positions one row early",
    ),
    M(
        "attention.py",
        "return torch.cat((-x[..., half:], x[..., :half]), dim=-1)",
        "return torch.cat((x[..., half:], -x[..., :half]), dim=-1)",
        "rotary: turned the other way",
    ),
    M(
        "attention.py",
        "angles = torch.cat((angles, angles), dim=-1)",
        "angles = angles.repeat_interleave(2, dim=-1)",
        "rotary: adjacent pairs instead of halves",
    ),
    M(
        "attention.py",
        "return x.repeat_interleave(n_heads // n_kv_heads, dim=-3)",
        "return x.repeat(*([1] * (x.dim() - 3)), n_heads // n_kv_heads, 1, 1)",
        "grouped heads: tiled instead of repeated",
    ),
    M(
        "weights.py",
        "tensor = tensor.T.contiguous()  # Conv1D (in, out) -> Linear (out, in)",
        "tensor = tensor.contiguous()  # Conv1D (in, out) -> Linear (out, in)",
        "GPT-2 Conv1D not transposed",
    ),
    M(
        "weights.py",
        'for part, name in zip(fused.split(d, dim=0), ("query", "key", "value"), strict=True):',
        'for part, name in zip(fused.split(d, dim=0), ("key", "query", "value"), strict=True):',
        "GPT-2 fused qkv split in the wrong order",
    ),
    M(
        "text.py",
        '        return _visible(piece.replace("▁", " "))',
        "        return _visible(piece)",
        "readable pieces keep ▁",
    ),
    # ---- weights.py / text.py ------------------------------------------------------------------
    M(
        "weights.py",
        '"attention.self.query": "query",',
        '"attention.self.query": "key",',
        "name map: query read as key",
    ),
    M(
        "weights.py",
        '"attention.output.LayerNorm": "attn_norm",',
        '"attention.output.LayerNorm": "ffn_norm",',
        "name map: LayerNorms swapped",
    ),
    M(
        "weights.py",
        '.replace("LayerNorm.gamma", "LayerNorm.weight").replace(\n        "LayerNorm.beta", "LayerNorm.bias"\n    )',
        '.replace("LayerNorm.gamma", "LayerNorm.bias").replace(\n        "LayerNorm.beta", "LayerNorm.weight"\n    )',
        "legacy gamma/beta swapped",
    ),
    M(
        "weights.py",
        "name = name.removeprefix(prefix)",
        "name = name",
        "bert. prefix not removed",
    ),
    M(
        "text.py",
        "first_is_short = len(first) <= len(second)",
        "first_is_short = len(first) < len(second)",
        "truncation: tie goes the other way",
    ),
    M(
        "text.py",
        "keep_short = min(len(short), budget // 2)",
        "keep_short = min(len(short), (budget + 1) // 2)",
        "truncation: short side rounds up",
    ),
    M(
        "text.py",
        "segments += [1] * (keep_b + 1)",
        "segments += [0] * (keep_b + 1)",
        "second sentence gets segment 0",
    ),
    # ---- multi_head.py ------------------------------------------------------------------------------
    M(
        "multi_head.py",
        "per_head = w_o.T.reshape(",
        "per_head = w_o.reshape(",
        "W_O per head without the transpose (issue 10)",
    ),
    M(
        "multi_head.py",
        "return trace.attentions[layer] * value_norms[:, None, :]",
        "return trace.attentions[layer] * value_norms[:, :, None]",
        "norms broadcast over keys instead of queries",
    ),
    M(
        "multi_head.py",
        "value_norms = np.linalg.norm(transformed_values(model, trace, layer), axis=-1)",
        "value_norms = np.linalg.norm(transformed_values(model, trace, layer), ord=1, axis=-1)",
        "L1 instead of L2 norm",
    ),
    M(
        "multi_head.py",
        "return (values @ w_o).numpy()",
        "return (values @ w_o).numpy() ** 2",
        "transformed values squared",
    ),
    M(
        "multi_head.py",
        "return trace.attentions[layer] @ trace.values[layer]",
        "return trace.attentions[layer].transpose(0, 2, 1) @ trace.values[layer]",
        "head outputs: αᵀ V",
    ),
    M(
        "multi_head.py",
        "totals = norms.sum(axis=-1, keepdims=True)",
        "totals = norms.sum(axis=-2, keepdims=True)",
        "share: columns instead of rows",
    ),
    M(
        "multi_head.py",
        "return 0.5 * np.abs(attn_weights - share).sum(axis=-1).mean(axis=-1)",
        "return np.abs(attn_weights - share).sum(axis=-1).mean(axis=-1)",
        "gap without the ½",
    ),
    M(
        "multi_head.py",
        "return 0.5 * np.abs(attn_weights - share).sum(axis=-1).mean(axis=-1)",
        "return 0.5 * (attn_weights - share).sum(axis=-1).mean(axis=-1)",
        "gap without the absolute value",
    ),
    M(
        "multi_head.py",
        "return 0.5 * np.abs(attn_weights - share).sum(axis=-1).mean(axis=-1)",
        "return 0.5 * np.abs(attn_weights - share).sum(axis=-2).mean(axis=-1)",
        "gap summed over queries",
        equivalent="Σ over keys then mean over queries equals Σ over queries then mean over keys for a square (n, n) head: both are the total over all cells divided by n",
    ),
    M(
        "multi_head.py",
        "order = np.argsort(gap, axis=None)[::-1][:k]",
        "order = np.argsort(gap, axis=None)[:k]",
        "top disagreements: smallest first",
    ),
    M(
        "multi_head.py",
        "return projection.weight.detach().numpy(), projection.bias.detach().numpy()",
        "return projection.weight.T.detach().numpy(), projection.bias.detach().numpy()",
        "W_O transposed",
    ),
    # ---- head_stats.py -------------------------------------------------------------------------
    M(
        "head_stats.py",
        "logs = np.log2(weights,",
        "logs = np.log(weights,",
        "entropy in nats (log base)",
    ),
    M(
        "head_stats.py",
        "return np.maximum(-(weights * logs).sum(axis=-1, dtype=np.float64), 0.0)",
        "return np.maximum((weights * logs).sum(axis=-1, dtype=np.float64), 0.0)",
        "entropy sign",
    ),
    M(
        "head_stats.py",
        "return np.maximum(-(weights * logs).sum(axis=-1, dtype=np.float64), 0.0)",
        "return np.maximum(-(weights * logs).sum(axis=-2, dtype=np.float64), 0.0)",
        "entropy over queries (axis)",
    ),
    M(
        "head_stats.py",
        "is_cls = np.array([t == CLS for t in tokens])",
        "is_cls = np.array([t == SEP for t in tokens])",
        "on_cls counts [SEP]",
    ),
    M(
        "head_stats.py",
        "on_previous=_mean_offset_diagonal(shown, -1)",
        "on_previous=_mean_offset_diagonal(shown, 1)",
        "previous and next swapped",
    ),
    M(
        "head_stats.py",
        "diagonal = np.diagonal(weights, offset=offset, axis1=-2, axis2=-1)",
        "diagonal = np.diagonal(weights, offset=offset, axis1=-1, axis2=-2)",
        "offset diagonal transposed",
    ),
    M(
        "head_stats.py",
        "sink=parked >= sink_threshold,",
        "sink=parked < sink_threshold,",
        "sink flag inverted",
    ),
    M(
        "head_stats.py",
        "weights = np.where(keep, attn_weights, 0.0).astype(np.float32)",
        "weights = np.where(~keep, attn_weights, 0.0).astype(np.float32)",
        "without_specials keeps only specials",
    ),
    M(
        "head_stats.py",
        "rest = weights.sum(axis=-1, keepdims=True)  # (..., n, 1)",
        "rest = weights.sum(axis=-2, keepdims=True)  # (..., n, 1)",
        "without_specials: columns instead of rows",
    ),
    M(
        "head_stats.py",
        "return max(1, int(np.ceil(n / max_side)))",
        "return max(1, int(np.floor(n / max_side)))",
        "block size rounds down",
    ),
    M(
        "head_stats.py",
        "return (summed / sizes[:, None] / sizes[None, :]).astype(np.float32)",
        "return (summed / sizes[:, None] / sizes[:, None]).astype(np.float32)",
        "block mean: wrong column sizes",
    ),
    M(
        "head_stats.py",
        "return query_in[:, None] & key_in[None, :]",
        "return query_in[None, :] & key_in[:, None]",
        "pair mask transposed",
    ),
    M(
        "head_stats.py",
        'query_in = segments == (0 if which[0] == "A" else 1)',
        'query_in = segments == (0 if which[-1] == "A" else 1)',
        "pair mask reads the key side for queries",
    ),
    M(
        "head_stats.py",
        "strongest = selected.max(axis=(1, 2), keepdims=True)",
        "strongest = selected.max(axis=(0, 1), keepdims=True)",
        "stretch over the wrong axes",
    ),
    M(
        "head_stats.py",
        "strong = visible & (opacity >= min_opacity)",
        "strong = visible & (opacity > min_opacity)",
        "threshold strict: at 1.0 the strongest stretched line vanishes",
    ),
    M(
        "head_stats.py",
        'keep &= side[:, None] if token_side == "query" else side[None, :]',
        'keep &= side[None, :] if token_side == "query" else side[:, None]',
        "token side swapped",
    ),
    M(
        "head_stats.py",
        "start = int(np.clip(start, 0, n - size))",
        "start = int(np.clip(start, 0, n))",
        "window may run past n",
    ),
    M(
        "head_stats.py",
        'return sorted(shared, key=lambda token: -len(token.removeprefix("##")))',
        'return sorted(shared, key=lambda token: len(token.removeprefix("##")))',
        "shared pieces shortest first",
    ),
    # ---- scaling_masking.py ----------------------------------------------------------------------------
    M(
        "scaling_masking.py",
        "return 1.0 - np.asarray(cosines, dtype=np.float64)",
        "return np.asarray(cosines, dtype=np.float64) - 1.0",
        "how far moved: sign flipped",
    ),
    M(
        "scaling_masking.py",
        "scaled = np.outer(np.asarray(multipliers, dtype=np.float64), scores)",
        "scaled = np.outer(np.asarray(multipliers, dtype=np.float64), -np.asarray(scores))",
        "saturation of −scores",
    ),
    M(
        "scaling_masking.py",
        "MULTIPLIERS = np.geomspace(0.1, 100.0, 61)",
        "MULTIPLIERS = np.linspace(0.1, 100.0, 61)",
        "multipliers not log-spaced",
    ),
    M(
        "scaling_masking.py",
        "return float(row_entropy(softmax(self.raw)).mean())",
        "return float(row_entropy(softmax(self.scaled)).mean())",
        "raw entropy from scaled scores",
    ),
    M(
        "scaling_masking.py",
        '"variance of q·k/√d_k": [round(e.scaled_variance, 3) for e in experiments],',
        '"variance of q·k/√d_k": [round(e.raw_variance, 3) for e in experiments],',
        "table: raw variance in the scaled column",
    ),
    M(
        "scaling_masking.py",
        "scores = attention_scores(query, key, scale=trace.options.scale)  # (n, n)",
        "scores = attention_scores(query, key, scale=True)  # (n, n)",
        "causal view always scaled",
    ),
    M(
        "scaling_masking.py",
        "return cosine(default.hidden_states[-1], variant.hidden_states[-1])",
        "return cosine(default.hidden_states[-2], variant.hidden_states[-1])",
        "final cosine of the wrong layer",
    ),
    M(
        "scaling_masking.py",
        "most_moved = int(np.argmin(cosines))",
        "most_moved = int(np.argmax(cosines))",
        "most moved = least moved",
    ),
    M(
        "scaling_masking.py",
        "variant_entropy=row_entropy(variant_weights),",
        "variant_entropy=row_entropy(default_weights),",
        "variant entropy from the default run",
    ),
    M(
        "scaling_masking.py",
        "x_query = torch.from_numpy(np.array(trace_a.hidden_states[layer]))",
        "x_query = torch.from_numpy(np.array(trace_a.hidden_states[layer + 1]))",
        "cross-attention reads the layer's output",
    ),
    M(
        "scaling_masking.py",
        "x_query, x_key_value, model.attention_weights(layer), model.n_heads, scale=scale",
        "x_key_value, x_query, model.attention_weights(layer), model.n_heads, scale=scale",
        "cross-attention: sentences swapped",
    ),
    # ---- context.py and qkv.py ---------------------------------------------------------------------------
    M(
        "context.py",
        "output, attn_weights = parameter_free_attention(x_t, scale=False)",
        "output, attn_weights = parameter_free_attention(x_t, scale=True)",
        "parameter-free with 1/√d",
    ),
    M("context.py", "kept = ids[:limit]", "kept = ids[1 : limit + 1]", "static sentence shifted"),
    M(
        "qkv.py",
        "weight = projection.weight[rows].T",
        "weight = projection.weight[:, rows]",
        "head slice: columns instead of rows (transpose)",
    ),
    M(
        "qkv.py",
        "return x_t @ torch.from_numpy(weight) + torch.from_numpy(bias)",
        "return x_t @ torch.from_numpy(weight) - torch.from_numpy(bias)",
        "projection bias subtracted",
    ),
    M(
        "qkv.py",
        "dot = attention_scores(query, key, scale=False)  # (n, n)",
        "dot = attention_scores(query, key, scale=scale)  # (n, n)",
        "Q Kᵀ scaled",
    ),
    M(
        "qkv.py",
        "scores = apply_mask(attention_scores(query, key, scale=scale), mask)",
        "scores = apply_mask(attention_scores(key, query, scale=scale), mask)",
        "qkv scores transposed",
    ),
    M(
        "qkv.py",
        "output = attn_weights @ value  # (n, n) @ (n, d_v)",
        "output = attn_weights.T @ value  # (n, n) @ (n, d_v)",
        "qkv output αᵀ V",
    ),
    M(
        "qkv.py",
        "dots=products.sum(axis=1),",
        "dots=products.sum(axis=0),",
        "follow_query: dots over keys",
    ),
    M(
        "qkv.py",
        "weighted_values = weights[:, None] * result.value",
        "weighted_values = weights[None, :] * result.value.T",
        "follow_query: weighted values transposed",
    ),
    M(
        "qkv.py",
        "return attn_weights - attn_weights.T",
        "return attn_weights.T - attn_weights",
        "asymmetry sign",
    ),
    M(
        "qkv.py",
        "i, j = np.unravel_index(int(np.argmax(difference)), difference.shape)",
        "i, j = np.unravel_index(int(np.argmin(difference)), difference.shape)",
        "most asymmetric: argmin",
    ),
    M(
        "qkv.py",
        "torch.randn(d_model, d_k, generator=generator) * std for _ in range(3)",
        "torch.randn(d_model, d_k, generator=generator) * std**2 for _ in range(3)",
        "random projections: variance for std",
    ),
    # ---- positional.py -------------------------------------------------------------------------
    M(
        "positional.py",
        "return table - table.mean(axis=0)",
        "return table - table.mean(axis=1, keepdims=True)",
        "centred rows: each row's own mean, not the mean row",
    ),
    M(
        "positional.py",
        "return base ** (-2.0 * pair_index / d_model)",
        "return base ** (2.0 * pair_index / d_model)",
        "frequencies: exponent sign",
    ),
    M(
        "positional.py",
        "return base ** (-2.0 * pair_index / d_model)",
        "return base ** (-1.0 * pair_index / d_model)",
        "frequencies: exponent 1·i/d",
    ),
    M(
        "positional.py",
        "encoding[:, 0::2] = np.sin(angles)",
        "encoding[:, 0::2] = np.cos(angles)",
        "sine and cosine swapped",
    ),
    M(
        "positional.py",
        "return np.repeat(2.0 * np.pi / frequencies(d_model, base), 2)",
        "return np.repeat(np.pi / frequencies(d_model, base), 2)",
        "wavelength without the 2",
    ),
    M(
        "positional.py",
        "return max(1, int(n_positions - 1).bit_length())",
        "return max(1, int(n_positions).bit_length())",
        "bits for n instead of n - 1",
    ),
    M(
        "positional.py",
        "return 2.0 * bits - 1.0 if signed else bits",
        "return 1.0 - 2.0 * bits if signed else bits",
        "signed bits flipped",
    ),
    M(
        "positional.py",
        "centre = 1.5 * 2.0**bit - 0.5",
        "centre = 0.5 * 2.0**bit - 0.5",
        "smooth bit: wrong phase",
    ),
    M(
        "positional.py",
        "rotation[even, odd] = sin",
        "rotation[even, odd] = -sin",
        "rotation: sine sign",
    ),
    M(
        "positional.py",
        "rotated = encoding[:n_positions] @ rotation.T",
        "rotated = encoding[:n_positions] @ rotation",
        "rotation check without the transpose",
    ),
    M(
        "positional.py",
        "return vectors / np.where(norms > 0, norms, 1.0)",
        "return vectors / np.where(norms > 0, norms**2, 1.0)",
        "unit rows divided by ‖x‖²",
    ),
    M(
        "positional.py",
        "norms = np.linalg.norm(a64, axis=-1) * np.linalg.norm(b64, axis=-1)",
        "norms = np.linalg.norm(a64, axis=-1) + np.linalg.norm(b64, axis=-1)",
        "cosine: sum of norms",
    ),
    M(
        "positional.py",
        "dots = (a64 * b64).sum(axis=-1)",
        "dots = (a64 * b64).sum(axis=0)",
        "cosine: summed over rows (axis)",
    ),
    M(
        "positional.py",
        "diagonal = np.diagonal(similarity, offset=k)  # every pair",
        "diagonal = np.diagonal(similarity, offset=-k)  # every pair",
        "distance profile below the diagonal (wrong for a non-symmetric matrix)",
    ),
    M(
        "positional.py",
        "return 1.0 - float(np.sum(residual**2)) / total_ss if total_ss > 0 else 1.0",
        "return float(np.sum(residual**2)) / total_ss if total_ss > 0 else 1.0",
        "R² as 1 − R²",
    ),
    M(
        "positional.py",
        "j = np.where(i == j, (j + 1) % first.shape[0], j)",
        "j = j",
        "row pairs may compare a row with itself",
    ),
    M(
        "positional.py",
        "own_position = cos_positions[rows, rows]",
        "own_position = cos_positions[rows, ::-1][:, 0]",
        "own position read from the wrong row",
    ),
    M(
        "positional.py",
        "token_rank=1 + np.sum(cos_words > own_word[:, None], axis=1),",
        "token_rank=np.sum(cos_words > own_word[:, None], axis=1),",
        "token rank off by one",
    ),
    M(
        "positional.py",
        "inverse = np.argsort(order)  # inverse[original position] = new position",
        "inverse = order  # inverse[original position] = new position",
        "un-shuffle with the permutation, not its inverse",
    ),
    M(
        "positional.py",
        "keep = np.r_[0 : max_tokens - 1, len(input_ids) - 1]",
        "keep = np.r_[0:max_tokens]",
        "capped input loses its [SEP]",
    ),
    M(
        "positional.py",
        "return float(values.mean()), float(values.var())",
        "return float(values.mean()), float(values.std())",
        "spread: std for variance",
    ),
    # ---- embeddings.py ---------------------------------------------------------------------------
    M(
        "embeddings.py",
        'tables = [similarity_matrix(points.static[indices], "cosine")]',
        'tables = [similarity_matrix(points.static[indices], "dot")]',
        "cosine by layer: static table of dot products",
    ),
    M(
        "embeddings.py",
        "return tables[..., off].mean(axis=-1)",
        "return tables[..., ~off].mean(axis=-1)",
        "mean of the diagonal",
    ),
    M(
        "embeddings.py",
        "candidates = np.argpartition(-cos, k - 1, axis=1)[:, :k]",
        "candidates = np.argpartition(cos, k - 1, axis=1)[:, :k]",
        "nearest words: least similar",
    ),
    M(
        "embeddings.py",
        "return SharedPlane(both[:m], both[m:], cosines",
        "return SharedPlane(both[m:], both[:m], cosines",
        "shared plane: runs swapped",
    ),
    M(
        "embeddings.py",
        "static[m] = traces[s].static[p]",
        "static[m] = traces[s].static[p - 1]",
        "gathered static vector off by one",
    ),
    M(
        "embeddings.py",
        "return float(max(1.0, min(wanted, (n_points - 1) / 3.0)))",
        "return float(max(1.0, min(wanted, n_points / 3.0)))",
        "perplexity bound",
    ),
    M(
        "embeddings.py",
        "cos = np.where(own, -np.inf, cos)",
        "cos = np.where(~own, -np.inf, cos)",
        "contextual neighbours from the own sentence",
    ),
    # ---- a second round: the reductions and indices the first round left alone ----------------
    M(
        "attention.py",
        "fully_masked = torch.isneginf(scores.amax(dim=-1, keepdim=True))",
        "fully_masked = torch.isneginf(scores.amin(dim=-1, keepdim=True))",
        "fully masked = any key masked",
    ),
    M(
        "head_stats.py",
        '"layer": np.repeat(np.arange(n_layers), n_heads).tolist(),',
        '"layer": np.tile(np.arange(n_layers), n_heads).tolist(),',
        "table: layer column head-major",
    ),
    M(
        "head_stats.py",
        "return diagonal.astype(np.float64).mean(axis=-1)",
        "return diagonal.astype(np.float64).sum(axis=-1)",
        "offset diagonal summed, not averaged",
    ),
    M(
        "head_stats.py",
        "parked = (weights[..., is_cls | is_sep]).sum(axis=-1, dtype=np.float64).mean(axis=-1)",
        "parked = (weights[..., is_cls | is_sep]).sum(axis=-1, dtype=np.float64).max(axis=-1)",
        "sink from the most parked row",
    ),
    M(
        "head_stats.py",
        "on_sep=shown[..., is_sep].sum(axis=-1, dtype=np.float64).mean(axis=-1),",
        "on_sep=shown[..., is_sep].max(axis=-1).mean(axis=-1),",
        "on_sep counts one [SEP] only",
    ),
    M(
        "head_stats.py",
        "summed = np.add.reduceat(np.add.reduceat(matrix, starts, axis=-1), starts, axis=-2)",
        "summed = np.add.reduceat(np.add.reduceat(matrix, starts, axis=-2), starts, axis=-2)",
        "block pool: rows pooled twice",
    ),
    M(
        "head_stats.py",
        "entropy=row_entropy(shown).mean(axis=-1),",
        "entropy=row_entropy(shown).max(axis=-1),",
        "head entropy: max row, not mean",
    ),
    M(
        "multi_head.py",
        "return 0.5 * np.abs(attn_weights - share).sum(axis=-1).mean(axis=-1)",
        "return 0.5 * np.abs(attn_weights - share).max(axis=-1).mean(axis=-1)",
        "gap: max instead of sum",
    ),
    M(
        "qkv.py",
        "bias = projection.bias[rows] if projection.bias is not None",
        "bias = projection.bias[: model.d_head] if projection.bias is not None",
        "head bias: always head 0's",
    ),
    M(
        "qkv.py",
        "output=weighted_values.sum(axis=0),",
        "output=weighted_values.mean(axis=0),",
        "follow_query: mean instead of sum",
    ),
    M(
        "positional.py",
        "bits = (positions >> np.arange(n_bits)[None, :]) & 1",
        "bits = (positions >> np.arange(n_bits)[::-1][None, :]) & 1",
        "bits most significant first",
    ),
    M(
        "positional.py",
        "period = 2.0 ** (bit + 1)",
        "period = 2.0**bit",
        "smooth bit: half the period",
    ),
    M(
        "positional.py",
        "rotation[odd, even] = -sin",
        "rotation[odd, even] = sin",
        "rotation: lower sine sign",
    ),
    M(
        "positional.py",
        "rotation[odd, odd] = cos",
        "rotation[odd, odd] = -cos",
        "rotation: cosine sign",
    ),
    M(
        "positional.py",
        "total_ss = float(np.sum((values - values.mean()) ** 2)) if values.size else 0.0",
        "total_ss = float(np.sum(values**2)) if values.size else 0.0",
        "R²: total sum of squares not centred",
    ),
    M(
        "positional.py",
        "best_word, best_position = cos_words.max(axis=1), cos_positions.max(axis=1)",
        "best_word, best_position = cos_words.max(axis=1), cos_positions.max(axis=0)[: len(rows)]",
        "best other position over the wrong axis",
    ),
    M(
        "positional.py",
        "unshuffled = shuffled[:, :, inverse][:, :, :, inverse]",
        "unshuffled = shuffled[:, :, inverse][:, :, :, order]",
        "un-shuffle: columns with the permutation",
    ),
    M(
        "positional.py",
        "angles = positions * frequencies(d_model, base)[None, :]",
        "angles = positions * frequencies(d_model, base)[None, :] * 2",
        "sinusoid angle doubled",
    ),
    M(
        "embeddings.py",
        "flat = hidden.reshape(n_states * m, d).astype(np.float64)",
        "flat = hidden.transpose(1, 0, 2).reshape(n_states * m, d).astype(np.float64)",
        "trajectories: token-major flattening",
    ),
    M(
        "embeddings.py",
        "order = np.lexsort((candidates, -np.take_along_axis(cos, candidates, axis=1)), axis=1)",
        "order = np.lexsort((candidates, np.take_along_axis(cos, candidates, axis=1)), axis=1)",
        "neighbours worst first",
    ),
    M(
        "embeddings.py",
        "counts[token] = (seen | {int(s)}, n + 1)",
        "counts[token] = (seen | {int(s)}, n)",
        "word counts never count",
    ),
    M(
        "embeddings.py",
        "picked += [int(group[rank]) for group in by_sentence if rank < len(group)]",
        "picked += [int(group[-1 - rank]) for group in by_sentence if rank < len(group)]",
        "occurrences picked from the end",
    ),
    M(
        "text.py",
        "keep_long = min(len(long), budget - keep_short)",
        "keep_long = min(len(long), budget - keep_short - 1)",
        "truncation: one piece too few",
    ),
    M(
        "scaling_masking.py",
        "masked = apply_mask(scores, causal_mask(query.shape[0]))",
        "masked = apply_mask(scores, causal_mask(query.shape[0]).T)",
        "causal view: mask transposed",
    ),
    M(
        "transformer.py",
        "x = self.embed(input_ids, segments, options.positions)",
        "x = self.embed(input_ids, segments, True)",
        "positions switch ignored",
    ),
    M(
        "positional.py",
        "return np.clip(rows @ rows.T, -1.0, 1.0)",
        "return np.clip(rows @ rows.T * 2, -1.0, 1.0)",
        "cosine matrix scaled",
    ),
    M(
        "positional.py",
        "rows = unit_rows(vectors)\n    return np.clip",
        "rows = np.asarray(vectors, dtype=np.float64)\n    return np.clip",
        "cosine matrix without unit rows",
    ),
    M(
        "context.py",
        "in_b = set(tokens_b)",
        "in_b = set(tokens_a)",
        "shared tokens: every token of A",
    ),
    M(
        "head_stats.py",
        "if t not in SPECIAL_TOKENS]",
        "if t in SPECIAL_TOKENS]",
        "shared pieces: only [CLS]/[SEP]",
    ),
    # ---- rollout.py ----------------------------------------------------------------------------
    M(
        "rollout.py",
        "mean_heads.diagonal(dim1=1, dim2=2).add_(1.0)",
        "mean_heads.diagonal(dim1=1, dim2=2).add_(2.0)",
        "rollout residual: ½Ā + I instead of ½(Ā + I)",
    ),
    M(
        "rollout.py",
        "attentions.mean(axis=1, dtype=np.float32)",
        "attentions.mean(axis=0, dtype=np.float32)",
        "rollout: mean over layers instead of heads (axis)",
    ),
    M(
        "rollout.py",
        "torch.mm(matrices[layer], rolled[layer - 1], out=rolled[layer])",
        "torch.mm(rolled[layer - 1], matrices[layer], out=rolled[layer])",
        "rollout: layers multiplied in the wrong order",
    ),
    M(
        "rollout.py",
        "return rolled_top.mean(axis=0)",
        "return rolled_top.mean(axis=1)",
        "to_sentence: mean of rows instead of columns",
    ),
    M(
        "rollout.py",
        "layer, query, key = np.indices(capacities.shape).reshape(3, -1)",
        "layer, key, query = np.indices(capacities.shape).reshape(3, -1)",
        "flow graph: capacities transposed",
    ),
    M(
        "rollout.py",
        ".sqrt_().transpose(1, 2).contiguous().numpy()",
        ".sqrt_().contiguous().numpy()",
        "norm contributions: returned (key, query) instead of (query, key)",
    ),
    M(
        "rollout.py",
        "by_key.copy_(attention.transpose(1, 2))",
        "by_key.copy_(attention)",
        "norm contributions: a key's weights read as a query's",
    ),
    M(
        "rollout.py",
        "torch.bmm(gram[keys, :n_heads, :n_heads], alpha, out=mixed)",
        "torch.bmm(gram[keys, :n_heads, :n_heads].triu(), alpha, out=mixed)",
        "norm contributions: each pair of heads counted once, not twice",
    ),
    M(
        "rollout.py",
        "torch.bmm(gram[keys, :n_heads, :n_heads], alpha, out=mixed)",
        "torch.bmm(torch.diag_embed(gram[keys, :n_heads, :n_heads].diagonal(0, 1, 2)), alpha,"
        " out=mixed)",
        "norm contributions: the products of two different heads left out",
    ),
    M(
        "rollout.py",
        "torch.bmm(gram[keys, :n_heads, :n_heads], alpha, out=mixed)",
        "torch.bmm(gram[: keys.stop - start, :n_heads, :n_heads], alpha, out=mixed)",
        "norm contributions: every block reads the first keys' Gram matrices",
    ),
    M(
        "rollout.py",
        "torch.sum(mixed.mul_(alpha), dim=1, out=squared[index, keys])",
        "torch.sum(mixed, dim=1, out=squared[index, keys])",
        "norm contributions: the quadratic form without its outer weights",
    ),
    M(
        "rollout.py",
        "torch.sum(mixed.mul_(alpha), dim=1, out=squared[index, keys])",
        "torch.sum(mixed.mul_(alpha), dim=1, out=squared[index, : keys.stop - start])",
        "norm contributions: every block's squares written over the first keys'",
    ),
    M(
        "rollout.py",
        "torch.sum(mixed.mul_(alpha), dim=1, out=squared[index, keys])",
        "torch.sum(mixed.mul_(alpha), dim=1, out=squared[0, keys])",
        "norm contributions: every layer written into the first layer's slot",
    ),
    M(
        "rollout.py",
        "squared[index].diagonal().add_(2 * cross + gram[:, n_heads, n_heads])",
        "squared[index].diagonal().add_(cross + gram[:, n_heads, n_heads])",
        "norm contributions: cross term without the 2",
    ),
    M(
        "rollout.py",
        "squared[index].diagonal().add_(2 * cross + gram[:, n_heads, n_heads])",
        "squared[index].diagonal().add_(2 * cross + gram[:, n_heads - 1, n_heads])",
        "norm contributions: the residual's ‖x̃_i‖² read from the wrong Gram entry",
    ),
    M(
        "rollout.py",
        "squared[index].diagonal().add_(2 * cross + gram[:, n_heads, n_heads])",
        "squared[index][0].add_(2 * cross + gram[:, n_heads, n_heads])",
        "norm contributions: the skip connection added to the first key, not the diagonal",
    ),
    M(
        "rollout.py",
        "cross = (self_weights.T * gram[:, :n_heads, n_heads]).sum(dim=1)",
        "cross = (self_weights.T * gram[:, :n_heads, :n_heads].diagonal(0, 1, 2)).sum(dim=1)",
        "norm contributions: ‖ũ‖² in place of the cross term ũ·x̃",
    ),
    M(
        "rollout.py",
        "keys = slice(start, min(start + block, n))",
        "keys = slice(start, min(start + block - 1, n))",
        "norm contributions: a block leaves its last key out",
    ),
    M(
        "rollout.py",
        "stacked[n_heads] = _centre_and_scale(_read_only(trace.hidden_states[layer]), gamma)",
        "stacked[n_heads] = _read_only(trace.hidden_states[layer])",
        "norm contributions: the residual without LayerNorm's centring and γ",
    ),
    M(
        "rollout.py",
        "per_layer[layer] = _centre_and_scale(w_o, gamma)",
        "per_layer[layer] = w_o",
        "norm contributions: ũ without LayerNorm's centring and γ",
    ),
    M(
        "rollout.py",
        "return gamma * (vectors - vectors.mean(dim=-1, keepdim=True))",
        "return gamma * vectors",
        "norm contributions: LayerNorm's centring left out",
    ),
    M(
        "rollout.py",
        "sigma = torch.sqrt(pre_norm.var(dim=-1, unbiased=False)",
        "sigma = torch.sqrt(pre_norm.var(dim=-1, unbiased=True)",
        "norm contributions: σ with n − 1 (LayerNorm uses n)",
    ),
    # ---- similarity.py -------------------------------------------------------------------------
    M(
        "similarity.py",
        "return np.asarray(last_hidden, dtype=np.float64).mean(axis=0)",
        "return np.asarray(last_hidden, dtype=np.float64)[0]",
        "sentence vector: [CLS] instead of the mean",
    ),
    M(
        "similarity.py",
        "return unit_rows(mean_pooled(trace.hidden_states[-1])[None])[0]",
        "return unit_rows(mean_pooled(trace.hidden_states[-2])[None])[0]",
        "sentence vector from the second-last layer",
    ),
    M(
        "similarity.py",
        "return unit_rows(mean_pooled(trace.hidden_states[-1])[None])[0]",
        "return mean_pooled(trace.hidden_states[-1])",
        "sentence vector not scaled to length 1",
    ),
    M(
        "similarity.py",
        "cosine(sentence_embedding(first), sentence_embedding(second))",
        "cosine(sentence_embedding(first), sentence_embedding(first))",
        "similarity: first sentence with itself",
    ),
    # ---- saliency.py ---------------------------------------------------------------------------
    M(
        "saliency.py",
        "pooled = last_hidden.mean(dim=1)  # (B, d_model)",
        "pooled = last_hidden[:, 0]  # (B, d_model)",
        "target: [CLS] instead of mean pooling",
    ),
    M(
        "saliency.py",
        "if self.kind == SIMILARITY:",
        "if self.kind != SIMILARITY:",
        "target: cosine and projection swapped",
    ),
    M(
        "saliency.py",
        "return (gradient * np.array(trace.static, dtype=gradient.dtype)).sum(axis=-1)",
        "return np.abs(gradient * np.array(trace.static, dtype=gradient.dtype)).sum(axis=-1)",
        "gradient × input: unsigned",
    ),
    M(
        "saliency.py",
        "t = (torch.arange(steps, dtype=word_vectors.dtype) + 0.5) / steps",
        "t = torch.arange(steps, dtype=word_vectors.dtype) / steps",
        "IG: left Riemann sum instead of the midpoints",
    ),
    M(
        "saliency.py",
        "gap = float(scores.sum()) - (f_input - f_baseline)",
        "gap = float(scores.sum()) - (f_baseline - f_input)",
        "IG completeness gap: f(0) − f(x)",
    ),
    M(
        "saliency.py",
        "order = np.lexsort((positions, -np.asarray(scores, dtype=np.float64)[positions]))",
        "order = np.lexsort((positions, np.asarray(scores, dtype=np.float64)[positions]))",
        "ranking: lowest score first",
    ),
    M(
        "saliency.py",
        "removed = [frozenset(int(p) for p in rankings[name][:k]) for name in names]",
        "removed = [frozenset(int(p) for p in rankings[name][::-1][:k]) for name in names]",
        "deletion: removes the bottom of the ranking",
    ),
    M(
        "saliency.py",
        "values = target(_forward(model, trace, batch, batch_segments)).numpy()  # (U,)",
        "pooled = _forward(model, trace, batch, batch_segments).mean(dim=1); values = ("
        "pooled / pooled.norm(dim=-1, keepdim=True) @ torch.as_tensor(target.reference)).numpy()",
        "deletion: a cosine whatever f the gradients explain",
    ),
    # ---- lens.py -------------------------------------------------------------------------------
    M(
        "lens.py",
        "final = np.broadcast_to(hidden_states[-1], (n_states, n, d))",
        "final = np.broadcast_to(hidden_states[0], (n_states, n, d))",
        "token settling against the input layer",
    ),
    M(
        "lens.py",
        "return cosine(hidden_states.reshape(-1, d), final).reshape(n_states, n)",
        "return cosine(hidden_states.transpose(1, 0, 2).reshape(-1, d), final).reshape(n_states, n)",
        "token settling: token-major flattening",
    ),
    M(
        "lens.py",
        "return np.clip(pooled @ pooled[-1], -1.0, 1.0)",
        "return np.clip(pooled @ pooled[0], -1.0, 1.0)",
        "sentence settling against the input layer",
    ),
    M(
        "lens.py",
        "pooled = unit_rows(hidden_states.astype(np.float64).mean(axis=1))",
        "pooled = unit_rows(hidden_states.astype(np.float64)[:, 0])",
        "sentence settling: [CLS] instead of the mean",
    ),
    M(
        "lens.py",
        "pooled_second = unit_rows(second.astype(np.float64).mean(axis=1))",
        "pooled_second = unit_rows(first.astype(np.float64).mean(axis=1))",
        "similarity by layer: first sentence with itself",
    ),
    M(
        "lens.py",
        "return nearest_words(hidden_states[:, token], unit_table, k, allowed)",
        "return nearest_words(hidden_states[:, 0], unit_table, k, allowed)",
        "nearest by layer: always token 0",
    ),
    # ---- words.py ------------------------------------------------------------------------------
    M(
        "words.py",
        "joins = token.startswith(CONTINUATION) and len(token) > len(CONTINUATION)",
        "joins = token.startswith(CONTINUATION)",
        "a bare ## joins the word before",
    ),
    M(
        "words.py",
        'tokens[group[0]] + "".join(tokens[p][len(CONTINUATION) :] for p in group[1:])',
        'tokens[group[0]] + "".join(tokens[p] for p in group[1:])',
        "word labels keep the ##",
    ),
    M(
        "words.py",
        "return query_sums / sizes[:, None].astype(matrix.dtype)",
        "return query_sums",
        "word merge: queries summed, not averaged",
    ),
    M(
        "words.py",
        "return query_sums / sizes[:, None].astype(matrix.dtype)",
        "return query_sums / sizes[:, None].astype(matrix.dtype) / sizes",
        "word merge: keys averaged, not summed",
    ),
    M(
        "words.py",
        "return query_sums / sizes[:, None].astype(matrix.dtype)",
        "return query_sums / sizes[None, :].astype(matrix.dtype)",
        "word merge: columns divided by word size instead of rows",
    ),
    M(
        "words.py",
        "return np.add.reduceat(scores, word_starts(groups, scores.shape[-1]), axis=-1)",
        "return np.add.reduceat(scores, word_starts(groups, scores.shape[-1]), axis=-1)[::-1]",
        "word scores: words in reverse order",
    ),
    # ---- explanations.py and information_flow.py ----------------------------------------------------------------------------
    M(
        "information_flow.py",
        "return self.flow / self.flow.sum(axis=-1, keepdims=True)",
        "return self.flow / self.flow.sum(axis=-2, keepdims=True)",
        "flow shares: columns instead of rows",
    ),
    M(
        "information_flow.py",
        "last_attention=np.asarray(trace.attentions[-1], dtype=np.float64).mean(axis=0),",
        "last_attention=np.asarray(trace.attentions[0], dtype=np.float64).mean(axis=0),",
        "last-layer attention from layer 0",
    ),
    M(
        "explanations.py",
        '"rollout": rollout.to_sentence(self.rolled[-1]),',
        '"rollout": rollout.to_sentence(self.rolled[0]),',
        "rollout score after layer 0 instead of the top",
    ),
    M(
        "explanations.py",
        '"norm": rollout.to_sentence(self.norm_rolled[-1]),',
        '"norm": rollout.to_sentence(self.norm_rolled[0]),',
        "norm rollout score after layer 0 instead of the top",
    ),
    M(
        "explanations.py",
        "ranks = np.stack([average_ranks(np.asarray(s)[allowed]) for s in scores.values()])",
        "ranks = np.stack([np.asarray(s)[allowed] for s in scores.values()])",
        "rank agreement: Pearson on scores, not on ranks",
    ),
    M(
        "explanations.py",
        "mean_rank = np.bincount(group, weights=ranks) / np.bincount(group)",
        "mean_rank = np.bincount(group, weights=ranks)",
        "tied ranks summed, not averaged",
    ),
    M(
        "explanations.py",
        "return float((curve[1:] - curve[0]).mean()) if len(curve) > 1 else 0.0",
        "return float((curve[1:] - curve[-1]).mean()) if len(curve) > 1 else 0.0",
        "mean change from the end of the curve",
    ),
    M(
        "explanations.py",
        "return float(np.asarray(scores)[~saliency.removable(tokens)].sum())",
        "return float(np.asarray(scores)[saliency.removable(tokens)].sum())",
        "special share: the word pieces' share",
    ),
    M(
        "explanations.py",
        "fastest = [name for name, change in changes.items() if change <= lowest + tie]",
        "fastest = [name for name, change in changes.items() if change <= lowest]",
        "fastest falls: ties dropped",
    ),
    M(
        "explanations.py",
        "methods = {name: values for name, values in curves.items() if not is_random(name)}",
        "methods = dict(curves)",
        "split chance: the random orders counted as methods",
    ),
    M(
        "explanations.py",
        "return self.lowest < 0 and self.orders_beaten == self.n_orders",
        "return self.orders_beaten == self.n_orders",
        "fastest falls: a rising f can beat chance",
    ),
    M(
        "explanations.py",
        "return int(np.sum(change < np.asarray(chance) - tie))",
        "return int(np.sum(change < np.asarray(chance) + tie))",
        "orders beaten: a tie counts as beaten",
    ),
    M(
        "explanations.py",
        "wins += rolled > raw",
        "wins += rolled < raw",
        "paper check: counts raw attention's wins",
    ),
    # ---- lab.py --------------------------------------------------------------------------------
    M(
        "lab.py",
        "    if not stack.shared.positions:\n        return tokens",
        "    if stack.shared.positions:\n        return tokens",
        "lab: position switch inverted in the score lookup",
    ),
    M(
        "lab.py",
        "return (params.w_query.transpose(1, 2) @ params.w_key) * factors",
        "return (params.w_query.transpose(1, 2) @ params.w_query) * factors",
        "lab: keys through W_q",
    ),
    M(
        "lab.py",
        "per_query = ((attn_weights - wanted) ** 2).sum(dim=-1)  # (R, B, n)",
        "per_query = ((attn_weights - wanted) ** 2).mean(dim=-1)  # (R, B, n)",
        "squared loss: mean over keys, not sum",
    ),
    M(
        "lab.py",
        "counted = per_query.where(visible, 0.0)",
        "counted = per_query",
        "loss counts the queries whose target is hidden",
    ),
    M(
        "lab.py",
        "return targets <= torch.arange(targets.shape[-1])",
        "return targets < torch.arange(targets.shape[-1])",
        "reachable: a query may not see itself",
    ),
    M(
        "lab.py",
        "hit = on_target > best_other",
        "hit = on_target >= best_other",
        "accuracy: a tie counts as a hit",
    ),
    M(
        "lab.py",
        "factors = [d_head**-0.5 if settings.scale else 1.0 for settings in self.runs]",
        "factors = [d_head**0.5 if settings.scale else 1.0 for settings in self.runs]",
        "score factor: × √d_head (exponent sign)",
    ),
    M(
        "lab.py",
        "correction1, correction2 = 1 - self.beta1**t, 1 - self.beta2**t",
        "correction1, correction2 = 1 - self.beta2**t, 1 - self.beta1**t",
        "Adam: bias corrections swapped",
    ),
    M(
        "lab.py",
        "kind = tokens // 2  # ( and ) share kind 0",
        "kind = tokens % 2  # ( and ) share kind 0",
        "bracket kind: open/close instead of the pair",
    ),
    M(
        "lab.py",
        "w_query=normal(d_head, d_model, std=d_model**-0.5),",
        "w_query=normal(d_head, d_model, std=d_head**-0.5),",
        "lab init: W_q spread from d_head, not d_model",
    ),
    # ---- by_hand.py ----------------------------------------------------------------------------
    M(
        "by_hand.py",
        "row_sums = exponentials.sum(axis=1)  # (n,)",
        "row_sums = exponentials.sum(axis=0)  # (n,)",
        "by hand: column sums instead of row sums",
        equivalent="S = X Xᵀ is symmetric, so e^S is too and its column sums equal its row sums",
    ),
    M(
        "by_hand.py",
        "return ByHand(scores, exponentials, row_sums, attn_weights, attn_weights @ x)",
        "return ByHand(scores, exponentials, row_sums, attn_weights, attn_weights.T @ x)",
        "by hand: Y = αᵀ X",
    ),
    M(
        "by_hand.py",
        "shifted = sharpness * scores - np.max(sharpness * scores)",
        "shifted = scores - np.max(scores)",
        "soft lookup ignores the sharpness",
    ),
    M(
        "by_hand.py",
        "hard_weights[int(np.argmax(scores))] = 1.0",
        "hard_weights[int(np.argmin(scores))] = 1.0",
        "hard lookup: worst key",
    ),
    M(
        "by_hand.py",
        "return raw / raw.sum(axis=1, keepdims=True)",
        "return raw / raw.sum(axis=0, keepdims=True)",
        "dense mixing: columns sum to 1 instead of rows",
    ),
    M(
        "by_hand.py",
        "second.attn_weights[row],",
        "first.attn_weights[row],",
        "contrast: the first sentence's row twice",
    ),
    M(
        "by_hand.py",
        "projections=4 * n * d_model * d_model,",
        "projections=3 * n * d_model * d_model,",
        "layer cost: W_O not counted",
    ),
    M(
        "by_hand.py",
        "attention_cells=n_heads * n * n,",
        "attention_cells=n * n,",
        "attention cells of one head only",
    ),
    M(
        "by_hand.py",
        "return 2 * d_model + d_ff  # 2 n² d",
        "return d_model + d_ff  # 2 n² d",
        "break-even length",
    ),
    # ---- inside_layer.py ------------------------------------------------------------------------------
    M(
        "inside_layer.py",
        "_count(att.query.weight, att.query.bias, att.key.weight, att.key.bias)",
        "_count(att.query.weight, att.query.bias, att.key.weight)",
        "stages: key bias not counted",
    ),
    M(
        "inside_layer.py",
        "a, h, f = steps.attention.output, steps.mid_stream, steps.ffn_update",
        "a, h, f = steps.attention.output, steps.output, steps.ffn_update",
        "block: h read after the layer instead of between its sublayers",
    ),
    M(
        "inside_layer.py",
        "model.layer_steps(x, layer, mask, options.scale, keep, positions=options.positions)",
        "model.layer_steps(x, layer, mask, options.scale, None, positions=options.positions)",
        "block: removed heads ignored",
    ),
    M(
        "inside_layer.py",
        "return self.attention_update / (self.attention_update + self.ffn_update)",
        "return self.ffn_update / (self.attention_update + self.ffn_update)",
        "attention share: the feed-forward's share",
    ),
    M(
        "inside_layer.py",
        "sizes[name].append(value.norm(dim=-1).double().numpy())",
        "sizes[name].append(value.abs().sum(dim=-1).double().numpy())",
        "sublayer sizes: L1 instead of L2",
    ),
    M(
        "inside_layer.py",
        "mask = causal_mask(trace.n_tokens) if options.causal else None",
        "mask = None",
        "block: causal switch ignored",
    ),
    # ---- head_roles.py -------------------------------------------------------------------------
    M(
        "head_roles.py",
        "np.stack([weights[..., i, i - 1] for i in real",
        "np.stack([weights[..., i - 1, i] for i in real",
        "previous-token role: transposed",
    ),
    M(
        "head_roles.py",
        "np.stack([weights[..., i, i + 1] for i in real",
        "np.stack([weights[..., i + 1, i] for i in real",
        "next-token role: transposed",
    ),
    M(
        "head_roles.py",
        '"cls": weights[..., 1 : n - 1, 0],',
        '"cls": weights[..., 0, 1 : n - 1],',
        "[CLS] role: transposed",
    ),
    M(
        "head_roles.py",
        "weights[..., i, [j for j in real if j != i and tokens[j] == tokens[i]]].sum(-1)",
        "weights[..., i, [j for j in real if tokens[j] == tokens[i]]].sum(-1)",
        "same-word role counts the word itself",
    ),
    M(
        "head_roles.py",
        "means[role] = stacked.mean(axis=-1) if",
        "means[role] = stacked.max(axis=-1) if",
        "role score: max row, not mean",
    ),
    M(
        "head_roles.py",
        "rows[..., is_sep].sum(-1).mean(axis=(1, 2)),",
        "rows[..., is_sep].max(-1).mean(axis=(1, 2)),",
        "[SEP] share: one [SEP] only",
    ),
    M(
        "head_roles.py",
        "weight = float(trace.attentions[layer, head, second, first])",
        "weight = float(trace.attentions[layer, head, first, second])",
        "repeat example: earlier reads later",
    ),
    M(
        "head_roles.py",
        "held = sum(int(np.argmax(weights[i])) == i + step for i in rows)",
        "held = sum(int(np.argmax(weights[i])) == i - step for i in rows)",
        "role holds: the other neighbour",
    ),
    M(
        "head_roles.py",
        "both = [min(float(previous_head[i, i - 1]), float(next_head[i, i + 1])) for i in rows]",
        "both = [max(float(previous_head[i, i - 1]), float(next_head[i, i + 1])) for i in rows]",
        "neighbour focus: either role instead of both",
    ),
    # ---- scaling_masking.py, the padding mask ----------------------------------------------------------------------------
    M(
        "scaling_masking.py",
        "is_real = torch.arange(n_real + n_pad) < n_real",
        "is_real = torch.arange(n_real + n_pad) <= n_real",
        "padding: first [PAD] counted as real",
    ),
    M(
        "scaling_masking.py",
        "on_pads = weights[:, :, :n_real, n_real:].sum(-1).mean(axis=(1, 2))",
        "on_pads = weights[:, :, :, n_real:].sum(-1).mean(axis=(1, 2))",
        "weight on pads: [PAD] queries included",
    ),
    M(
        "scaling_masking.py",
        "on_pads = weights[:, :, :n_real, n_real:].sum(-1).mean(axis=(1, 2))",
        "on_pads = weights[:, :, :n_real, n_real:].max(-1).mean(axis=(1, 2))",
        "weight on pads: one [PAD] only",
    ),
    M(
        "scaling_masking.py",
        "segments = torch.tensor(list(encoded.segments) + [0] * n_pad)",
        "segments = torch.tensor(list(encoded.segments) + [1] * n_pad)",
        "[PAD] pieces in segment 1",
    ),
    M(
        "scaling_masking.py",
        "mask = padding_mask(is_real) if masked else None",
        "mask = None",
        "padding mask never applied",
    ),
]


def check(mutants: list[Mutant]) -> list[str]:
    """Mutants whose text does not occur exactly once in the current core/ (stale)."""
    problems = []
    for m in mutants:
        count = (ROOT / "core" / m.file).read_text().count(m.old)
        if count != 1:
            problems.append(f"{m.file}: {m.label!r} occurs {count} times")
    return problems


def run_tests(workdir: Path, first: str | None) -> tuple[bool, float]:
    """True when every fast test passed (the mutant survived), and the seconds it took.

    pytest runs in this process: torch, transformers and numpy are imported once, not once per
    mutant (on 2 busy cores an import of torch alone took 20 s of wall time). Everything loaded
    from the copy (core, the tests, their helpers) is dropped first, so each run imports the
    mutated core/ afresh.
    """
    import pytest

    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(workdir)):
            del sys.modules[name]
    tests = ([first] if first else []) + [t for t in FAST_TESTS if t != first]
    start = time.perf_counter()
    with open(os.devnull, "w") as sink, redirect_stdout(sink), redirect_stderr(sink):
        deselect = [arg for test in PAGE_TESTS for arg in ("--deselect", test)]
        args = ["-x", "-q", "-p", "no:cacheprovider", "-m", "not browser", *deselect]
        code = pytest.main([*args, *tests])
    return code == pytest.ExitCode.OK, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        help="comma-separated texts: run mutants whose file or label contains any of them",
    )
    parser.add_argument("--list", action="store_true", help="list mutants, check they apply")
    args = parser.parse_args()
    wanted = [text for text in (args.only or "").split(",") if text]
    chosen = [m for m in MUTANTS if not wanted or any(t in m.file or t in m.label for t in wanted)]
    stale = check(chosen)
    if args.list:
        for m in chosen:
            print(f"{m.file:15} {m.label}{'  (equivalent)' if m.equivalent else ''}")
        print("\n".join(stale) or f"all {len(chosen)} apply")
        return 1 if stale else 0
    if stale:
        print("stale mutants (update the list):\n  " + "\n  ".join(stale))
        return 1

    os.environ.update(PYTHONDONTWRITEBYTECODE="1", HF_HUB_OFFLINE="1")
    sys.dont_write_bytecode = True  # a mutant of the same size and second must not reuse a .pyc
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
        workdir = Path(tmp)
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
        shutil.copytree(ROOT / "core", workdir / "core", ignore=ignore)
        shutil.copytree(ROOT / "tests", workdir / "tests", ignore=ignore)
        shutil.copytree(ROOT / "ui", workdir / "ui", ignore=ignore)  # tests/test_lab.py imports it
        shutil.copy(ROOT / "pyproject.toml", workdir / "pyproject.toml")
        # A failing property needs no minimal example here, only the failure: no shrinking.
        (workdir / "conftest.py").write_text(NO_SHRINK)
        os.chdir(workdir)
        sys.path.insert(0, str(workdir))
        passed, seconds = run_tests(workdir, None)
        print(f"unmutated core/: fast tests {'pass' if passed else 'FAIL'} ({seconds:.0f} s)")
        if not passed:
            return 1
        survived, equivalent_survived = [], []
        for number, m in enumerate(chosen, 1):
            path = workdir / "core" / m.file
            original = path.read_text()
            path.write_text(original.replace(m.old, m.new))
            try:
                alive, seconds = run_tests(workdir, FIRST_TEST.get(m.file))
            finally:
                path.write_text(original)
            verdict = "SURVIVED" if alive else "killed"
            print(
                f"[{number:3}/{len(chosen)}] {verdict:8} {seconds:5.0f} s  {m.file}: {m.label}",
                flush=True,
            )
            if alive:
                (equivalent_survived if m.equivalent else survived).append(m)
        # The copy is back to the real core/: if leftovers of a mutant broke the process, every
        # later "kill" would be false, so the unmutated tests must still pass at the end.
        passed, seconds = run_tests(workdir, None)
        print(f"unmutated core/ again: fast tests {'pass' if passed else 'FAIL'} ({seconds:.0f} s)")
        os.chdir(ROOT)
        if not passed:
            return 1
    meaningful = [m for m in chosen if not m.equivalent]
    killed = len(meaningful) - len(survived)
    print(f"\nkilled {killed} of {len(meaningful)} meaningful mutants", end="")
    print(
        f"; {len(chosen) - len(meaningful)} equivalent ({len(equivalent_survived)} survived, as expected)"
    )
    for m in survived:
        print(f"  SURVIVED  {m.file}: {m.label}")
    for m in chosen:
        if m.equivalent:
            print(f"  equivalent  {m.file}: {m.label} — {m.equivalent}")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
