"""The app's own folder of downloaded checkpoints: capped in bytes, and nothing deleted in use.

One folder per hub repository, models--owner--name (the Hugging Face cache layout). Before a
download, the repositories used least recently are deleted until the new files fit under the
folder's cap; a repository that a load is reading or a download is writing is never deleted,
and if only such repositories stand in the way the download is refused with a sentence.

Why a lock and a count: one server process serves every visitor from one thread per session.
Deciding what to delete, marking a repository as in use and reserving a download's bytes all
happen under one lock, so a session cannot delete a folder between another session's lookup and
its read. The guard is this process's own: two server processes sharing one folder would need
their own (Community Cloud runs one).
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

from core.errors import ModelUnavailable

REPO_PREFIX = "models--"

_lock = threading.Lock()
_readers: collections.Counter[Path] = collections.Counter()  # repository folder -> loads in it
_reserved: dict[Path, int] = {}  # repository folder -> bytes its running download will write


def repo_folder(download_dir: Path, repo_id: str) -> Path:
    """The folder that holds `repo_id`'s downloads ("owner/name" -> models--owner--name)."""
    return download_dir / (REPO_PREFIX + repo_id.replace("/", "--"))


def repo_id_of(folder: Path) -> str:
    return folder.name.removeprefix(REPO_PREFIX).replace("--", "/")


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under a folder, each counted once: snapshot links into blobs/ are
    links, not copies."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):  # a file deleted while we count
                status = os.lstat(os.path.join(root, name))
                if stat.S_ISREG(status.st_mode):
                    total += status.st_size
    return total


def _repositories(download_dir: Path) -> list[Path]:
    if not download_dir.is_dir():
        return []
    return [p for p in download_dir.iterdir() if p.is_dir() and p.name.startswith(REPO_PREFIX)]


def in_use(folder: Path) -> bool:
    """Whether a load is reading, or a download writing, this repository folder now."""
    with _lock:
        return _readers[folder] > 0


@contextlib.contextmanager
def using(download_dir: Path, repo_id: str) -> Iterator[Path]:
    """Hold a repository in use (found, downloaded, read) so that no eviction deletes it; it
    becomes the most recently used."""
    folder = repo_folder(download_dir, repo_id)
    with _lock:
        _readers[folder] += 1
        if folder.is_dir():
            with contextlib.suppress(OSError):
                folder.touch()  # most recently used: deleted last
    try:
        yield folder
    finally:
        with _lock:
            _readers[folder] -= 1
            if _readers[folder] <= 0:
                del _readers[folder]
                _reserved.pop(folder, None)


def make_room(download_dir: Path, repo_id: str, new_bytes: int, max_bytes: int) -> list[str]:
    """Reserve new_bytes for repo_id's download, deleting the least recently used repositories
    not in use until everything fits under max_bytes; the ids deleted. ModelUnavailable when it
    cannot fit: larger than the cap, or the room is held by repositories in use.

    Called inside using(download_dir, repo_id): the reservation lasts as long as that does."""
    target = repo_folder(download_dir, repo_id)
    if new_bytes > max_bytes:
        raise ModelUnavailable(
            f"its files take {new_bytes / 1e6:,.0f} MB, more than this server keeps of all "
            f"downloads together ({max_bytes / 1e6:,.0f} MB)"
        )
    with _lock:
        if _readers[target] <= 0:
            raise RuntimeError("make_room is called inside using() of the same repository")
        # every other repository on disk, and downloads under way that have written nothing yet
        others = set(_repositories(download_dir))
        others |= {p for p in _reserved if p.parent == download_dir}
        others.discard(target)
        sizes = {p: max(folder_bytes(p), _reserved.get(p, 0)) for p in others}
        held = sum(size for p, size in sizes.items() if _readers[p] > 0)
        if held + new_bytes > max_bytes:
            raise ModelUnavailable(
                "this server's download folder is full of models in use right now; try again "
                "in a minute"
            )
        removed = []
        used = sum(sizes.values())
        for folder in sorted(others, key=_last_used):  # least recently used first
            if used + new_bytes <= max_bytes:
                break
            if _readers[folder] > 0:
                continue
            shutil.rmtree(folder, ignore_errors=True)
            used -= sizes[folder]
            removed.append(repo_id_of(folder))
        _reserved[target] = new_bytes
    return removed


def _last_used(folder: Path) -> float:
    try:
        return folder.stat().st_mtime
    except OSError:
        return 0.0
