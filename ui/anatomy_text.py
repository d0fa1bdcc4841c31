"""The words and formulas every page uses to state the loaded model's architecture.

One place, read from core/anatomy.py's Anatomy, so a page never states BERT's wiring for a GPT-2
or a Llama: the layer in LaTeX, the embedding sum as the model computes it, its special pieces,
and what it has in place of what a lesson expects. Nothing here names a family: every
difference is read from the description.
"""

from __future__ import annotations

from collections.abc import Sequence

import core
from core.anatomy import TEXT_A, TEXT_B, Anatomy, describe
from ui.escape import literal


def of(model: core.Transformer) -> Anatomy:
    """The model's anatomy (two tokenizer calls on a probe: cheap enough to read per page)."""
    return describe(model)


# ---- the layer ----------------------------------------------------------------------------------
def norm_latex(anatomy: Anatomy) -> str:
    return f"\\operatorname{{{anatomy.norm_name}}}"


def ffn_latex(anatomy: Anatomy, h: str) -> str:
    """The feed-forward applied to `h`: W_2 act(W_1 h), or the gated W_down (act(W_gate h) ⊙ W_up h)."""
    act = f"\\operatorname{{{anatomy.activation_name}}}"
    if anatomy.gated:
        return f"W_{{\\text{{down}}}}\\big({act}(W_{{\\text{{gate}}}} {h}) \\odot W_{{\\text{{up}}}} {h}\\big)"
    return f"W_2\\,{act}(W_1 {h})"


def layer_latex(anatomy: Anatomy) -> str:
    """One layer, a = what attention writes, f = what the feed-forward writes, y = the output."""
    norm = norm_latex(anatomy)
    if anatomy.pre_norm:  # each sublayer reads a normalised copy; the stream is only added to
        lines = [
            f"a &= \\operatorname{{MultiHead}}({norm}(x))",
            "h &= x + a",
            f"f &= {ffn_latex(anatomy, f'{norm}(h)')}",
            "y &= h + f",
        ]
    else:  # the norm follows each addition, on the stream itself
        lines = [
            "a &= \\operatorname{MultiHead}(x)",
            f"h &= {norm}(x + a)",
            f"f &= {ffn_latex(anatomy, 'h')}",
            f"y &= {norm}(h + f)",
        ]
    return "\\begin{aligned} " + " \\\\ ".join(lines) + " \\end{aligned}"


def arrangement(anatomy: Anatomy) -> str:
    """Where the norms sit, in one sentence."""
    norm = anatomy.norm_name
    if anatomy.pre_norm:
        final = f"; one more {norm} follows the last layer" if anatomy.final_norm else ""
        return (
            f"The norm comes first (pre-norm): each sublayer reads a copy of the stream "
            f"normalised by {norm} and adds its result, so inside the layer no norm touches the "
            f"stream itself{final}."
        )
    return (
        f"The norm comes after each addition (post-{norm}): it sits on the stream itself, so "
        "every layer's output is a normalised vector."
    )


def norm_definition(anatomy: Anatomy, d_model: int) -> str:
    """What the norm does to one token's vector, with its paper."""
    if anatomy.arch.norm_kind == "rms":
        return (
            f"**{anatomy.norm_name}** (Zhang & Sennrich, 2019) divides each token's {d_model} "
            "numbers by their root mean square, then applies a learned gain: no mean is "
            "subtracted and there is no shift."
        )
    return (
        f"**{anatomy.norm_name}** (Ba, Kiros & Hinton, 2016) sets each token's {d_model} "
        "numbers to mean 0 and variance 1, then applies a learned gain and shift."
    )


def ffn_words(anatomy: Anatomy) -> str:
    """The feed-forward in words: what widens, what the activation acts on, what narrows."""
    act = anatomy.activation_name
    if anatomy.gated:
        return (
            f"a gated feed-forward: {act} of a gate projection, multiplied piece by piece into an "
            "up projection, then a down projection"
        )
    return f"a feed-forward network: widen with W_1, {act}, narrow back with W_2"


def activation_input_label(anatomy: Anatomy) -> str:
    """The column name for the share of the activation's inputs below zero."""
    where = " (gate)" if anatomy.gated else ""
    return f"{anatomy.activation_name} inputs{where} < 0"


def cost_latex(anatomy: Anatomy) -> str:
    """The multiply-adds of one layer for n tokens, as the model's matrices make them (LaTeX)."""
    if anatomy.d_q == anatomy.dims.d_model and anatomy.d_kv == anatomy.d_q:
        projections = r"\underbrace{4\,n\,d^2}_{W_Q, W_K, W_V, W_O}"
    else:  # grouped key/value heads: K and V are d_kv wide, Q and W_O d_q
        projections = r"\underbrace{2\,n\,d\,d_q + 2\,n\,d\,d_{kv}}_{W_Q, W_O;\ W_K, W_V}"
    square = "d_q" if anatomy.d_q != anatomy.dims.d_model else "d"
    ffn = "gated feed-forward" if anatomy.gated else "feed-forward"
    return (
        f"{projections} + \\underbrace{{2\\,n^2 {square}}}_{{QK^\\top,\\ \\alpha V}}"
        f" + \\underbrace{{{anatomy.ffn_matrices}\\,n\\,d\\,d_{{ff}}}}_{{\\text{{{ffn}}}}}"
    )


