"""Does orjson pay? Figure encoding at 512 word pieces with plotly's two JSON engines.

Streamlit sends every figure as `plotly.io.to_json(figure, validate=False)`, which uses orjson
when it is installed ("auto") and the standard library otherwise. This builds the app's largest
figures from a real 512-token Trace of the bundled model and encodes each one with both engines,
alternating, in one run; it prints the median time and size per figure and the ratios.

    python bench/bench_orjson.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import plotly.io as pio  # noqa: E402

import core  # noqa: E402
from core import head_stats  # noqa: E402
from ui import charts, heatmaps_charts  # noqa: E402

ROUNDS = 15
TEXT = " ".join(["The river bank was quiet after the storm, and the boats stayed tied."] * 60)


def figures() -> dict[str, object]:
    trace = core.load_model().run(TEXT)  # cut to 512 word pieces
    assert trace.n_tokens == 512
    tokens = trace.tokens
    stats = head_stats.head_statistics(trace)
    return {
        "attention heatmap 512 × 512": charts.attention_heatmap(
            trace.attentions[2, 3], tokens, tokens, "t", zmax=None
        ),
        "head statistics, 6 × 12": heatmaps_charts.head_stat_grid(
            stats.entropy, stats.sink, "t", "bits"
        ),
        "hidden states 512 × 384": charts.matrix_heatmap(
            trace.hidden_states[-1], tokens, "hidden states", "dimension"
        ),
    }


def encode_ms(figure: object, engine: str) -> tuple[float, int]:
    start = time.perf_counter()
    text = pio.to_json(figure, validate=False, engine=engine)
    return (time.perf_counter() - start) * 1e3, len(text.encode())


def main() -> None:
    try:
        import orjson  # noqa: F401
    except ImportError:
        sys.exit("install orjson to compare (pip install orjson)")
    print(
        f"{'figure':32} {'json ms':>8} {'orjson ms':>10} {'ratio':>6} {'json MB':>8} {'orjson MB':>9}"
    )
    for name, figure in figures().items():
        times: dict[str, list[float]] = {"json": [], "orjson": []}
        sizes: dict[str, int] = {}
        for _ in range(ROUNDS):
            for engine in ("json", "orjson"):  # alternate, so drift hits both alike
                ms, size = encode_ms(figure, engine)
                times[engine].append(ms)
                sizes[engine] = size
        plain, fast = (statistics.median(times[e]) for e in ("json", "orjson"))
        print(
            f"{name:32} {plain:8.1f} {fast:10.1f} {fast / plain:6.2f} "
            f"{sizes['json'] / 1e6:8.2f} {sizes['orjson'] / 1e6:9.2f}"
        )


if __name__ == "__main__":
    main()
