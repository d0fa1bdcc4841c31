"""Terms a page uses before the page that teaches them: a short definition, and where it is taught.

The path (ui/path.py) teaches one idea per page, but a page cannot always wait: the Overview's
formula divides by √d_k four pages before 3 · Scaling explains why. A paragraph that uses such a
term passes help=terms.ahead(...) to st.markdown or st.caption; Streamlit draws a "?" beside it
that shows the definitions on hover or tap, each with a link to the page that teaches it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ui import path


@dataclass(frozen=True)
class Term:
    definition: str  # one or two sentences, true of every model the app loads
    taught_in: str  # the view file of the page that teaches it
    where: str = ""  # the section of that page, when it is one of several


TERMS: dict[str, Term] = {
    "√d_k": Term(
        "d_k is the length of a query and of a key vector (d_head, the width of one head). "
        "Scores are divided by √d_k so that their typical size does not grow with that width.",
        "views/scaling_masking.py",
        "section 2",
    ),
    "causal mask": Term(
        "Lets each token attend only to itself and the tokens before it: the scores of later "
        "tokens are set to −∞ before the softmax, so their weights are exactly 0.",
        "views/scaling_masking.py",
        "section 4",
    ),
    "Q, K, V": Term(
        "A token's query (what it looks for), key (what it can be found by) and value (what it "
        "hands on), made from its vector by three learned matrices, W_Q, W_K and W_V.",
        "views/qkv.py",
    ),
    "head": Term(
        "One attention pattern with its own W_Q, W_K and W_V. A layer runs several heads side by "
        "side and joins their outputs.",
        "views/multi_head.py",
    ),
    "W_O": Term(
        "The output matrix of a layer's attention: it maps the heads' joined outputs back to one "
        "d_model-wide vector per token.",
        "views/multi_head.py",
        "in tab 2 · Back to one vector",
    ),
    "[CLS], [SEP]": Term(
        "Pieces a BERT-style tokenizer adds: [CLS] before the text, [SEP] after each sentence. "
        "They stand for no word, yet every token can attend to them, and in BERT many heads put "
        "much of their weight there (Clark et al., 2019).",
        "views/heatmaps.py",
        "section 3",
    ),
    "d_model, d_head": Term(
        "d_model is the length of every token's vector between layers; d_head the length of "
        "one head's queries, keys and values (in most models d_model divided by the number of "
        "heads).",
        "views/multi_head.py",
    ),
    "layer": Term(
        "One attention step and one feed-forward step, each added to every token's vector. A "
        "model stacks several, each with weights of its own; the app numbers them from 0.",
        "views/inside_layer.py",
    ),
    "d_ff": Term(
        "The width of the feed-forward network's hidden layer, which reworks each token on its "
        "own after attention.",
        "views/inside_layer.py",
    ),
    "residual connection": Term(
        "Each sublayer adds its result to the token's vector instead of replacing it, so the "
        "vector reaches the next layer even if a sublayer contributes nothing.",
        "views/inside_layer.py",
    ),
    "encoder, decoder": Term(
        "An encoder (BERT, MiniLM) lets every token attend to the whole text. A decoder (GPT-2, "
        "Llama) lets each token attend only to itself and earlier tokens, and is trained to "
        "predict the next piece.",
        "views/inside_layer.py",
        "section 4",
    ),
}


def ahead(*names: str, here: str = "") -> str:
    """The `help` text of a paragraph that uses these terms before their page: one Markdown line
    per term, its definition and a link to where it is taught (relative: the app may be served
    under a base path). here: the view file of the page asking; a term taught further down it
    gets its section instead of a link back to the same page."""
    lines = []
    for name in names:
        term = TERMS[name]  # a KeyError here is a typo in a view
        step = path.step_of(term.taught_in)
        where = f", {term.where}" if term.where else ""
        taught = (
            f"Taught further down this page{where}."
            if term.taught_in == here
            else f"Taught on [{step.title}]({path.url_path(step)}){where}."
        )
        lines.append(f"**{name}**: {term.definition} {taught}")
    return "\n\n".join(lines)
