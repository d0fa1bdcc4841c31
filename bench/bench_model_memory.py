"""Resident memory of a model in the app's own loader: the bundled MiniLM against larger ones.

bert-base-uncased, gpt2, distilgpt2 and HuggingFaceTB/SmolLM2-135M cannot be downloaded here,
and their memory does not depend on what their weights are: a random checkpoint with each one's
sizes is written to a temporary Hugging Face cache in hub layout and loaded by name through
core.load_model, as a server whose allow-list holds it would. The sizes: transformers'
BertConfig defaults (bert-base: 12 layers, 12 heads, d_model 768, 30,522 word pieces) and
GPT2Config defaults (GPT-2 small: 12 layers, 12 heads, d_model 768, 50,257 pieces, 1,024
positions, the output head tied to the word table); distilgpt2 is the same with 6 layers;
SmolLM2-135M as its config.json on the hub says (30 layers, 9 query and 3 key/value heads,
d_model 576, d_ff 1,536, 49,152 pieces, tied head, RoPE θ 100,000). Each model is measured in a
fresh process: RSS after `import core`, after the load (and the anonymous part of it: memory the
kernel cannot drop, where the memory-mapped weight file's pages can be), after a 12-word
sentence, after one 512-piece run with its Trace held (as the cache holds it), for a decoder
after the next-word panel's six runs, and the peak.
"minilm+distilgpt2" loads both in one process, MiniLM first, each with a 512-piece Trace held
(and the decoder's next-word runs): what one server holds when a visitor of each has come by,
before Streamlit and the caches' other results.
Prints, never asserts.

    python bench/bench_model_memory.py [name ...]    (default: every model)
    python bench/bench_model_memory.py minilm+distilgpt2
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORDS = "the river bank flooded and money in the bank grew while time flies".split()
TEXT = " ".join(WORDS[i % len(WORDS)] for i in range(700))  # > 512 pieces: cut to 512
BERT_BASE = "bert-base-uncased"
GPT2, DISTILGPT2, SMOLLM2 = "gpt2", "distilgpt2", "HuggingFaceTB/SmolLM2-135M"
COMMIT = "0" * 40


def status_mb(field: str) -> float:
    """A memory line of /proc/self/status in MB: VmRSS now, VmHWM the peak of this process
    (ru_maxrss is not: it keeps the parent's peak across exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mb() -> float:
    return status_mb("VmRSS")


def _snapshot(cache: Path, repo_id: str) -> Path:
    """An empty snapshot folder of `repo_id` in the hub's cache layout, refs/main pointing at it."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    return snapshot


def write_bert_base_cache(cache: Path) -> None:
    """A random bert-base checkpoint in the hub's cache layout (models--…/snapshots/<commit>)."""
    import torch
    from transformers import BertConfig, BertModel

    snapshot = _snapshot(cache, BERT_BASE)
    config = BertConfig()  # the defaults are bert-base's sizes
    torch.manual_seed(0)
    BertModel(config).save_pretrained(snapshot, safe_serialization=True)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    filler = [f"w{i}" for i in range(config.vocab_size - len(specials) - len(set(WORDS)))]
    (snapshot / "vocab.txt").write_text("\n".join(specials + sorted(set(WORDS)) + filler) + "\n")
    (snapshot / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": True}))


def _byte_level_tokenizer(snapshot: Path, special: str) -> None:
    """A small byte-level BPE tokenizer.json (GPT-2's alphabet): its ids stay below any of the
    vocabularies here, and the memory that counts is the weights'."""
    from tokenizers import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer(add_prefix_space=False)
    tokenizer.train_from_iterator([TEXT] * 4, vocab_size=300, special_tokens=[special])
    tokenizer.save(str(snapshot / "tokenizer.json"))


def _write_decoder(cache: Path, repo_id: str, config: object, model_class: str) -> None:
    import torch
    import transformers

    snapshot = _snapshot(cache, repo_id)
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(config)
    model.save_pretrained(snapshot, safe_serialization=True)
    _byte_level_tokenizer(snapshot, "<|endoftext|>")


def write_gpt2_cache(cache: Path, n_layers: int = 12, repo_id: str = GPT2) -> None:
    """A random GPT-2 small (GPT2Config's defaults), or distilgpt2 (the same, 6 layers)."""
    from transformers import GPT2Config

    _write_decoder(cache, repo_id, GPT2Config(n_layer=n_layers), "GPT2LMHeadModel")


def write_smollm2_cache(cache: Path) -> None:
    """A random Llama with SmolLM2-135M's sizes (its config.json on the hub)."""
    from transformers import LlamaConfig

    config = LlamaConfig(
        vocab_size=49_152, hidden_size=576, intermediate_size=1_536, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8_192,
        rope_theta=100_000.0, tie_word_embeddings=True, rms_norm_eps=1e-5,
        bos_token_id=0, eos_token_id=0, pad_token_id=None,
    )  # fmt: skip
    _write_decoder(cache, SMOLLM2, config, "LlamaForCausalLM")


# name -> what writes its checkpoint into the cache (None: the bundled model)
WRITERS: dict[str, Callable[[Path], None] | None] = {
    "minilm": None,
    BERT_BASE: write_bert_base_cache,
    GPT2: write_gpt2_cache,
    DISTILGPT2: lambda cache: write_gpt2_cache(cache, 6, DISTILGPT2),
    SMOLLM2: write_smollm2_cache,
}


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
        hub_ids=frozenset(name for name in WRITERS if name != "minilm"),
        **({"download_dir": Path(cache)} if cache else {}),
    )
    if "+" in name:
        return numbers | measure_beside(name.split("+"), policy)
    model = core.load_model(name, policy)
    numbers["loaded"] = rss_mb()  # safetensors maps the file: pages count once a run reads them
    numbers["loaded, anonymous"] = status_mb("RssAnon")  # what the kernel cannot drop
    numbers["peak after load"] = peak_mb()
    short = model.run(" ".join(WORDS[:12]))  # a sentence as a visitor types one
    numbers["after a 12-word run"] = rss_mb()
    del short
    trace = model.run(TEXT)
    assert trace.n_tokens == 512, trace.n_tokens
    numbers["after 512-piece run"] = rss_mb()
    numbers["512 run, anonymous"] = status_mb("RssAnon")
    numbers["peak"] = peak_mb()
    numbers["trace MB"] = (
        sum(a.nbytes for a in (trace.hidden_states, trace.queries, trace.keys, trace.values))
        + trace.attentions.nbytes
    ) / 1e6
    numbers["weights MB"] = sum(t.nbytes for t in _weight_tensors(model)) / 1e6
    if model.is_decoder:  # the next-word panel: the run as trained and five switched runs
        from core import next_word

        layer_heads = {(0, head) for head in range(model.n_heads)}
        for switches in ({}, {"scale": False}, {"causal": False}, {"positions": False},
                         {"ablate": {(0, 0)}}, {"ablate": layer_heads}):  # fmt: skip
            next_word.next_log_probs(model, TEXT, **switches)
        numbers["after next-word runs"] = rss_mb()
        numbers["peak"] = peak_mb()
    return numbers


def measure_beside(names: list[str], policy: object) -> dict[str, float]:
    """Several models in this one process, each loaded and run on 512 pieces with its Trace
    held (a decoder's next-word runs too), in turn: RSS after each step, and the peak."""
    import core
    from core import next_word

    numbers: dict[str, float] = {}
    held = []
    for name in names:
        model = core.load_model(name, policy)
        short = name.split("/")[-1]
        numbers[f"{short} loaded"] = rss_mb()
        held.append(model.run(TEXT))
        numbers[f"{short} 512 run held"] = rss_mb()
        if model.is_decoder:
            for switches in ({}, {"scale": False}, {"causal": False}, {"positions": False}):
                next_word.next_log_probs(model, TEXT, **switches)
            numbers[f"{short} next-word runs"] = rss_mb()
        numbers[f"{short} anonymous"] = status_mb("RssAnon")
        numbers[f"{short} weights MB"] = sum(t.nbytes for t in _weight_tensors(model)) / 1e6
        held.append(model)
    numbers["peak"] = status_mb("VmHWM")
    return numbers


def _weight_tensors(model: object) -> list:
    """Every distinct tensor the model holds (a tied head counted once)."""
    import torch

    seen: dict[int, torch.Tensor] = {}

    def walk(value: object) -> None:
        if isinstance(value, torch.Tensor):
            seen.setdefault(value.data_ptr(), value)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)
        elif hasattr(value, "__dict__") and not isinstance(value, type):
            for item in vars(value).values():
                walk(item)

    walk(model.layers)
    for name in ("word_embeddings", "position_embeddings", "segment_embeddings", "head_weight"):
        walk(getattr(model, name, None))
    walk(model.embedding_norm)
    walk(model.final_norm)
    return list(seen.values())


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        name, cache = sys.argv[2], os.environ.get("BENCH_CACHE")
        print(json.dumps(measure(name, cache)))
        return
    names = sys.argv[1:] or list(WRITERS)
    with tempfile.TemporaryDirectory(prefix="model-memory-") as cache:
        for part in dict.fromkeys(part for name in names for part in name.split("+")):
            writer = WRITERS[part]
            if writer is not None:
                writer(Path(cache))
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "BENCH_CACHE": cache}
        results = {}
        for name in names:
            out = subprocess.run(
                [sys.executable, __file__, "--child", name],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            results[name] = json.loads(out.stdout.strip().splitlines()[-1])
    rows = list(dict.fromkeys(row for numbers in results.values() for row in numbers))
    short = {name: name.split("/")[-1][:12] for name in names}
    print(f"{'RSS, MB':<22}" + "".join(f" {short[name]:>12}" for name in names))
    for row in rows:
        print(
            f"{row:<22}"
            + "".join(f" {results[name].get(row, float('nan')):>12.0f}" for name in names)
        )
    for name, numbers in results.items():
        if "loaded" not in numbers:  # several models in one process: the table says it
            continue
        print(
            f"{name}: load +{numbers['loaded'] - numbers['import']:.0f} MB, one 512-piece run "
            f"+{numbers['after 512-piece run'] - numbers['loaded']:.0f} MB held "
            f"(peak {numbers['peak']:.0f} MB)"
        )


if __name__ == "__main__":
    main()
