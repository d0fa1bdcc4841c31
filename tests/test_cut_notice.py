"""A cut input's notice names the word the kept part ends on (ui/cut_notice.py, core.words)."""

from __future__ import annotations

from conftest import assert_no_exception, run_page
from shown import shown

from core.words import last_words
from ui import cut_notice


def test_last_words_join_the_pieces_of_each_sentences_last_word():
    wordpiece = ["[CLS]", "time", "flies", "em", "##bed", "[SEP]"]
    assert last_words(wordpiece, [0] * 6) == ("embed",)
    pair = ["[CLS]", "a", "b", "[SEP]", "c", "##d", "[SEP]"]
    assert last_words(pair, [0, 0, 0, 0, 1, 1, 1]) == ("b", "cd")
    bpe = ["<s>", "␣time", "␣fl", "ies", "."]
    assert last_words(bpe, [0] * 5, "bpe", [True, False, False, False, False]) == (".",)
    assert last_words(["[CLS]", "[SEP]"], [0, 0]) == ()


def test_the_notice_quotes_the_word_as_text():
    end = cut_notice.ends_on(["[CLS]", "[x](http://e)", "[SEP]"])
    assert shown(end) == "it now ends on “[x](http://e)”"  # shown() fails on raw markup
    said = cut_notice.notice(3002, 512, "MiniLM", 512, end)
    assert said.startswith("The input has 3,002 word pieces; MiniLM reads at most 512, so only")
    assert cut_notice.notice(600, 512, "M", 512, "").endswith("the first 512 are shown.")


def test_a_cut_page_names_the_last_word_it_kept():
    """The sentence is cut where transformers' own tokenizer cuts it (512 with [CLS] and [SEP]):
    the notice names the word that the last kept piece belongs to."""
    from transformers import AutoTokenizer

    import core

    text = " ".join(f"river{i} bank" for i in range(300))
    hf = AutoTokenizer.from_pretrained(str(core.load_model().model_dir))
    kept = hf.tokenize(text)[:510]
    start = len(kept) - 1
    while kept[start].startswith("##"):
        start -= 1
    word = kept[start] + "".join(piece[2:] for piece in kept[start + 1 :])
    at = run_page("views/heatmaps.py", text=text)
    assert_no_exception(at)
    (warning,) = [w.value for w in at.warning if "word pieces" in w.value]
    total = len(hf.tokenize(text)) + 2
    assert shown(warning) == (
        f"The input has {total:,} word pieces; MiniLM-L6 reads at most 512, so only the first 512 "
        f"are shown: it now ends on “{word}”."
    )
