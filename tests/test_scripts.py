"""The browser scripts in ui/js/: valid JavaScript, and nothing DOMPurify would take for a tag."""

import re

import pytest

from ui import scripts

SCRIPT_FILES = sorted(scripts.SCRIPTS_DIR.glob("*.js"))


def test_there_are_scripts():
    assert {path.name for path in SCRIPT_FILES} >= {"head_switch.js"}


# Each source compiled as a function body, never run: a syntax error comes back with its file's
# name. The engine is chromium's, the one the browser tests already drive, so no other runtime
# (node) is needed and the check cannot be skipped for want of one.
COMPILE_JS = """
sources => Object.entries(sources).flatMap(([name, source]) => {
  try { new Function(source); return []; }
  catch (error) { return [`${name}: ${error.name}`]; }
})
"""


@pytest.mark.browser
def test_every_script_compiles_in_the_browser(browser):
    """Chromium parses every file in ui/js/; a broken source beside them is reported, so the
    check can fail."""
    sources = {path.name: path.read_text(encoding="utf-8") for path in SCRIPT_FILES}
    sources["broken.js"] = "const unclosed = (1, 2;"
    page = browser.new_page()
    try:
        errors = page.evaluate(COMPILE_JS, sources)
    finally:
        page.close()
    assert errors == ["broken.js: SyntaxError"]


@pytest.mark.parametrize("path", SCRIPT_FILES, ids=lambda p: p.name)
def test_script_survives_dompurify(path):
    """st.html's DOMPurify drops a script whose text has "<" before a letter or "/"."""
    assert re.search(r"<[/\w!]", path.read_text(encoding="utf-8")) is None


@pytest.mark.parametrize("path", SCRIPT_FILES, ids=lambda p: p.name)
def test_element_wraps_the_file_unchanged(path):
    element = scripts.script_element(path.name)
    assert element == "<script>\n" + path.read_text(encoding="utf-8") + "</script>"
