"""Own encoder vs transformers' BertModel (eager, with attention weights) on the bundled model.

Both do the same job the app needs: text in, every layer's attention weights and hidden states
out. Runs are alternated in one process so that machine noise hits both alike; the printed
ratio is own / reference (target ≤ 1.1 at every length). Prints, never asserts.

    python bench/bench_forward.py [--repeats 15] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import core  # noqa: E402

LENGTHS = (8, 32, 128, 512)


def text_of(n_tokens: int) -> str:
    """A sentence of exactly n_tokens word pieces once [CLS] and [SEP] are added."""
    words = "the river bank flooded and money in the bank grew while time flies".split()
    return " ".join(words[i % len(words)] for i in range(n_tokens - 2))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (the app uses 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    from transformers import AutoTokenizer, BertModel

    own = core.load_model("minilm")
    reference = BertModel.from_pretrained(str(own.model_dir), attn_implementation="eager").eval()
    tokenizer = AutoTokenizer.from_pretrained(str(own.model_dir))

    def run_own(text: str) -> None:
        own.run(text)

    @torch.inference_mode()
    def run_reference(text: str) -> None:
        inputs = tokenizer(text, return_tensors="pt", truncation=True, max_length=512)
        out = reference(**inputs, output_attentions=True, output_hidden_states=True)
        [a.numpy() for a in out.attentions]  # the app needs them as arrays too

    print(f"torch {torch.__version__}, {args.threads} thread(s), {args.repeats} alternated repeats")
    print(f"{'tokens':>7} {'own ms':>9} {'transformers ms':>16} {'ratio':>7}")
    for n_tokens in LENGTHS:
        text = text_of(n_tokens)
        assert own.run(text).n_tokens == n_tokens
        for _ in range(3):  # warm up both
            run_own(text), run_reference(text)
        own_s, ref_s = [], []
        for _ in range(args.repeats):
            for fn, sink in ((run_own, own_s), (run_reference, ref_s)):
                start = time.perf_counter()
                fn(text)
                sink.append(time.perf_counter() - start)
        own_ms, ref_ms = statistics.median(own_s) * 1e3, statistics.median(ref_s) * 1e3
        print(f"{n_tokens:>7} {own_ms:>9.2f} {ref_ms:>16.2f} {own_ms / ref_ms:>6.2f}x")


if __name__ == "__main__":
    main()
