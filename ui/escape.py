"""The one way visitor text reaches the screen: as literal characters, never as markup.

A sentence, a URL value, a model name or a word piece from a custom tokenizer is data. Both places
that would read it as markup decode HTML character references, so one encoding serves them all:
- Streamlit's Markdown (st.markdown, captions, alerts, widget labels) would turn `[x](url)` into a
  link, `![x](url)` into an image, `$x$` into LaTeX, `**x**` into bold and `:red[x]` into colour;
- plotly's labels (titles, ticks, hover, legends) read a small HTML dialect (`<b>`, `<a href>`).
Every character either of them treats as syntax becomes a numeric reference (`[` → `&#91;`), which
both decode back to the character itself and neither parses as syntax. Line breaks become spaces:
visitor text is shown inline, so it can never start a heading, a list or a code block.

One thing survives character references: Streamlit's Markdown turns web addresses and e-mail
addresses in decoded text into links (GitHub's "autolink literal" rule, applied after the
references are decoded). An invisible WORD JOINER (U+2060) inside `://`, `www.` and after `@`
breaks that rule and changes nothing a visitor sees.

Widgets that show options or cells as plain text (st.selectbox options, st.dataframe, st.text)
need no escaping, and must not get it: they would show `&#91;` literally.
"""

from __future__ import annotations

import re

# Markdown's punctuation (CommonMark's escapable set), HTML's <, >, & and ", Streamlit's $ (math)
# and : (:emoji:, :material/icon:, :colour[...]), and plotly's < > &.
_SYNTAX = re.compile(r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]""")
_LINE_BREAKS = re.compile(r"[\r\n\u2028\u2029\x0b\x0c\x85]+")
_AUTOLINK_SEAMS = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?<=@)", re.IGNORECASE)
WORD_JOINER = "\u2060"


def literal(text: object, max_chars: int | None = None) -> str:
    """`text` as a string that Markdown and plotly both show character for character.

    max_chars shortens it first (with "…"), so a 20,000-character paste cannot fill a message.
    """
    value = str(text)
    if max_chars is not None and len(value) > max_chars:
        value = value[: max_chars - 1] + "…"
    value = _LINE_BREAKS.sub(" ", value)
    value = _AUTOLINK_SEAMS.sub(WORD_JOINER, value)
    return _SYNTAX.sub(lambda match: f"&#{ord(match.group())};", value)
