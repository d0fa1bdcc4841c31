"""Download buttons keep what they need, not the Trace: a visitor's open page must not pin a
Trace past the cache's bound (at 512 tokens one Trace is ~85 MB; twenty visitors, 1.7 GB)."""

from __future__ import annotations

import gc
import io
import weakref

import numpy as np
import streamlit as st

from ui import exports, sidebar, tables, traces


def _captured_data(monkeypatch) -> list:
    """Patch st.download_button to hand over the lazy `data` callable it was given."""
    captured: list = []
    monkeypatch.setattr(st, "download_button", lambda *a, data=None, **k: captured.append(data))
    return captured


def test_a_matrix_download_does_not_keep_the_block_it_was_sliced_from(monkeypatch):
    captured = _captured_data(monkeypatch)
    block = np.random.default_rng(0).random((6, 12, 8, 8)).astype(np.float32)  # (L, H, n, n)
    watch = weakref.ref(block)
    labels = [f"t{i}" for i in range(8)]
    tables.download_matrix(block[2, 5], labels, labels, "m")  # a view into the block
    expected = tables.matrix_csv(block[2, 5], labels, labels)
    del block
    gc.collect()
    assert watch() is None  # the button holds its own (n, n) copy only
    assert captured[0]() == expected


def test_a_trace_download_fetches_the_trace_again(model, monkeypatch):
    captured = _captured_data(monkeypatch)
    inputs = sidebar.Inputs("the bank of the river", None, model.name, scale=True, causal=False)
    trace = traces.trace(model, inputs.text)
    exports.download_trace(trace, traces.refetch(model, inputs), key="k")
    data = captured[0]
    closure_objects = [cell.cell_contents for cell in data.__closure__ or ()]
    assert all(obj is not trace for obj in closure_objects)  # not held by the button
    archive = np.load(io.BytesIO(data()))
    assert archive["attentions"].shape == trace.attentions.shape
    np.testing.assert_array_equal(archive["attentions"], trace.attentions)
