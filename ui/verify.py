"""The "Verify against transformers" check: the same word pieces through transformers' own class
of the model's family (core/reference.py), through the one door like every other model run.

Both steps take a run slot and state their memory first: loading the reference (its own float32
copy of the weights and transformers' modeling code) and running it beside the Trace. The loaded
reference is cached like any result, so the least recently used one goes when memory is short.
"""

from __future__ import annotations

import streamlit as st
import torch

import core
from core.reference import REFERENCE_CLASSES, ParityReport, reference_bytes
from ui import door, housekeeping
from ui.escape import literal
from ui.models import label, load_model, policy

# Loading transformers' reference model adds its own copy of the weights (counted from the model
# below) and transformers' modeling code to the server's memory (bench/RESULTS.md, Cited in code).
REFERENCE_IMPORT_BYTES = 70 * door.MB


def reference_class(model: core.Transformer) -> str:
    """The transformers class the check runs for this model's family, e.g. "GPT2LMHeadModel"."""
    return REFERENCE_CLASSES[model.family]


def _reference_cost(model_name: str) -> int:
    # transformers reads the same checkpoint into float32 tensors of the same shapes
    return REFERENCE_IMPORT_BYTES + door.nbytes(load_model(model_name))


@door.shared("the transformers check", cost=_reference_cost)
def _reference_model(model_name: str) -> torch.nn.Module:
    from core.reference import load_reference

    model = load_model(model_name)
    with core.models.files_in_use(model_name, policy()):  # no eviction while transformers reads
        if not (model.model_dir / "config.json").is_file():
            raise core.ModelUnavailable(
                f"the files of {label(model)} were deleted from this server to make room "
                "for another download; load the model again to check it"
            )
        reference = load_reference(model.model_dir)
    # transformers' modeling code adds ~190,000 long-lived objects: out of gc's walk with them.
    housekeeping.freeze_long_lived_objects()
    return reference


def _report_cost(model_name: str, trace: core.Trace) -> int:
    return reference_bytes(load_model(model_name), trace.n_tokens)


@door.shared("the transformers check", cost=_report_cost)
def _report(model_name: str, trace: core.Trace) -> ParityReport:
    from core.reference import compare

    model = load_model(model_name)
    # the reference is loaded (or found) inside this run's slot: one visitor, one slot
    return compare(_reference_model(model_name), trace, model)


def parity_report(model: core.Transformer, trace: core.Trace) -> ParityReport:
    """Max |Δ| between a Trace (the model as trained) and transformers' class of its family on
    the same word pieces: every layer's attention and hidden state, a decoder's next-piece
    scores too."""
    return _report(model.name, trace)


def report_line(report: ParityReport) -> str:
    """The check's result in one sentence, every number from the report."""
    logits = (
        f", max |Δ| next-piece scores at {report.logits_compared} positions = "
        f"{report.max_abs_logit_diff:.2e}"
        if report.logits_compared
        else ""
    )
    return (
        f"`{report.reference_class}`: compared {report.layers_compared} layers of attention and "
        f"{report.hidden_states_compared} hidden states: max |Δ| attention = "
        f"{report.max_abs_attention_diff:.2e}, max |Δ| hidden states = "
        f"{report.max_abs_hidden_diff:.2e}{logits}."
    )


def show_check(model: core.Transformer, trace: core.Trace) -> None:
    """Run the check (the Verify button was pressed) and say what it found, or why it could
    not run."""
    try:
        with st.spinner(f"Running transformers' {reference_class(model)} (eager attention) …"):
            report = parity_report(model, trace)
    except core.ModelUnavailable as err:
        st.error(literal(err, max_chars=300), icon=":material/warning:")
        return
    st.success(report_line(report))
