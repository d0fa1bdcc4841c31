"""The app's browser scripts: JavaScript files in ui/js/, read once when a module imports them.

A script lives in a .js file of its own, where a linter and an editor read it as JavaScript (not
inside a Python string, whose escapes it would need doubled). Its text is fixed, part of the
repository: no visitor text is ever part of it, so it may run through st.html with
unsafe_allow_javascript=True (tests/test_architecture.py lets only a module-level literal or a
script read by script_element(<a literal file name>) through).

Streamlit passes st.html through DOMPurify, which drops a script whose text holds "<" before a
letter or "/" (a tag, to it): a script writes "<b>" as "\\x3cb>" (tests/test_scripts.py checks).
"""

from __future__ import annotations

from pathlib import Path

SCRIPTS_DIR = Path(__file__).resolve().parent / "js"


def script_element(file_name: str) -> str:
    """'<script>\\n' + the text of ui/js/<file_name> + '</script>': an element for st.html."""
    return "<script>\n" + (SCRIPTS_DIR / file_name).read_text(encoding="utf-8") + "</script>"
