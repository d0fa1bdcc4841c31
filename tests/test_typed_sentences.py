"""Sentences that draw a conclusion follow the numbers beside them, on MiniLM and tiny decoders.

Each test renders one page (one tab) with AppTest and recomputes the numbers the sentence rests
on here, in numpy, from the model's own run: a word's position, the cosine of its two input rows,
its self-weight under softmax(X Xᵀ), the table's size. The wording the page must (or must not)
use is then decided by the test, not read from the page's code.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from conftest import ROOT, answer_every_question, open_tab
from family_pages import TEXT, family_folder, run_on, visible_texts
from safetensors.numpy import load_file
from streamlit.testing.v1 import AppTest

FAMILIES = ("minilm", "gpt2", "llama")


@pytest.fixture(autouse=True)
def _local_folders(monkeypatch):
    """A local user's server: a tiny checkpoint's folder may be loaded (family_pages.renders)."""
    from ui import models

    monkeypatch.setenv("ATTENTION_EXPLORER_LOCAL_FOLDERS", "1")
    models.policy.clear()
    yield
    models.policy.clear()


def render(family: str, page: str, tab: tuple[str, str] | None = None) -> AppTest:
    """`page` with `family` loaded (MiniLM: the bundled default), the tab (key, label) open."""
    if family == "minilm":
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
        answer_every_question(at)  # the figures questions fold are drawn
        at.session_state["text"] = TEXT
        at.run()
        at.switch_page(page)
        at.run()
    else:
        at = run_on(family_folder(family), page)
    if tab is not None:
        at = open_tab(at, *tab)
    assert not at.exception, [e.value for e in at.exception]
    return at


def loaded(family: str):
    import core

    if family == "minilm":
        return core.load_model("minilm")
    return core.models.load_folder(family_folder(family))


def text_of(at: AppTest) -> str:
    return "\n".join(visible_texts(at))


def piece_index(tokens: list[str], word: str) -> int:
    """First position whose piece is `word`, a leading byte-level space mark ignored."""
    return next(i for i, token in enumerate(tokens) if token.lstrip("␣Ġ▁") == word)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def layer_zero_reads(family: str, stream: np.ndarray) -> np.ndarray:
    """(n, d_model) the rows layer 0's heads read, from the stream entering layer 0: the stream
    itself where the norm follows the sublayer (MiniLM), else layer 0's first norm, rebuilt in
    float64 from the checkpoint's own tensors (GPT-2: LayerNorm ln_1; Llama: RMSNorm)."""
    x = np.asarray(stream, dtype=np.float64)
    if family == "minilm":
        return x
    folder = family_folder(family)
    tensors = load_file(str(folder / "model.safetensors"))
    config = json.loads((folder / "config.json").read_text())

    def tensor(suffix: str) -> np.ndarray:
        return tensors[next(k for k in tensors if k.endswith(suffix))].astype(np.float64)

    if family == "gpt2":
        centred = x - x.mean(axis=1, keepdims=True)
        variance = (centred**2).mean(axis=1, keepdims=True)
        normed = centred / np.sqrt(variance + config["layer_norm_epsilon"])
        return normed * tensor("h.0.ln_1.weight") + tensor("h.0.ln_1.bias")
    rms = np.sqrt((x**2).mean(axis=1, keepdims=True) + config["rms_norm_eps"])
    return x / rms * tensor("layers.0.input_layernorm.weight")


def self_weight(x: np.ndarray, i: int) -> float:
    """softmax(X Xᵀ)[i, i], in float64."""
    scores = x.astype(np.float64) @ x.astype(np.float64).T  # (n, n)
    row = np.exp(scores[i] - scores[i].max())
    return float(row[i] / row.sum())


