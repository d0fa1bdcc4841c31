"""What the server does at boot, before any visitor (serve.py): the imports every page needs, the
bundled model loaded and the Overview's first run computed, all into the caches that every
session shares. The first visitor of a server that just woke up then waits for the page only."""

from __future__ import annotations

import logging


def prepare() -> None:
    """Import the pages' modules, load the bundled model and run the default sentence through it
    with the default switches, as the Overview asks for it (one entry of the door's cache)."""
    import core
    from ui import display, door, model_map, models, predict, state  # noqa: F401 (imports are the work)

    try:
        model = models.load_model(core.BUNDLED)
        state.trace(model, state.DEFAULT_TEXT)
    except (core.ModelUnavailable, door.ServerShort, MemoryError):
        # Nothing is lost: the first page does the same work, and says what went wrong.
        logging.getLogger("attention_explorer").warning("the head start at boot was skipped")
