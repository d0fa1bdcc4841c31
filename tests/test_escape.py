"""ui.escape.literal: visitor text is shown character for character by Markdown and by plotly.

The check is independent of the helper: it decodes the escaped text the way both renderers do
(HTML character references, html.unescape) and asks a real CommonMark parser (markdown-it, which
Streamlit's own dependency rich ships) whether any markup survived.
"""

from __future__ import annotations

import html
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from ui.escape import literal

HOSTILE = [
    "[Re-login](https://example.com)",
    "![x](https://example.com/pixel.png)",
    "<img src=x onerror=window.__x=1>",
    "**bold** _em_ `code` ~~gone~~",
    "$x^2$ and $$y$$",
    ":red[alarm] :material/home: :smile:",
    "# heading\n- item\n1. first",
    "<https://example.com> www.example.com https://example.com",
    "&lt;b&gt; &amp; &#60;",
    "a\\*b \\[c]",
    "| a | b |\n|---|---|",
]
_MD = MarkdownIt("commonmark").enable("table")


# GitHub's autolink-literal rule as Streamlit's Markdown applies it: on decoded text.
GFM_AUTOLINK = re.compile(r"(https?://|www(?=\.))[-.\w]+|[-.\w+]+@[-\w]+(\.[-\w]+)+", re.I)


def _decoded(escaped: str) -> str:
    return html.unescape(escaped)


def _visible(escaped: str) -> str:
    return _decoded(escaped).replace("\u2060", "")  # the word joiner is invisible


def _rendered_text(markdown: str) -> str:
    """The visible text of CommonMark's HTML output (tags stripped, references decoded)."""
    out = _MD.render(markdown)
    assert out.startswith("<p>") and out.rstrip().endswith("</p>"), out  # one plain paragraph
    inner = out.strip()[3:-4]
    assert "<" not in inner, f"markup survived: {out}"
    return _visible(inner)


@pytest.mark.parametrize("text", HOSTILE)
def test_markdown_shows_hostile_text_as_typed(text):
    shown = _rendered_text(literal(text))
    assert shown == text.replace("\n", " ")


@pytest.mark.parametrize("text", HOSTILE)
def test_no_markdown_or_plotly_syntax_character_survives(text):
    escaped = literal(text)
    # What is left besides references is letters, digits, spaces: nothing either parser reads.
    stripped = escaped.replace("&#", "").replace(";", "")
    assert not set(stripped) & set("[]()!<>*_`$:~#|\\&\n")
    assert _visible(escaped) == text.replace("\n", " ")  # plotly's entity decoding


@given(st.text(max_size=80))
@example("\u2060")  # a word joiner of the visitor's own
def test_any_text_round_trips_through_entity_decoding(text):
    escaped = literal(text)
    assert "\n" not in escaped and "\r" not in escaped
    # Decoding references (what plotly and Markdown do) gives the text back, line breaks as spaces.
    # (_visible drops word joiners, so one the visitor typed is dropped on both sides: invisible
    # either way; hypothesis found text="\u2060")
    decoded = _visible(escaped)
    assert decoded.replace(" ", "") == "".join(
        ch for ch in text if ch not in "\r\n\u2028\u2029\x0b\x0c\x85 \u2060"
    )


@pytest.mark.parametrize(
    "text", ["see https://example.com/x", "www.example.com", "mail a@b.co now", "HTTP://X.Y"]
)
def test_web_and_mail_addresses_cannot_become_links(text):
    assert GFM_AUTOLINK.search(text)  # the rule would link the raw text
    assert not GFM_AUTOLINK.search(_decoded(literal(text)))
    assert _visible(literal(text)) == text


def test_long_text_is_shortened_before_escaping():
    assert literal("a" * 50, max_chars=10) == "a" * 9 + "…"
    assert literal("[" * 50, max_chars=3) == "&#91;&#91;…"