@pytest.mark.parametrize("family", FAMILIES)
def test_qkv_payoff_caption_follows_positions_cosine_and_self_weight(family):
    model = loaded(family)
    run_a, run_b = model.run("money bank grows"), model.run("river bank flows")
    i_a, i_b = piece_index(run_a.tokens, "bank"), piece_index(run_b.tokens, "bank")
    # what layer 0's heads read: the stream, or (pre-norm) layer 0's first norm of it
    x_a, x_b = (layer_zero_reads(family, run.hidden_states[0]) for run in (run_a, run_b))
    input_cosine = cosine(x_a[i_a], x_b[i_b])
    kept = min(self_weight(x_a, i_a), self_weight(x_b, i_b))

    text = text_of(render(family, "views/qkv.py", ("qkv_section", "7 · Payoff")))
    caption = next(line for line in text.split("\n") if line.startswith("Input cosine"))
    assert f"Input cosine {input_cosine:.3f}" in caption
    if i_a == i_b:
        assert f"piece {i_a} in both sentences" in caption
    else:
        assert f"piece {i_a} in A and piece {i_b} in B" in caption
    assert ("as the same vector" in caption) == (round(input_cosine, 3) >= 1.0)
    assert ("next to nothing" in caption) == (kept >= 0.995)
    assert ("only a little" in caption) == (0.9 <= kept < 0.995)
    assert ("already mixes" in caption) == (kept < 0.9)
    assert "long vectors" not in caption


@pytest.mark.parametrize("family", FAMILIES)
def test_context_wording_follows_its_cosine_and_self_weights(family):
    at = render(family, "views/context.py")
    text = text_of(at)
    shown = re.search(r"times its sentence's rows of X, (.*?)\. The steps below build Y", text)
    assert shown, "the sentence under the two cosines is missing"
    y_value = next(m.value for m in at.metric if " in Y" in m.label)
    assert ("the mixes differ" in shown.group(1)) == (float(y_value) < 1.0)

    kept = re.search(
        r"so a word keeps ([0-9.]+)(?:–([0-9.]+))? of its weight for itself([^.]*)", text
    )
    assert kept, "the self-weight sentence is missing"
    low, high = float(kept.group(1)), float(kept.group(2) or kept.group(1))
    assert ("real share" in kept.group(3)) == (high <= 0.5)
    assert ("get little" in kept.group(3)) == (low >= 0.9)
    assert "by only" not in text


@pytest.mark.parametrize("family", FAMILIES)
def test_embeddings_follow_a_readable_piece_and_tab_4_says_no_change_as_such(family):
    at = render(family, "views/embeddings.py", ("emb_section", "4 · Occurrences"))
    followed = at.selectbox(key="emb_word").value
    assert followed.lstrip("␣") == "bank", followed  # the page's sentences all hold "bank"
    text = text_of(at)
    means = re.search(
        r"mean over pairs is ([0-9.]+)[^\n]*?After layer \d+ it is ([0-9.]+): through the layers "
        r"the occurrences ([a-z ]*) on average",
        text,
    )
    assert means, "tab 4's sentence is missing"
    at_emb, at_end = float(means.group(1)), float(means.group(2))
    change = round(at_end - at_emb, 3)  # both as shown, three decimals
    way = "apart" if change < 0 else "closer together"
    expected = (
        "stayed where they were"
        if change == 0
        else f"barely moved {way}"
        if abs(change) < 0.02
        else f"moved a little {way}"
        if abs(change) < 0.1
        else f"moved clearly {way}"
    )
    assert means.group(3) == expected, (at_emb, at_end)


def centred_cosine_at(table: np.ndarray, distance: int) -> float:
    """Mean cosine of position rows `distance` apart once the mean row is taken out (numpy)."""
    centred = table.astype(np.float64) - table.astype(np.float64).mean(axis=0)  # (P, d)
    unit = centred / np.linalg.norm(centred, axis=1, keepdims=True)
    return float(np.diagonal(unit @ unit.T, offset=distance).mean())