def break_even_words(anatomy: Anatomy) -> str:
    """Where the n² part overtakes the rest, as a formula in words ("2d + d_ff" for BERT)."""
    if anatomy.d_q == anatomy.dims.d_model and anatomy.d_kv == anatomy.d_q:
        return "2d + d_ff" if anatomy.ffn_matrices == 2 else f"2d + {anatomy.ffn_matrices}·d_ff/2"
    return (
        f"d (2d_q + 2d_kv + {anatomy.ffn_matrices}·d_ff) / 2d_q"
        if anatomy.d_q != anatomy.dims.d_model
        else f"d + d_kv + {anatomy.ffn_matrices}·d_ff/2"
    )


# ---- the input ----------------------------------------------------------------------------------
def embedding_terms(anatomy: Anatomy, positions: bool = True) -> list[str]:
    """The rows the model adds to make the input of layer 0, in words."""
    terms = ["word-piece row"]
    if anatomy.segment_rows:
        terms.append("segment row")
    if positions and anatomy.position_table:
        terms.append("position row")
    return terms


def embedding_words(anatomy: Anatomy, positions: bool = True) -> str:
    """The input of layer 0 in words: "LayerNorm(word-piece row + segment row + position row)"."""
    total = " + ".join(embedding_terms(anatomy, positions))
    return f"{anatomy.norm_name}({total})" if anatomy.embedding_norm else total


def attention_input_words(anatomy: Anatomy) -> str:
    """What layer 0's heads read, in words: the input of layer 0, or its first norm when the
    model normalises before each sublayer ("RMSNorm(word-piece row)")."""
    rows = embedding_words(anatomy)
    return f"{anatomy.norm_name}({rows})" if anatomy.pre_norm else rows


def shared_key_value_words(anatomy: Anatomy, head: int) -> str:
    """'; W_k and W_v are key/value head 0's, which query heads 0 and 1 share' with grouped
    key/value heads (one key/value head serves several query heads), else ''."""
    if not anatomy.grouped_heads:
        return ""
    n_heads, n_kv_heads = anatomy.dims.n_heads, anatomy.dims.n_kv_heads
    group = n_heads // n_kv_heads  # query heads per key/value head
    kv_head = head // group
    sharing = range(kv_head * group, (kv_head + 1) * group)
    names = ", ".join(str(h) for h in sharing[:-1]) + f" and {sharing[-1]}"
    return f"; W_k and W_v are key/value head {kv_head}'s, which query heads {names} share"


def embedding_latex(anatomy: Anatomy) -> str:
    """x_p as the model computes it (LaTeX): its own terms, its own norm."""
    total = "E_{\\text{token}}"
    if anatomy.segment_rows:
        total += " + E_{\\text{segment}}"
    if anatomy.position_table:
        total += " + P_p"
    return f"\\mathrm{{{anatomy.norm_name}}}({total})" if anatomy.embedding_norm else total


def positions_sentence(anatomy: Anatomy, label: str) -> str:
    """How positions enter this model, in one sentence."""
    if not anatomy.position_table:
        return (
            f"{label} has rotary positions: no position vector is added; inside every head, "
            "each query and key is turned by an angle that grows with its position."
        )
    offset = (
        f" (position p reads row p + {anatomy.arch.position_offset})"
        if anatomy.positions == "offset"
        else ""
    )
    return f"{label} adds a learned position table{offset} to each word-piece vector."


def positions_switched_off(anatomy: Anatomy) -> str:
    """What a run without positions leaves out, for this model: its position rows, or its
    rotary turn of every query and key."""
    if not anatomy.position_table:
        return "its rotary turn of every query and key switched off"
    return "the position rows it adds taken out"


def position_table_words(anatomy: Anatomy) -> str:
    """The learned position table's size in words, with the rows no position reads: "a table of
    512 position vectors", or for RoBERTa "a table of 514 position vectors, of which a run reads
    the last 512 (position p reads row p + 2: the rows up to its padding index are never
    read)"."""
    rows = anatomy.position_table_rows
    offset = anatomy.arch.position_offset
    if not offset:
        return f"a table of {rows} position vectors"
    return (
        f"a table of {rows} position vectors, of which a run reads the last "
        f"{anatomy.dims.max_positions} (position p reads row p + {offset}: the rows up to its "
        "padding index are never read)"
    )


def segments_sentence(anatomy: Anatomy, label: str) -> str:
    """What the segment table does for this model, in one sentence."""
    if anatomy.segment_rows > 1:
        return f"{label} adds a segment row that says which sentence a piece belongs to."
    if anatomy.segment_rows == 1:
        return (
            f"{label} has one segment row, added to every piece: it tells the sentences apart "
            "only through its special pieces."
        )
    return f"{label} has no segment rows: it tells two sentences apart only by its pieces."


