"""The Overview's "Verify against transformers" (ui/verify.py) for each family, on tiny random
checkpoints loaded as a local user loads a folder: it names the class it ran, compares a
decoder's next-piece scores, and runs inside one of the door's run slots."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import run_page
from tiny_families import write_tiny_family

from core import reference
from ui import door, models, traces, verify

TEXT = "the river bank flows past the old mill."
# Written here, not read from core/reference.py: the class transformers names for each family.
EXPECTED_CLASS = {
    "bert": "BertModel",
    "roberta": "RobertaModel",
    "distilbert": "DistilBertModel",
    "gpt2": "GPT2LMHeadModel",
    "llama": "LlamaForCausalLM",
}
TOLERANCE = 1e-4  # float32 sums in another order; a wrong sign or transpose is off by ~0.1-1


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """family -> a tiny random checkpoint (2 layers), built when first asked for."""
    built: dict[str, object] = {}

    def get(family: str):
        if family not in built:
            folder = tmp_path_factory.mktemp(family) / "model"
            built[family] = write_tiny_family(folder, family, seed=3, n_layers=2)
        return built[family]

    return get


@pytest.mark.parametrize("family", list(EXPECTED_CLASS))
def test_the_check_names_its_class_compares_logits_and_runs_in_a_slot(
    family, folders, local_folders, monkeypatch
):
    model = models.load_model(str(folders(family)))
    trace = traces.trace(model, TEXT)
    slots_seen: list[bool] = []
    forward = reference._forward

    def spied(reference_model, run):
        slots_seen.append(door.inside_a_run())
        return forward(reference_model, run)

    monkeypatch.setattr(reference, "_forward", spied)
    report = verify.parity_report(model, trace)
    assert verify.reference_class(model) == report.reference_class == EXPECTED_CLASS[family]
    assert slots_seen == [True]  # one forward of the reference, inside a run slot
    assert report.layers_compared == 2 and report.hidden_states_compared == 3
    assert max(report.max_abs_attention_diff, report.max_abs_hidden_diff) < TOLERANCE
    if model.is_decoder:
        assert report.logits_compared == trace.n_tokens
        assert report.max_abs_logit_diff < TOLERANCE
    else:
        assert report.logits_compared == 0 and np.isnan(report.max_abs_logit_diff)
    assert EXPECTED_CLASS[family] in verify.report_line(report)


def test_the_logits_compared_are_the_models_own(folders, local_folders, monkeypatch):
    """A next-piece head off by 0.01 shows as 0.01 in the report: the scores are compared, not
    skipped."""
    model = models.load_model(str(folders("gpt2")))
    trace = traces.trace(model, TEXT)
    own_logits = model.logits
    monkeypatch.setattr(model, "logits", lambda hidden: own_logits(hidden) + 0.01)
    report = verify._report.__wrapped__(model.name, trace)
    assert report.max_abs_logit_diff == pytest.approx(0.01, abs=TOLERANCE)


def test_the_overview_button_runs_the_decoders_own_class(folders, local_folders):
    folder = str(folders("gpt2"))
    at = run_page("views/overview.py", TEXT, timeout=180, folder=folder)
    prose = " ".join(m.value for m in at.markdown)
    assert "`GPT2LMHeadModel`" in prose and "BertModel" not in prose
    next(b for b in at.button if b.label == "Verify against transformers").click().run()
    assert not at.exception
    (success,) = at.success
    assert success.value.startswith("`GPT2LMHeadModel`: compared 2 layers")
    assert "next-piece scores at" in success.value


def test_a_model_whose_files_were_deleted_gets_a_sentence(folders, local_folders, monkeypatch):
    import core

    model = models.load_model(str(folders("bert")))
    monkeypatch.setattr(model, "model_dir", folders("bert").parent / "deleted")
    with pytest.raises(core.ModelUnavailable, match="deleted from this server"):
        verify._reference_model.__wrapped__(model.name)
