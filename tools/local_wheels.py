"""Install a wheel that requirements.txt names by URL from a local folder holding that very file.

requirements.txt names torch's CPU build by URL (download.pytorch.org/whl/cpu/<file>.whl). pip
fetches a direct URL even when a copy of the file lies in its find-links folder, so a machine
that cannot reach the host (this project's CI machine) could not install it. This writes copies
of the requirement files, following `-r` includes, into a folder, with every such URL replaced
by the path of a local file of exactly the same name (release, build tag, Python and platform
tags), and says which. A URL with no file of that name stays as it is. Standard library only:
run_tests.sh runs it with the new, empty virtual environment's python.

    python tools/local_wheels.py OUT_DIR [requirements-test.txt]   # prints the copy to install
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

# a direct reference to a wheel: "name @ https://…/<file>.whl" (markers may follow)
WHEEL_URL = re.compile(r"@\s*(https://\S+?\.whl)")
INCLUDE = re.compile(r"^\s*(?:-r|--requirement)\s+(\S+)")


def find_links_folders() -> list[Path]:
    """pip's find-links entries that are local folders: PIP_FIND_LINKS, else pip's config."""
    entries = os.environ.get("PIP_FIND_LINKS", "")
    if not entries:
        for key in ("global.find-links", "install.find-links"):
            found = subprocess.run(
                [sys.executable, "-m", "pip", "config", "get", key],
                capture_output=True,
                text=True,
                check=False,
            )
            if found.returncode == 0:
                entries = found.stdout
                break
    folders = []
    for entry in entries.split():
        if entry.startswith("file:"):
            path = Path(unquote(urlparse(entry).path))
        elif "://" in entry:
            continue  # a web page of links: nothing to look up on this disk
        else:
            path = Path(entry)
        if path.is_dir():
            folders.append(path)
    return folders


def wheel_urls(text: str) -> list[str]:
    """Every wheel URL that a requirement file's lines name directly."""
    return WHEEL_URL.findall(text)


def file_name(url: str) -> str:
    """The wheel's file name in a URL: its last path segment, %2B read back as +."""
    return unquote(urlparse(url).path.rsplit("/", 1)[-1])


def local_copy(url: str, folders: list[Path]) -> Path | None:
    """A file of exactly the URL's file name in one of the folders, or None."""
    for folder in folders:
        candidate = folder / file_name(url)
        if candidate.is_file():
            return candidate.resolve()
    return None


def copy_with_local_wheels(
    requirements: Path, out_dir: Path, folders: list[Path]
) -> list[tuple[str, Path]]:
    """Copy requirements (and what it includes) into out_dir, local files for URLs: the swaps."""
    text = requirements.read_text()
    swaps = []
    for url in wheel_urls(text):
        local = local_copy(url, folders)
        if local is not None:
            text = text.replace(url, local.as_uri())
            swaps.append((url, local))
    (out_dir / requirements.name).write_text(text)
    for line in text.splitlines():
        include = INCLUDE.match(line)
        if include:  # pip reads an include relative to the including file: copy it alongside
            swaps += copy_with_local_wheels(requirements.parent / include[1], out_dir, folders)
    return swaps


def main() -> None:
    out_dir = Path(sys.argv[1])
    requirements = Path(sys.argv[2] if len(sys.argv) > 2 else "requirements-test.txt")
    out_dir.mkdir(parents=True, exist_ok=True)
    for url, local in copy_with_local_wheels(requirements, out_dir, find_links_folders()):
        print(f"local_wheels: {local} instead of {url} (the same file name)", file=sys.stderr)
    print(out_dir / requirements.name)


if __name__ == "__main__":
    main()
