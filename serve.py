"""The server's entry point: `streamlit run serve.py` serves app.py, and starts its heavy imports
(torch, the own transformer) at boot, while the first visitor's browser is still fetching the page.

Without it, the first visitor's script run would begin only once the browser has connected, and
would then wait for torch to import. Imports are shared by every session of the process, so the
page finds them done. (Pages and tests can still run app.py directly: it works the same, just
without this head start.)
"""

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import streamlit as st


def _import_ahead() -> None:
    """Import what the first page imports, off the server's event loop."""
    from ui import warm_start

    warm_start.prepare()


@asynccontextmanager
async def _head_start(_app: st.App) -> AsyncIterator[None]:
    threading.Thread(target=_import_ahead, name="head-start", daemon=True).start()
    yield


app = st.App("app.py", lifespan=_head_start)