@pytest.mark.parametrize("family", ("minilm", "gpt2"))  # the models with a position table
def test_positional_tab_6_names_only_distances_the_table_has(family):
    table = np.asarray(loaded(family).position_vectors())
    text = text_of(render(family, "views/positional.py", ("pos_section", "6 · Adding")))
    sentence = re.search(r"([A-Z][a-z ]+in position[a-z ]*): without the mean row, ([^(]*)", text)
    assert sentence, "tab 6's sentence on position rows is missing"
    distances = [d for d in (1, 10, 100) if d < len(table)]
    for d in distances:
        shown = "neighbours have cosine" if d == 1 else f"rows {d} apart"
        value = centred_cosine_at(table, d)
        assert re.search(rf"{shown} [−-]?{abs(value):.2f}", sentence.group(2)), (d, value)
    assert len(table) > 100 or "100 apart" not in sentence.group(2)
    near, far = (round(centred_cosine_at(table, d), 2) for d in (1, distances[-1]))
    closeness = sentence.group(1) == "What remains is closeness in position"
    assert closeness == (near > far and near > 0)
    alike = re.search(
        r"Position rows look (more|no more) alike than token rows on average "
        r"\(mean cosine ([−0-9.-]+) over random pairs, against ([−0-9.-]+)\)",
        text,
    )
    assert alike, "the sentence comparing position rows with token rows is missing"
    position_mean, token_mean = (float(alike.group(i).replace("−", "-")) for i in (2, 3))
    assert (alike.group(1) == "more") == (position_mean > token_mean)


@pytest.mark.parametrize("family", ("minilm", "gpt2"))
def test_positional_tab_3_counts_the_rows_it_draws(family):
    n_rows = len(loaded(family).position_vectors())
    text = text_of(render(family, "views/positional.py", ("pos_section", "3 · Learned")))
    assert "BERT-style" not in text
    drawn = min(100, n_rows)  # the Positions slider's default
    expected = f"all {n_rows} of its rows" if drawn >= n_rows else f"its first {drawn} rows"
    assert f"Below, {expected} next to" in text


@pytest.mark.parametrize("family", ("minilm", "gpt2"))
def test_causal_mask_tab_says_whether_the_model_was_trained_with_it(family):
    decoder = {"minilm": False, "gpt2": True}[family]  # MiniLM is BERT's encoder; GPT-2 causal
    text = text_of(render(family, "views/scaling_masking.py", ("sm_section", "4 · Causal mask")))
    assert ("this is the mask it was trained with" in text) == decoder
    assert ("never saw this mask in training" in text) == (not decoder)


# what each family's Sources line must cite, and must not, written here from the papers
CITES = {
    "minilm": ("Devlin et al. (2019)", "Wang et al. (2020), MiniLM", "Ba, Kiros & Hinton (2016)"),
    "gpt2": ("Radford et al. (2019)", "Ba, Kiros & Hinton (2016)"),
    "llama": ("Touvron et al. (2023)", "Zhang & Sennrich (2019), RMSNorm"),
}


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("page", ("views/overview.py", "views/inside_layer.py"))
def test_sources_line_cites_the_loaded_model(family, page):
    text = text_of(render(family, page))
    sources = next(line for line in text.split("\n") if line.startswith("Sources"))
    family_paper, *layer_papers = CITES[family]
    expected = [family_paper, *(layer_papers if page.endswith("inside_layer.py") else [])]
    for citation in expected:
        assert citation in sources, (citation, sources)
    assert ("MiniLM" in sources) == (family == "minilm")
    if family == "llama":
        assert "LayerNorm" not in sources


def test_default_word_skips_specials_and_one_sentence_pieces():
    from core import embeddings

    counts = {"<s>": (3, 3), ".": (3, 3), "␣river": (2, 2), "␣mill": (1, 1)}
    words = list(counts)  # already most sentences first
    assert embeddings.default_word(words, counts, ("<s>",)) == "␣river"
    assert embeddings.default_word([*words, "␣bank"], {**counts, "␣bank": (1, 1)}, ()) == "␣bank"
    only_marks = {"<": (3, 3), "a": (1, 1)}  # no readable piece in several sentences
    assert embeddings.default_word(list(only_marks), only_marks, ()) == "<"
