"""Which model a visitor sees: the sidebar's model picker, the server's policy, the loaded models.

A link can carry any model name (`?model=other&custom_model=…`). Opening it loads only a listed
model; a name the server's policy refuses gets its one message and no button, any other hub id or
folder is shown with a Load button, and nothing happens before a visitor presses it. What the
server may load at all is core.models.ModelPolicy, read from the environment or from Streamlit
secrets (DEPLOY.md, "The public switch"); with nothing set it loads only the bundled model. Loaded
models are shared by every session (kept in ui.door's one cache); a failure is remembered for a
minute so retries stay cheap.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time

import streamlit as st

import core
from core.errors import ModelTooLarge
from core.models import ModelPolicy, policy_from_settings
from ui import (
    door,
)
from ui.escape import literal

OTHER_MODEL = "other"
FAILURE_MEMORY_S = 60.0  # a model that failed is not retried for a minute (the hub check: 1.5 s)
_CONFIRMED_KEY = "_confirmed_custom_model"  # the custom name this visitor pressed Load for
_FAILED_PICK_KEY = "_failed_model_pick"  # a listed model that failed: the picker goes back
_FAILURE_MESSAGE_KEY = "_model_failure_message"  # said once, on the run after the picker went back

_failures: dict[str, tuple[float, str]] = {}
_failures_lock = threading.Lock()
_loaded_names: set[str] = set()  # models this process has loaded once (they may be evicted since)


@st.cache_resource(show_spinner=False)
def policy() -> ModelPolicy:
    """The server's model policy (and memory budget): environment variables, or root-level
    Streamlit secrets."""
    st.secrets.load_if_toml_exists()  # root-level secrets become environment variables
    door.set_budget(door.budget_bytes(os.environ))  # ATTENTION_EXPLORER_MEMORY_MB, if a secret
    return policy_from_settings(os.environ)


def loading_policy() -> ModelPolicy:
    """The server's policy with its limit for one model: half the door's budget. The model is
    kept in the one cache like everything else; one that took more would leave too little room
    for what its pages compute."""
    return dataclasses.replace(policy(), max_model_bytes=door.cache_budget() // 2)


def _load_cost(name: str) -> int:
    # From config.json and the weight file's header, before a tensor is read (a hub model is
    # downloaded first, within the download caps): refused here if its float32 tensors take
    # more than half the budget (ModelUnavailable, which names the budget's setting).
    try:
        return core.models.load_size(name, loading_policy()).peak_bytes
    except ModelTooLarge as err:
        raise ModelTooLarge(
            f"{err} (half of its memory budget, setting {door.MEMORY_SETTING})"
        ) from err


@door.shared("loading the model", cost=_load_cost, keep=True)
def _load_model(name: str) -> core.Transformer:
    return core.load_model(name, loading_policy())


def _remembered_failure(name: str) -> str | None:
    with _failures_lock:
        failed = _failures.get(name)
    if failed and time.monotonic() - failed[0] < FAILURE_MEMORY_S:
        return failed[1]
    return None


def load_model(name: str) -> core.Transformer:
    """The shared model, or ModelUnavailable (remembered for a minute so retries stay cheap)."""
    reason = _remembered_failure(name)
    if reason:
        raise core.ModelUnavailable(reason)
    try:
        return _load_model(name)
    except core.ModelUnavailable as err:
        with _failures_lock:
            _failures[name] = (time.monotonic(), str(err))
        raise


def _load_with_spinner(name: str) -> core.Transformer:
    # A spinner costs time on every rerun (a timer thread; bench/RESULTS.md); only worth it the
    # first time a process loads the model.
    if name in _loaded_names:
        return load_model(name)
    label = "the bundled MiniLM" if name == core.BUNDLED else literal(name, max_chars=60)
    with st.spinner(f"Loading {label} …"):
        model = load_model(name)
    _loaded_names.add(name)
    return model


def _fits(suggestion: core.models.Suggestion) -> bool:
    """Whether the door would take this model: its float32 weights within half the budget."""
    return 2 * suggestion.held_mb * door.MB <= door.cache_budget()


def listed_models() -> dict[str, str]:
    """The picker's models (value -> label): the suggested ones this server's policy allows and
    its memory budget can hold (a listed model the server then refused would be a false offer)."""
    allowed = policy().hub_ids
    return {
        name: suggestion.label
        for name, suggestion in core.SUGGESTED_MODELS.items()
        if name == core.BUNDLED or ((allowed is None or name in allowed) and _fits(suggestion))
    }


def decoder_offer() -> str | None:
    """Which decoder a visitor of this server can load, in words ("distilgpt2 in the Model
    menu"), or None when it offers none: a page invites a visitor only to what the server takes."""
    listed = [name for name in listed_models() if core.SUGGESTED_MODELS[name].kind == "decoder"]
    if listed:
        return " or ".join(label_of(name) for name in listed) + " in the Model menu"
    chosen = policy()
    if chosen.hub_ids is None or chosen.local_folders:
        folder = " or a folder" if chosen.local_folders else ""
        return f"a GPT-2 or Llama-family checkpoint (Model → other, a hub id{folder})"
    return None


def label_of(name: str) -> str:
    """A model's name for prose, escaped, from its registry key: a suggested model's own name
    ("MiniLM-L6" for "minilm"), else the name as typed."""
    suggestion = core.SUGGESTED_MODELS.get(name)
    shown = suggestion.label.split(" · ")[0] if suggestion else name
    return literal(shown, max_chars=60)


def active_model(name: str) -> core.Transformer:
    """The chosen model; if it cannot be loaded, say why and fall back to the bundled one."""
    message = st.session_state.pop(_FAILURE_MESSAGE_KEY, None)
    if name != core.BUNDLED:
        try:
            return _load_with_spinner(name)
        except core.ModelUnavailable as err:
            message = (
                f"Could not load {literal(name, max_chars=60)}: {literal(err, max_chars=300)}. "
                "Showing the bundled MiniLM instead."
            )
            if name in core.SUGGESTED_MODELS:
                # The picker must not keep saying a model that is not shown: it goes back to the
                # bundled one (only possible before the widget is drawn, so in a new run).
                st.session_state[_FAILED_PICK_KEY] = name
                st.session_state[_FAILURE_MESSAGE_KEY] = message
                st.rerun()
            st.session_state.pop(_CONFIRMED_KEY, None)  # the Load button comes back
    if message:
        st.error(message, icon=":material/warning:")
    return _load_with_spinner(core.BUNDLED)


def _confirm(name: str) -> None:
    st.session_state[_CONFIRMED_KEY] = name


def model_picker() -> str:
    """The sidebar's model choice: a listed model, or a typed one once Load was pressed."""
    listed = listed_models()
    failed = st.session_state.pop(_FAILED_PICK_KEY, None)
    if failed is not None and st.session_state.get("model") == failed:
        st.session_state["model"] = core.BUNDLED  # before the widget exists: allowed
    local = policy().local_folders
    labels = {**listed, OTHER_MODEL: "other · hub id or folder" if local else "other · hub id"}
    choice = st.selectbox(
        "Model",
        list(labels),
        format_func=labels.__getitem__,
        key="model",
        bind="query-params",
        help="MiniLM-L6 (all-MiniLM-L6-v2) ships with the app: a BERT with 6 layers × 12 heads, "
        "d_model 384. Other checkpoints may be BERT, RoBERTa, DistilBERT (encoders), GPT-2 or "
        "the Llama family (decoders, e.g. SmolLM2); hub models need the internet once.",
    )
    if choice != OTHER_MODEL:
        return choice if choice in listed else core.BUNDLED
    custom = st.text_input(
        "Hub id or local folder" if local else "Hub id",
        key="custom_model",
        bind="query-params",
        placeholder="e.g. distilgpt2 or /path/to/model" if local else "e.g. distilgpt2",
        max_chars=200,
    )
    name = (custom or "").strip()[:200]
    if not name:
        return core.BUNDLED
    try:
        policy().check(name)  # reads no disk and asks no network
    except core.ModelUnavailable as err:
        st.error(literal(err, max_chars=300), icon=":material/block:")
        return core.BUNDLED
    if st.session_state.get(_CONFIRMED_KEY) == name:
        return name
    st.button(
        f"Load {literal(name, max_chars=60)}",
        key="load_custom_model",
        on_click=_confirm,
        args=(name,),
        icon=":material/download:",
    )
    st.caption(
        "Nothing is loaded before you press the button; until then you see MiniLM. " + memory_note()
    )
    return core.BUNDLED


def memory_note() -> str:
    """What this server's limits mean for a model, in one sentence, from its settings: the
    download cap counts file bytes, and the door takes a model of half its budget at most."""
    chosen = loading_policy()
    download_mb = chosen.max_download_bytes // door.MB
    model_mb = (chosen.max_model_bytes or door.cache_budget()) // door.MB
    return (
        f"A hub model's files may take up to {download_mb:,} MB; in memory its weights take at "
        "least their file's size, twice it for half-precision weights, and this server holds "
        f"at most {model_mb:,} MB of weights for one model."
    )


def label(model: core.Transformer) -> str:
    """The model's name for prose and titles, escaped: "MiniLM-L6" for the bundled one, as the
    sidebar says it (the registry key "minilm" is not a name)."""
    return label_of(model.name)


def piece_text(model: core.Transformer, piece_id: int) -> str:
    """The vocabulary's text of one piece id (the tokenizer's, raw: escape it where shown)."""
    return model.tokenizer.token_of(piece_id)


def piece_scheme_note(trace: core.Trace) -> str:
    """Two sentences, read from the Trace, on how this model marks its pieces (WordPiece's ##,
    or a byte-level or SentencePiece space) and which special pieces its tokenizer adds."""
    if trace.piece_scheme == "wordpiece":
        marks = "Every piece after a word's first is marked `##`."
    else:
        marks = (
            "A piece that starts a new word carries the space before it, shown here as "
            f"{core.text.SPACE_MARK}."
        )
    first, last = (literal(trace.tokens[i]) for i in (0, -1))
    starts, ends = bool(trace.special[0]), bool(trace.special[-1]) and trace.n_tokens > 1
    if starts and ends:
        framing = f"The tokenizer wraps the pieces in {first} … {last}."
    elif starts:
        framing = f"The tokenizer puts {first} before the first piece."
    elif ends:
        framing = f"The tokenizer puts {last} after the last piece."
    else:
        framing = "The tokenizer adds no special piece."
    return f"{marks} {framing}"


def special_pieces_phrase(trace: core.Trace) -> str:
    """The special pieces this Trace holds, each once and escaped for Markdown: "[CLS] and
    [SEP]" for MiniLM, "<s>" for a Llama, "" for GPT-2, whose tokenizer adds none."""
    names = list(
        dict.fromkeys(
            t for t, is_special in zip(trace.tokens, trace.special, strict=True) if is_special
        )
    )
    shown = [literal(name, max_chars=40) for name in names]
    return " and ".join(shown) if len(shown) <= 2 else ", ".join(shown[:-1]) + " and " + shown[-1]
