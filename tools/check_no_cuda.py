"""Show that installing requirements.txt on Linux x86-64 brings no CUDA: no nvidia-*, no triton.

Resolves requirements.txt the way Community Cloud installs it, for each CPython 3.11-3.14 on
Linux x86-64, and lists what the resolution holds:

- uv (`uv pip compile --python-version 3.X --python-platform x86_64-manylinux_2_28`), which
  Community Cloud tries first;
- pip (`pip install --dry-run --report`), for every interpreter given with --python (pip
  evaluates markers for the interpreter that runs it).

torch's CPU wheel is named by URL in requirements.txt. Where download.pytorch.org cannot be
reached, each URL is swapped (uv: --override; pip: a copy of the file, as run_tests.sh does)
for a local file of exactly that name from pip's find-links folder. A Python whose wheel is not
on this disk gets a metadata stand-in: a wheel of that file name holding only the dist-info
(METADATA, so the same Requires-Dist) of a local CPU wheel of the same release, retagged. The
report says which. Then, as a control that the check can fail, uv resolves the plain
`torch==2.13.0` pin from PyPI for Linux x86-64, which must bring the CUDA packages.

    pip install uv   # once, into any environment
    python tools/check_no_cuda.py [--python /path/to/python3.12 ...] [--uv PATH]

Needs PyPI (metadata only: no wheel of torch is downloaded). Exits non-zero if a resolution
holds a CUDA package or a torch other than 2.13.0+cpu, or if the control does not.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from local_wheels import copy_with_local_wheels, file_name, find_links_folders, local_copy
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PYTHONS = ["3.11", "3.12", "3.13", "3.14"]
CUDA = re.compile(r"^(nvidia-.*|triton|pytorch-triton.*|cuda-.*)$")
LINUX_X86_64 = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64"}


def torch_url(requirements: Path, python: str) -> str:
    """The torch wheel URL whose marker holds on Linux x86-64 with this Python."""
    environment = LINUX_X86_64 | {"python_version": python, "python_full_version": f"{python}.0"}
    urls = []
    for line in requirements.read_text().splitlines():
        line = line.split(" #", 1)[0].strip()
        if line.startswith("torch"):
            requirement = Requirement(line)
            if requirement.url and (
                not requirement.marker or requirement.marker.evaluate(environment)
            ):
                urls.append(requirement.url)
    if len(urls) != 1:
        sys.exit(f"{len(urls)} torch wheel URLs apply on Linux x86-64, Python {python}")
    return urls[0]


def stand_in(name: str, template: Path, out_dir: Path) -> Path:
    """A wheel named `name` holding only the template wheel's dist-info, retagged to its tags."""
    tag = "-".join(Path(name).stem.split("-")[-3:])  # cp312-cp312-manylinux_2_28_x86_64
    files = {}
    with zipfile.ZipFile(template) as wheel:
        for member in wheel.namelist():
            folder, _, base = member.partition("/")
            if folder.endswith(".dist-info") and base in ("METADATA", "WHEEL"):
                text = wheel.read(member).decode()
                if base == "WHEEL":
                    text = re.sub(r"(?m)^Tag: .*$", f"Tag: {tag}", text)
                files[member] = text.encode()
    record_path = next(iter(files)).split("/")[0] + "/RECORD"
    record = [
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).decode().rstrip('=')},{len(data)}"
        for path, data in files.items()
    ]
    path = out_dir / name
    with zipfile.ZipFile(path, "w") as wheel:
        for member, data in files.items():
            wheel.writestr(member, data)
        wheel.writestr(record_path, "\n".join([*record, f"{record_path},,"]) + "\n")
    return path


def local_wheels_for(
    requirements: Path, folders: list[Path], out_dir: Path
) -> dict[str, tuple[Path, str]]:
    """Per Python: the local file for its torch URL, and whether it is the real file or a stand-in."""
    urls = {python: torch_url(requirements, python) for python in PYTHONS}
    real = {python: local_copy(url, folders) for python, url in urls.items()}
    templates = [path for path in real.values() if path is not None]
    if not templates:
        sys.exit("no CPU wheel of this torch release in pip's find-links folders: nothing to check")
    chosen = {}
    for python, url in urls.items():
        if real[python] is not None:
            chosen[python] = (real[python], "the wheel itself")
        else:
            made = stand_in(file_name(url), templates[0], out_dir)
            chosen[python] = (made, f"stand-in: the dist-info of {templates[0].name}")
    return chosen


