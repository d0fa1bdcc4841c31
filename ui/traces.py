"""The Trace cache: a run of the model on the sidebar's text (or any text), computed through
ui.door once per (model, text, pair, switches) in one of its run slots, kept in its one cache and
shared read-only by every session, so sharing cannot leak one visitor's edit to another.
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st
import torch

import core
from ui import cut_notice, door, models, sidebar, state
from ui.models import load_model

# One torch thread per forward pass. Streamlit runs each browser session in its own thread, and
# on 2 cores a multi-threaded torch op collapses as soon as another session competes for the
# cores (bench/RESULTS.md, Cited in code); a single thread barely slows down. Community Cloud gives 0.078-2 cores, so the same
# choice holds there.
torch.set_num_threads(1)


# ---- traces ----------------------------------------------------------------------------------
# A Trace is computed through ui.door: once per (model, text, pair, switches), in one of the
# door's run slots, and kept in its one cache while the memory budget allows (at 512 word pieces
# on MiniLM one Trace holds ~96 MB, mostly its attention weights: 6 layers x 12 heads x 512 x 512
# float32).
def _trace_cost(model_name: str, text: str, pair: str | None, **_: object) -> int:
    model = load_model(model_name)
    return model.run_bytes(door.pieces(model, text, pair))


@door.shared("this run", cost=_trace_cost)
def _cached_trace(
    model_name: str,
    text: str,
    pair: str | None,
    scale: bool,
    causal: bool,
    positions: bool,
    ablate: tuple[tuple[int, int], ...],
) -> core.Trace:
    model = load_model(model_name)
    return model.run(
        text, pair, scale=scale, causal=causal, positions=positions, ablate=frozenset(ablate)
    )


def trace(
    model: core.Transformer,
    text: str,
    pair: str | None = None,
    *,
    scale: bool = True,
    causal: bool | None = None,
    positions: bool = True,
    ablate: frozenset | set | tuple = (),
) -> core.Trace:
    """The cached Trace of a run (raises EmptyInput for empty text). causal None is the model's
    nature (a decoder's mask on, an encoder's off), one cache entry with the explicit value."""
    causal = model.is_decoder if causal is None else bool(causal)
    return _cached_trace(
        model.name, text, pair or None, scale, causal, positions, tuple(sorted(ablate))
    )


def trace_or_stop(
    model: core.Transformer, inputs: sidebar.Inputs, **switches: object
) -> core.Trace:
    """The Trace of the sidebar's text with its switches; on bad input, a message and end_page()."""
    options = {"scale": inputs.scale, "causal": inputs.causal, **switches}
    try:
        result = trace(model, inputs.text, inputs.pair, **options)  # type: ignore[arg-type]
    except core.EmptyInput as err:
        st.info(f"{err} Enter a sentence in the sidebar to begin.", icon="✍️")
        state.end_page()
    if result.truncated:
        end = cut_notice.ends_on(
            result.tokens, result.segments.tolist(), result.piece_scheme, result.special
        )
        st.warning(
            cut_notice.notice(
                result.n_pieces, result.n_tokens, models.label(model), model.max_positions, end
            ),
            icon="✂️",
        )
    return result


def refetch(
    model: core.Transformer, inputs: sidebar.Inputs, **switches: object
) -> Callable[[], core.Trace]:
    """A callable that fetches the sidebar's Trace again (from the cache, or recomputed).

    For lazy download buttons: holding the Trace itself would pin ~96 MB per visitor at 512
    tokens for as long as their page is open, whatever the cache's bound.
    """
    name, text, pair = model.name, inputs.text, inputs.pair
    options = {"scale": inputs.scale, "causal": inputs.causal, **switches}
    return lambda: trace(load_model(name), text, pair, **options)  # type: ignore[arg-type]
