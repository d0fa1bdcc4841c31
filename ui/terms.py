"""Terms a page uses before the page that teaches them: a short definition, and where it is taught.

The path (ui/path.py) teaches one idea per page, but a page cannot always wait: the Overview's
formula divides by √d_k four pages before 3 · Scaling explains why. A paragraph that uses such a
term passes help=terms.ahead(...) to st.markdown or st.caption; Streamlit draws a "?" beside it
that shows the definitions on hover or tap, each with a link to the page that teaches it.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.anatomy import Anatomy
from ui import path

NORMS = ("LayerNorm", "RMSNorm")  # either one stands for the model's own norm in ahead()


@dataclass(frozen=True)
class Term:
    definition: str  # one or two sentences, true of every model the app loads
    taught_in: str  # the view file of the page that teaches it; "" for a tool the course uses
    # but does not teach (a statistic, an optimiser): the definition is all it gets
    where: str = ""  # the section of that page, when it is one of several
    needs: str = ""  # an Anatomy property a model must have for the term to apply to it ("")


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
    "token, word piece": Term(
        "A word piece is an entry of the tokenizer's fixed vocabulary: a whole word or a part of "
        "one. A token is one place in an input, holding a word piece: “the” twice in a sentence "
        "is one word piece and two tokens.",
        "views/overview.py",
        "section 2",
    ),
    "feed-forward network": Term(
        "Two learned linear maps with a non-linear function between them, applied to each "
        "token's vector on its own. Every layer has one, after its attention.",
        "views/inside_layer.py",
        "section 1",
    ),
    "LayerNorm": Term(
        "Rescales each token's vector to mean 0 and variance 1 over its d_model numbers, then "
        "applies a learned gain and shift.",
        "views/inside_layer.py",
        "section 3",
    ),
    "RMSNorm": Term(
        "Rescales each token's vector by the root mean square of its d_model numbers, with no "
        "mean taken away, then applies a learned gain.",
        "views/inside_layer.py",
        "section 3",
    ),
    "position rows": Term(
        "Rows of a learned table with one vector per position 0, 1, 2, …: a model with such a "
        "table adds row p to the vector of the token at position p, so one word at two places "
        "enters as two different vectors.",
        "views/positional.py",
        "in tab 3 · Learned",
        needs="position_table",
    ),
    "segment rows": Term(
        "Rows of a small learned table with one vector per sentence of a pair: a model that "
        "has one adds row 0 to every token of the first sentence and row 1 to every token of the "
        "second, so each token carries which sentence it is in. A table of one row adds that row "
        "to every token alike and tells nothing apart.",
        "views/positional.py",
        needs="segment_rows",
    ),
    "gradient": Term(
        "For a number computed from many inputs (a loss, an output), how fast it changes as each "
        "input is nudged, one value per input. Training moves every weight a small step against "
        "the loss's gradient.",
        "views/explanations.py",
        "section 1",
    ),
    "entropy (bits)": Term(
        "How spread a row of attention weights is: H = −Σ α log₂ α. It is 0 bits when all the "
        "weight sits on one key and log₂ n bits when it is spread evenly over n keys.",
        "views/scaling_masking.py",
        "section 3",
    ),
    "cosine": Term(
        "How alike two vectors' directions are: their dot product divided by both lengths, 1 "
        "when they point the same way, 0 at right angles, −1 when opposite. Length plays no part.",
        "",
    ),
    "R²": Term(
        "The share of the variation of one quantity that a fitted function of another accounts "
        "for: 1 when the fit is exact, 0 when it explains nothing.",
        "",
    ),
    "role score": Term(
        "A head's mean attention weight from each word piece to one kind of target (the token "
        "before it, the token after it, the first token, another occurrence of the same word), "
        "over fixed probe sentences.",
        "views/multi_head.py",
        "in tab 1 · All heads",
    ),
    "PCA": Term(
        "Principal component analysis: turns the cloud of points so that its axes follow the "
        "directions in which the points spread most, and keeps the first two or three of them.",
        "views/embeddings.py",
        "in tab 1 · Before and after",
    ),
    "t-SNE": Term(
        "Places the points in 2-D or 3-D so that near neighbours in the full space stay near; "
        "distances between far groups, and the axes, carry little meaning (van der Maaten & "
        "Hinton, 2008).",
        "views/embeddings.py",
        "in tab 1 · Before and after",
    ),
    "hidden state": Term(
        "The tokens' vectors between two layers: the embedding output enters layer 0, and the "
        "output of layer l enters layer l + 1. The pages name them “embedding output” and "
        "“after layer l”.",
        "views/embeddings.py",
    ),
    "Spearman's ρ": Term(
        "The correlation of two rankings: 1 when both put the items in the same order, 0 when "
        "the orders are unrelated, −1 when one is the other reversed.",
        "views/explanations.py",
        "section 2",
    ),
    "integrated gradients": Term(
        "An explanation method: it averages the output's gradient along a straight path from an "
        "all-zero input to the real one and multiplies by the input, so the scores add up to the "
        "change of the output (Sundararajan et al., 2017).",
        "views/explanations.py",
        "section 1",
    ),
    "Adam": Term(
        "An optimiser (Kingma & Ba, 2015): it moves each weight against its gradient, divided by "
        "a running estimate of that gradient's size, so every weight takes steps of similar size.",
        "views/lab.py",
        "section 4",
    ),
    "cross-entropy": Term(
        "A loss for predicted probabilities: minus the log of the probability given to the right "
        "answer, averaged over the predictions. It is 0 when the right answer gets probability 1.",
        "views/lab.py",
        "section 3",
    ),
    "nats": Term(
        "The unit of a loss computed with the natural logarithm, as bits are with log₂: "
        "1 nat = 1/ln 2 ≈ 1.44 bits.",
        "",
    ),
    "Fisher exact test": Term(
        "A test of whether two counts of successes, out of the same numbers of trials, differ by "
        "more than chance: its p-value is the probability, with the totals fixed, of a split at "
        "least as uneven if both groups shared one success rate.",
        "",
    ),
}


def ahead(*names: str, here: str = "", anatomy: Anatomy | None = None) -> str:
    """The `help` text of a paragraph that uses these terms before their page: one Markdown line
    per term, its definition and a link to where it is taught (relative: the app may be served
    under a base path). here: the view file of the page asking; a term taught further down it
    gets its section instead of a link back to the same page. anatomy: the model on screen; a
    term it lacks (Term.needs) is left out, and a norm is named as the model's own."""
    lines = []
    for asked in names:
        name = anatomy.norm_name if anatomy is not None and asked in NORMS else asked
        term = TERMS[name]  # a KeyError here is a typo in a view
        if anatomy is not None and term.needs and not getattr(anatomy, term.needs):
            continue
        if not term.taught_in:  # a tool the course uses without teaching it
            lines.append(f"**{name}**: {term.definition}")
            continue
        step = path.step_of(term.taught_in)
        where = f", {term.where}" if term.where else ""
        taught = (
            f"Taught further down this page{where}."
            if term.taught_in == here
            else f"Taught on [{step.title}]({path.url_path(step)}){where}."
        )
        lines.append(f"**{name}**: {term.definition} {taught}")
    return "\n\n".join(lines)
