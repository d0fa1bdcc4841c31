"""The attention formula as LaTeX, written from the switches the page's figures were run with.

A page shows the formula next to the figure it describes: with scaling switched off there is
no √d_k in the figure, so there is none in the formula; with the causal mask on, the mask is.
"""

from __future__ import annotations

CAUSAL_MASK = r"M_{ij} = \begin{cases} 0 & j \le i \\ -\infty & j > i \end{cases}"


def scores(scale: bool, query: str = "Q", key: str = "K") -> str:
    """Q Kᵀ, over √d_k when scaled."""
    product = rf"{query} {key}^\top"
    return rf"\frac{{{product}}}{{\sqrt{{d_k}}}}" if scale else product


def attention(scale: bool, causal: bool, query: str = "Q", key: str = "K") -> str:
    """softmax(Q Kᵀ [/√d_k] [+ M]): the weights of one head, as the switches compute them."""
    inner = scores(scale, query, key) + (" + M" if causal else "")
    return rf"\operatorname{{softmax}}\!\left({inner}\right)"


def pair_score(scale: bool, i: str = "i", j: str = "j") -> str:
    """q_i · k_j [/ √d_k]: one query's score for one key."""
    dot = rf"q_{i} \cdot k_{j}"
    return rf"{dot} / \sqrt{{d_k}}" if scale else dot


def weight(scale: bool, causal: bool) -> str:
    """α_ij written element by element: the softmax over the keys a query may see."""
    keys = r"m \le i" if causal else "m"
    formula = (
        rf"\alpha_{{ij}} = \frac{{\exp({pair_score(scale)})}}"
        rf"{{\sum_{{{keys}}} \exp({pair_score(scale, j='m')})}}"
    )
    return formula + (r"\quad (j \le i;\ \alpha_{ij} = 0 \text{ for } j > i)" if causal else "")


def mask_line(causal: bool) -> str:
    """The mask's definition when the causal switch is on, else nothing: on the same line."""
    return rf",\qquad {CAUSAL_MASK}" if causal else ""


def mask_row(causal: bool) -> str:
    """The mask's definition on a row of its own (in a gathered block), when the switch is on:
    a phone has no room for it beside the rest."""
    return rf"\\ {CAUSAL_MASK}" if causal else ""
