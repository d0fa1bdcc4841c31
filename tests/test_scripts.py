"""The browser scripts in ui/js/: valid JavaScript, and nothing DOMPurify would take for a tag."""

import re
import shutil
import subprocess

import pytest

from ui import scripts

SCRIPT_FILES = sorted(scripts.SCRIPTS_DIR.glob("*.js"))


def test_there_are_scripts():
    assert {path.name for path in SCRIPT_FILES} >= {"head_switch.js"}


@pytest.mark.parametrize("path", SCRIPT_FILES, ids=lambda p: p.name)
def test_script_is_valid_javascript(path):
    """node --check parses the file as a script without running it."""
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("no node on this machine")
    checked = subprocess.run([node, "--check", str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("path", SCRIPT_FILES, ids=lambda p: p.name)
def test_script_survives_dompurify(path):
    """st.html's DOMPurify drops a script whose text has "<" before a letter or "/"."""
    assert re.search(r"<[/\w!]", path.read_text(encoding="utf-8")) is None


@pytest.mark.parametrize("path", SCRIPT_FILES, ids=lambda p: p.name)
def test_element_wraps_the_file_unchanged(path):
    element = scripts.script_element(path.name)
    assert element == "<script>\n" + path.read_text(encoding="utf-8") + "</script>"