# ---- special pieces -----------------------------------------------------------------------------
def special_names(anatomy: Anatomy) -> str:
    """The special pieces, escaped: "[CLS] and [SEP]", "<s>", "" when the tokenizer adds none."""
    shown = [literal(piece, max_chars=40) for piece in anatomy.special_pieces]
    if len(shown) <= 2:
        return " and ".join(shown)
    return ", ".join(shown[:-1]) + " and " + shown[-1]


def special_names_after(anatomy: Anatomy) -> str:
    """The specials after the first one ([SEP], </s>), escaped; "" when there are none."""
    later = [piece for piece in anatomy.special_pieces if piece != anatomy.first_special]
    return " and ".join(literal(piece, max_chars=40) for piece in later)


def framing(anatomy: Anatomy, pair: bool = True) -> str:
    """The template around the text, escaped: "[CLS] A [SEP] B [SEP]", "A B" without specials."""
    slots = anatomy.pair if pair else anatomy.single
    return " ".join(slot if slot in (TEXT_A, TEXT_B) else literal(slot, 40) for slot in slots)


def specials_in_run(tokens: Sequence[str], special: Sequence[bool]) -> tuple[str, int]:
    """The special pieces a run holds, escaped, each name once in order of first appearance
    ("[CLS] and [SEP]", "<s>", "" for none), and how many pieces they are."""
    names = [literal(t, max_chars=40) for t, flag in zip(tokens, special, strict=True) if flag]
    distinct = list(dict.fromkeys(names))
    joined = (
        ", ".join(distinct[:-1]) + " and " + distinct[-1]
        if len(distinct) > 1
        else "".join(distinct)
    )
    return joined, len(names)


def specials_stay(tokens: Sequence[str], special: Sequence[bool]) -> str:
    """For a shuffle of this run: which pieces keep their place (core.positional.shuffle_order
    keeps the tokenizer's own), the verb agreeing with the number of pieces, not of names."""
    names, count = specials_in_run(tokens, special)
    if count == 0:
        return "no special piece to keep in place"
    if count == 1:
        return f"{names} stays in place"
    if " and " in names:
        return f"{names} stay in place"
    return f"both {names} stay in place" if count == 2 else f"all {count} {names} stay in place"


def special_rows(tokens: Sequence[str], special: Sequence[bool]) -> str:
    """ "the row of <s>", "the rows of [CLS] and [SEP]", "" when the run holds no special piece."""
    names, count = specials_in_run(tokens, special)
    if count == 0:
        return ""
    return f"the {'row' if count == 1 else 'rows'} of {names}"


def left_as_they_are(anatomy: Anatomy) -> str:
    """For a gradient taken at the word-piece row: the other rows of the input, which it leaves
    alone (" (the segment row and position row are left as they are)"; "" when none)."""
    others = embedding_terms(anatomy)[1:]
    if not others:
        return ""
    verb = "are left as they are" if len(others) > 1 else "is left as it is"
    return f" (the {' and '.join(others)} {verb})"


def sentence_blocks(anatomy: Anatomy) -> str:
    """What A and B cover in a sentence pair, with the specials the tokenizer puts around them."""
    if not anatomy.adds_specials:
        return "A = first sentence, B = second sentence."
    return (
        f"A = first sentence, B = second sentence, framed as {framing(anatomy)}: a special piece "
        "counts with the sentence before it (the first one with A)."
    )


# ---- citations ----------------------------------------------------------------------------------
# The paper that describes each family's architecture, for a page's Sources line: data keyed by
# core.weights' family names, so a Sources line cites the model on screen and no other.
FAMILY_PAPERS = {
    "bert": "Devlin et al. (2019), BERT",
    "roberta": "Liu et al. (2019), RoBERTa",
    "distilbert": "Sanh et al. (2019), DistilBERT",
    "gpt2": "Radford et al. (2019), GPT-2",
    "llama": "Touvron et al. (2023), LLaMA",
}
# MiniLM's own papers, cited only when a MiniLM checkpoint is loaded (its name says so)
MINILM_PAPERS = "Wang et al. (2020), MiniLM; Reimers & Gurevych (2019), sentence embeddings"
NORM_PAPERS = {
    "LayerNorm": "Ba, Kiros & Hinton (2016), LayerNorm",
    "RMSNorm": "Zhang & Sennrich (2019), RMSNorm",
}


def model_papers(model: core.Transformer, anatomy: Anatomy) -> str:
    """'Devlin et al. (2019), BERT; Wang et al. (2020), MiniLM; …': the loaded model's family
    paper, then MiniLM's papers when the checkpoint is a MiniLM."""
    papers = [FAMILY_PAPERS[anatomy.arch.family]]
    if "minilm" in model.name.lower():
        papers.append(MINILM_PAPERS)
    return "; ".join(papers)


def norm_paper(anatomy: Anatomy) -> str:
    """The paper of the norm the model uses."""
    return NORM_PAPERS[anatomy.norm_name]
