"""The multi-head page's two roles and its chance level, for a decoder (tiny GPT-2 and Llama)
and for MiniLM: a causal model has no next-token head, one head is never shown as two roles,
and an even spread is one over the keys a row can see (i + 1 under the causal mask)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import open_tab, run_page, section_key
from family_pages import TEXT, family_folder, run_on, visible_texts

import core
from core import head_roles
from core.models import policy_from_settings

PAGE = "views/multi_head.py"
LOCAL = policy_from_settings({"ATTENTION_EXPLORER_LOCAL_FOLDERS": "1"})


def _page(family: str):
    if family == "minilm":
        return run_page(PAGE, text="the river bank flows past the old mill.")
    return run_on(family_folder(family), PAGE)


def _even_share_of_previous(model) -> float:
    """Mean over the probe rows (a real piece i with a real piece before it) of one over the
    keys row i sees: i + 1 for a decoder, n for an encoder."""
    shares = []
    for sentence in head_roles.PROBE_SENTENCES:
        trace = model.run(sentence)
        n = trace.n_tokens
        for i in range(1, n):
            if not trace.special[i] and not trace.special[i - 1]:
                shares.append(1 / (i + 1) if model.is_decoder else 1 / n)
    return float(np.mean(shares))


@pytest.mark.parametrize("family", ["gpt2", "llama", "minilm"])
def test_two_roles_are_two_heads_and_chance_follows_the_mask(family, model, local_folders):
    at = _page(family)
    texts = " ".join(visible_texts(at))
    shown = core.load_model(str(family_folder(family)), LOCAL) if family != "minilm" else model
    decoder = family != "minilm"
    assert shown.is_decoder == decoder
    # Why several heads: two different heads, no next-token head for a decoder
    # a head is labelled by its role where it earns the name (2x an even spread), else by
    # what it leans to: either label says which role it was picked for
    leans_to = {"the token before": "previous-token", "the token itself": "self",
                "the token after": "next-token"}  # fmt: skip
    heads = re.findall(r"L(\d+) H(\d+) \((?:([a-z-]+) head|leans most to (the token \w+))\)", texts)
    roles = {role or leans_to[key]: (int(layer), int(head)) for layer, head, role, key in heads}
    assert set(roles) == (
        {"previous-token", "self"} if decoder else {"previous-token", "next-token"}
    )
    assert roles["previous-token"] != roles["self" if decoder else "next-token"]
    assert ("next-token head" in texts) != decoder
    # the focus row's even spread: one over i + 1 keys under the mask, 1/n without
    focus_match = re.search(
        r"gives the token before, (\d+):.*?an even spread over the (\d+) keys"
        r" this row can see gives each 1/\d+ [=≈] (\d+\.\d+)",
        texts,
    )
    assert focus_match, texts[:2000]
    focus = int(focus_match.group(1)) + 1
    keys = int(focus_match.group(2))
    if decoder:
        assert keys == focus + 1
    assert float(focus_match.group(3)) == pytest.approx(1 / keys, abs=0.006)
    # tab 1: the chance level quoted is the mean of one over the visible keys, per row
    open_tab(at, section_key(PAGE), "1 · All heads")
    tab_text = " ".join(visible_texts(at))
    chance = re.search(r"gives the token before (\d\.\d\d) on average over the same rows", tab_text)
    assert chance, tab_text[:2000]
    assert float(chance.group(1)) == pytest.approx(_even_share_of_previous(shown), abs=0.006)
    if decoder:
        assert "next token:" not in tab_text and "next-token head" not in tab_text
    # the predict question's chance, over the rows its share counts (a word piece after a word
    # piece): row i sees i + 1 keys under the mask, n without; in the prompt, or (where the
    # prompt quotes the Overview's line instead) in the feedback of the answer given
    question = re.search(
        r"(?:of a row's weight on average \(|the head's average over its rows: \d\.\d\d, )"
        r"against (\d\.\d\d) for an even spread\)",
        tab_text,
    )
    assert question, tab_text[:3000]
    sentence = "the river bank flows past the old mill." if family == "minilm" else TEXT
    trace = shown.run(sentence)
    n, special = trace.n_tokens, trace.special
    rows = [i for i in range(1, n) if not special[i] and not special[i - 1]]
    expected = np.mean([1 / (i + 1) for i in rows]) if decoder else 1 / n
    assert float(question.group(1)) == pytest.approx(expected, abs=0.006)
    # the same-word example: the repeat's row shares an even spread among the keys it sees
    repeat = re.search(
        r"lets the second .+? \(piece (\d+)\) give the first \(piece \d+\) \d\.\d\d of its "
        r"weight, against 1/(\d+) [=≈] (\d\.\d\d\d?) for an even spread over the (\d+) pieces",
        tab_text,
    )
    assert repeat, tab_text[:3000]  # the probe sentence repeats a piece in every family
    if repeat:
        second, keys = int(repeat.group(1)), int(repeat.group(2))
        n = shown.run(head_roles.PROBE_SENTENCES[2]).n_tokens
        assert keys == (second + 1 if decoder else n) == int(repeat.group(4))
        assert float(repeat.group(3)) == pytest.approx(1 / keys, abs=0.006)

    # tab 3 names a parking spot by the same rule (the test below checks it against chance)
    open_tab(at, section_key(PAGE), "3 · Looking vs moving")
    assert not at.exception
    tab3 = " ".join(visible_texts(at))
    verdicts = re.findall(
        r"the parking spot is|\S+ is no parking spot|neither \S+ nor \S+ is a parking spot", tab3
    )
    assert len(verdicts) == 1, verdicts  # a verdict that names only the places compared
    assert "most parked weight" not in tab3 and "no piece takes more" not in tab3


@pytest.mark.parametrize("family", ["gpt2", "llama", "minilm"])
def test_parking_spot_is_claimed_only_above_an_even_spread(family, model, local_folders):
    at = run_page("views/heatmaps.py", text=TEXT) if family == "minilm" else None
    at = at or run_on(family_folder(family), "views/heatmaps.py")
    texts = " ".join(visible_texts(at))
    shown = core.load_model(str(family_folder(family)), LOCAL) if family != "minilm" else model
    trace = shown.run(TEXT)
    causal = shown.is_decoder
    special = np.asarray(trace.special)
    n = trace.n_tokens
    rows = [i for i in range(1, n) if not special[i]]  # real word pieces after position 0
    weights = trace.attentions.astype(np.float64)
    by_layer = np.array(
        [[weights[layer, :, i, 0].mean() for i in rows] for layer in range(len(weights))]
    ).mean(axis=1)  # (L,) rows equal-weighted
    share = by_layer.mean()
    even = np.mean([1 / (i + 1) if causal else 1 / n for i in rows])
    caption = re.search(r"\(mean (\d\.\d\d), against (\d\.\d\d) for an even spread", texts)
    assert caption, texts[:3000]
    assert float(caption.group(1)) == pytest.approx(share, abs=0.006)
    assert float(caption.group(2)) == pytest.approx(even, abs=0.006)
    others = special.copy()
    others[0] = False
    places = {0: (by_layer, even)}
    if others.any():
        seen = [(others[: i + 1].sum() if causal else others.sum()) for i in rows]
        keys = [i + 1 if causal else n for i in rows]
        sep = np.array(
            [
                [weights[layer, :, i][..., others].sum(-1).mean() for i in rows]
                for layer in range(len(weights))
            ]
        ).mean(axis=1)  # (L,)
        places[1] = (sep, np.mean(np.divide(seen, keys)))
    # the rule, written out: above an even spread in every layer, at least twice it on average
    parks = [bool((s > e).all() and s.mean() >= 2 * e) for s, e in places.values()]
    claimed = "the parking spot is" in texts
    assert claimed == any(parks), places
    assert "in every layer, and at least 2× that on average" in texts
    if not others.any():  # no special after the first piece: no legend or sentence about one
        assert "other specials" not in texts
    if not special.any():  # a tokenizer that adds no special piece: no sink legend about one
        assert "sink head" not in texts


def test_a_parking_place_is_above_chance_in_every_layer_and_twice_it_on_average():
    """The review's numbers: MiniLM's [CLS] parks; the tiny GPT-2's first piece (one layer below
    chance) and RoBERTa's </s> (0.07 against 0.03, one layer at 0.005) do not."""
    assert head_roles.is_parking_place(np.array([0.179, 0.516, 0.552, 0.464, 0.511, 0.32]), 0.056)
    assert not head_roles.is_parking_place(np.array([0.159, 0.197, 0.05]), 0.111)
    assert not head_roles.is_parking_place(np.array([0.133, 0.065, 0.005]), 0.034)
    assert not head_roles.is_parking_place(np.array([0.3, 0.3, 0.3]), 0.2)  # 1.5×: not clear
    assert head_roles.is_parking_place(np.array([0.4, 0.41, 0.45]), 0.2)
    assert not head_roles.is_parking_place(np.array([]), 0.1)


def test_a_repeated_words_even_spread_counts_the_keys_its_row_sees(local_folders):
    """Under a decoder's causal mask the later occurrence at piece s sees pieces 0 … s, so an
    even spread gives each 1/(s + 1), not 1/n."""
    model = core.load_model(str(family_folder("gpt2")), LOCAL)
    sentence = "the cat saw the dog and the bird"
    example = head_roles.repeat_example(model, sentence, 0, 0)
    trace = model.run(sentence)
    first = trace.tokens.index(example.word)
    second = trace.tokens.index(example.word, first + 1)
    assert (example.first, example.second, example.causal) == (first, second, True)
    assert second + 1 < trace.n_tokens, "a later piece exists: the two counts differ"
    assert example.keys_seen == second + 1
    # row i of n pieces: i + 1 keys under the mask, n without it
    assert [head_roles.keys_seen(6, row, True) for row in range(6)] == [1, 2, 3, 4, 5, 6]
    assert {head_roles.keys_seen(6, row, False) for row in range(6)} == {6}
    assert head_roles.even_weight(6, 2, True) == pytest.approx(1 / 3)
    assert example.even_weight == pytest.approx(1 / (second + 1))
