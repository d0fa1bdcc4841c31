"""Resident memory of a model in the app's own loader: the bundled MiniLM against bert-base.

bert-base-uncased cannot be downloaded here, and its memory does not depend on what its weights
are: a random checkpoint with its sizes (transformers' BertConfig defaults: 12 layers, 12 heads,
d_model 768, d_ff 3072, 30,522 word pieces, 512 positions) is written to a temporary Hugging Face
cache in hub layout and loaded by name through core.load_model, as a server whose allow-list
holds it would. Each model is measured in a fresh process: RSS after `import core`, after the
load, after one 512-piece run with its Trace held (as the cache holds it), and the peak.
Prints, never asserts.

    python bench/bench_model_memory.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = "the river bank flooded and money in the bank grew while time flies".split()
TEXT = " ".join(WORDS[i % len(WORDS)] for i in range(700))  # > 512 pieces: cut to 512
BERT_BASE = "bert-base-uncased"


def status_mb(field: str) -> float:
    """A memory line of /proc/self/status in MB: VmRSS now, VmHWM the peak of this process
    (ru_maxrss is not: it keeps the parent's peak across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mb() -> float:
    return status_mb("VmRSS")


def write_bert_base_cache(cache: Path) -> None:
    """A random bert-base checkpoint in the hub's cache layout (models--…/snapshots/<commit>)."""
    import torch
    from transformers import BertConfig, BertModel

    commit = "0" * 40
    snapshot = cache / f"models--{BERT_BASE}" / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (cache / f"models--{BERT_BASE}" / "refs").mkdir()
    (cache / f"models--{BERT_BASE}" / "refs" / "main").write_text(commit)
    config = BertConfig()  # the defaults are bert-base's sizes
    torch.manual_seed(0)
    BertModel(config).save_pretrained(snapshot, safe_serialization=True)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    filler = [f"w{i}" for i in range(config.vocab_size - len(specials) - len(set(WORDS)))]
    (snapshot / "vocab.txt").write_text("\n".join(specials + sorted(set(WORDS)) + filler) + "\n")
    (snapshot / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))


def measure(name: str, cache: str | None) -> dict[str, float]:
    """In this process: load `name` through the app's loader and run 512 pieces."""
    import torch

    torch.set_num_threads(1)  # as the app runs
    sys.path.insert(0, str(ROOT))
    import core
    from core.models import ModelPolicy

    def peak_mb() -> float:
        return status_mb("VmHWM")

    numbers = {"import": rss_mb(), "peak after import": peak_mb()}
    policy = ModelPolicy(
        hub_ids=frozenset({BERT_BASE}), download_dir=Path(cache) if cache else None
    )
    model = core.load_model(name, policy)
    numbers["loaded"] = rss_mb()  # safetensors maps the file: pages count once a run reads them
    numbers["peak after load"] = peak_mb()
    trace = model.run(TEXT)
    assert trace.n_tokens == 512, trace.n_tokens
    numbers["after 512-piece run"] = rss_mb()
    numbers["peak"] = peak_mb()
    numbers["trace MB"] = (
        sum(a.nbytes for a in (trace.hidden_states, trace.queries, trace.keys, trace.values))
        + trace.attentions.nbytes
    ) / 1e6
    return numbers


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        name, cache = sys.argv[2], os.environ.get("BENCH_CACHE")
        print(json.dumps(measure(name, cache)))
        return
    with tempfile.TemporaryDirectory(prefix="bert-base-") as cache:
        write_bert_base_cache(Path(cache))
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "BENCH_CACHE": cache}
        results = {}
        for name in ("minilm", BERT_BASE):
            out = subprocess.run(
                [sys.executable, __file__, "--child", name],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            results[name] = json.loads(out.stdout.strip().splitlines()[-1])
    rows = list(results["minilm"])
    print(f"{'RSS, MB':<22} {'MiniLM-L6':>10} {'bert-base':>10}")
    for row in rows:
        print(f"{row:<22} {results['minilm'][row]:>10.0f} {results[BERT_BASE][row]:>10.0f}")
    for name, numbers in results.items():
        print(
            f"{name}: load +{numbers['loaded'] - numbers['import']:.0f} MB, one 512-piece run "
            f"+{numbers['after 512-piece run'] - numbers['loaded']:.0f} MB held "
            f"(peak {numbers['peak']:.0f} MB)"
        )


if __name__ == "__main__":
    main()
