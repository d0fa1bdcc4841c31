"""What the server does at boot, before any visitor (serve.py): the imports every page needs, the
bundled model loaded and the Overview's first run computed, all into the caches that every
session shares. The first visitor of a server that just woke up then waits for the page only."""

from __future__ import annotations

import logging


def prepare() -> None:
    """Import the pages' modules, load the bundled model and run the default sentence through it
    with the default switches, as the Overview asks for it (one entry of the door's cache)."""
    import core

    # the modules app.py imports for every page (the imports are the work)
    from ui import display, door, model_map, models, page_switches, predict, sidebar, state, traces  # noqa: F401

    try:
        model = models.load_model(core.BUNDLED)
        traces.trace(model, sidebar.DEFAULT_TEXT)
    except (core.ModelUnavailable, door.ServerShort, MemoryError):
        # Nothing is lost: the first page does the same work, and says what went wrong.
        logging.getLogger("attention_explorer").warning("the head start at boot was skipped")