def verdict(label: str, packages: dict[str, str], expect_cuda: bool = False) -> bool:
    """Print what a resolution holds; True when it is what it should be."""
    cuda = sorted(name for name in packages if CUDA.match(name))
    torch = packages.get("torch", "none")
    ok = bool(cuda) if expect_cuda else not cuda and torch == "2.13.0+cpu"
    print(
        f"{'ok  ' if ok else 'FAIL'} {label}: {len(packages)} packages, torch {torch}, "
        f"CUDA packages: {len(cuda)}{' (' + ', '.join(cuda[:4]) + (', …' if len(cuda) > 4 else '') + ')' if cuda else ''}"
    )
    return ok


def uv_packages(uv: str, requirements: Path, python: str, override: Path | None) -> dict[str, str]:
    """name -> version of uv's resolution for Linux x86-64 and this Python."""
    command = [uv, "pip", "compile", str(requirements), "--python-version", python,
               "--python-platform", "x86_64-manylinux_2_28", "--no-header", "--no-annotate",
               "--quiet", "--index-url", "https://pypi.org/simple"]  # fmt: skip
    if override is not None:
        command += ["--override", str(override)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"uv pip compile failed for Python {python}:\n{result.stderr}")
    packages = {}
    for line in result.stdout.splitlines():
        line = line.strip()
        if " @ " in line:
            name, url = line.split(" @ ", 1)
            packages[name.lower()] = file_name(url).split("-")[1]
        elif "==" in line:
            name, version = line.split("==", 1)
            packages[name.lower()] = version.split(";")[0].strip()
    return packages


def pip_packages(python: str, requirements: Path) -> dict[str, str]:
    """name -> version of pip's dry-run resolution with that interpreter."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        command = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                   "--disable-pip-version-check", "--report", str(report), "-r", str(requirements)]  # fmt: skip
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            sys.exit(f"pip's dry run failed with {python}:\n{result.stderr[-2000:]}")
        installs = json.loads(report.read_text())["install"]
    return {item["metadata"]["name"].lower(): item["metadata"]["version"] for item in installs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", default=[], help="interpreters for pip")
    parser.add_argument("--uv", default=shutil.which("uv"), help="the uv executable")
    args = parser.parse_args()
    requirements = ROOT / "requirements.txt"
    folders = find_links_folders()
    ok = True
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        wheels = local_wheels_for(requirements, folders, work)
        if args.uv:
            for python, (wheel, what) in wheels.items():
                override = work / f"override-{python}.txt"
                override.write_text(f"torch @ {wheel.as_uri()}\n")
                packages = uv_packages(args.uv, requirements, python, override)
                ok &= verdict(f"uv, Python {python}, torch from {what}", packages)
            pinned = work / "plain-pin.txt"
            pinned.write_text(
                re.sub(r"(?m)^torch[ @].*$", "", requirements.read_text()) + "\ntorch==2.13.0\n"
            )
            packages = uv_packages(args.uv, pinned, "3.12", None)
            ok &= verdict("control: uv, Python 3.12, plain torch==2.13.0 from PyPI", packages, True)
        else:
            print("uv not found: `pip install uv`, or pass --uv PATH (pip only this time)")
        for python in args.python or [sys.executable]:
            version = subprocess.run(
                [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True, text=True, check=True,
            ).stdout.strip()  # fmt: skip
            if version not in wheels:
                print(
                    f"skip {python}: Python {version} is not one requirements.txt names a wheel for"
                )
                continue
            copy = work / f"pip-{version}"
            copy.mkdir()
            wheel, what = wheels[version]
            copy_with_local_wheels(requirements, copy, [wheel.parent])
            packages = pip_packages(python, copy / "requirements.txt")
            ok &= verdict(f"pip, Python {version}, torch from {what}", packages)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
