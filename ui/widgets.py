"""Widgets every page shares: layer/head pickers, figure display with export, CSV downloads."""

from __future__ import annotations

import io
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st

import core
from ui import charts, course_charts, explain_charts, html_heatmap, learning_charts
from ui.escape import literal

# Plotly's default for numeric axes, "hide past div", hides a tick label that would stick out of
# the figure. To know, it measures every label's box on every draw: half of what a 32-piece
# heatmap costs to redraw (40 -> 20 ms). The app fits its margins to its labels
# (charts.label_margin, automargin on), so no label sticks out and none was ever hidden; the
# phone check in tests/test_browser_devices.py (assert_phone_dark) looks on every page.
# Set here, where figures meet Streamlit: the chart modules import no streamlit, and Streamlit's
# template ("streamlit", registered when streamlit is imported) must be merged in for its light
# and dark theme to apply. Merged once: a default written "streamlit+x" is merged anew for every
# figure built, ~5 ms each.
pio.templates["attention_explorer"] = pio.templates.merge_templates(
    pio.templates["streamlit"],
    go.layout.Template(
        layout={
            "xaxis": {"ticklabeloverflow": "allow"},
            "yaxis": {"ticklabeloverflow": "allow"},
        }
    ),
)
pio.templates.default = "attention_explorer"


def layer_head_picker(
    model: core.BertEncoder,
    key_prefix: str = "",
    columns: bool = True,
    in_browser: bool = False,
) -> tuple[int, int]:
    """Two sliders (bound to the URL) choosing a layer and a head, both counted from 0.

    in_browser: moving them reruns nothing. The page shows a figure that carries every head
    (charts.every_head_heatmap, explorer_charts.every_head_view_figure, or
    html_heatmap.attention_grid with every_head) and calls
    head_switch() (and shows nothing else that depends on the head); Streamlit still writes
    the new values to the URL and hands them to the next run.
    """
    left, right = st.columns(2) if columns else (st.container(), st.container())
    on_change = "ignore" if in_browser else "rerun"
    with left:
        layer = st.slider(
            "Layer",
            0,
            model.n_layers - 1,
            0,
            key=f"{key_prefix}layer",
            bind="query-params",
            on_change=on_change,
        )
    with right:
        head = st.slider(
            "Head",
            0,
            model.n_heads - 1,
            0,
            key=f"{key_prefix}head",
            bind="query-params",
            on_change=on_change,
        )
    # The URL may carry numbers from a larger model: clamp instead of failing.
    return min(int(layer), model.n_layers - 1), min(int(head), model.n_heads - 1)


# When a Layer or Head slider on the page changes value, show the matching head in every figure
# that carries all heads: an every-head heatmap (charts.every_head_heatmap), a query's rows in
# two sentences (explorer_charts.every_head_compare_rows), the model view's frame
# (explorer_charts.model_view_grid), the Head view's lines (explorer_charts.every_head_view_figure)
# and the Overview's HTML heatmap (html_heatmap.attention_grid,
# which the script also gives a hover and a click readout, as it does html_heatmap.value_grid's
# image of a larger matrix). A fixed script: it reads numbers (the
# sliders' values, the figures' own layout.meta, the data-heads of their stores (stores_aside)
# and of the Overview's heatmap) and writes text only through
# textContent and title, so a label read from the page stays text; no visitor text is ever part
# of the script itself (a stored title is the escaped one the server would draw). Installed once
# per browser tab.
# Streamlit passes st.html through DOMPurify, which drops a script whose text holds "<" before a
# letter or "/" (a tag, to it): the script writes "<b>" as "\x3cb>".
HEAD_SWITCH_JS = """<script>
(() => {
  if (window.__attentionHeadSwitch) return;
  window.__attentionHeadSwitch = true;
  const valueOf = (main, label) => {
    const input = main.querySelector(
      '[data-testid="stSlider"] input[type="range"][aria-label="' + label + '"]');
    return input ? Number(input.value) : NaN;
  };
  // base64 of little-endian uint16 counts of 1/steps -> rows of cols weights
  const unpack = (packed, rows, cols, steps) => {
    const bytes = Uint8Array.from(atob(packed), c => c.charCodeAt(0));
    const view = new DataView(bytes.buffer);
    return Array.from({length: rows}, (_, row) => Array.from({length: cols},
      (_, col) => view.getUint16(2 * (row * cols + col), true) / steps));
  };
  // Streamlit's theme draws figure titles in bold; a title set here must ask for it.
  const boldTitle = text => ({'title.text': '\\x3cb>' + text + '\\x3c/b>'});
  // layer · H + head of the sliders, or NaN (none yet, or sliders of another model for a moment)
  const chosenIndex = (main, meta) => {
    const layer = valueOf(main, 'Layer'), head = valueOf(main, 'Head');
    if (!Number.isInteger(layer) || !Number.isInteger(head)) return NaN;
    return head >= meta.every_head_of ? NaN : layer * meta.every_head_of + head;
  };
  // A figure's stores, every head's at l·H + h: beside it in the page (show_figure puts them
  // there), found by the id in its layout.meta.store and parsed once per element and id.
  // A store that cannot be read switches nothing, and leaves the other figures' switches be.
  const storesOf = meta => {
    if (!meta.store) return null;
    for (const aside of document.querySelectorAll('.ae-stores')) {
      if (aside.dataset.store !== meta.store) continue;
      if (aside.__store !== meta.store) {
        try {
          aside.__heads = JSON.parse(aside.dataset.heads);
        } catch (error) {
          return null;
        }
        aside.__store = meta.store;
      }
      return aside.__heads;
    }
    return null;
  };
  // explorer_charts.packed_lines -> one SVG path per opacity level (1..levels), written as
  // explorer_charts.line_path writes it: (0, query) to (1, key), in data coordinates
  const levelPaths = (view, packed) => {
    const bytes = Uint8Array.from(atob(packed), c => c.charCodeAt(0));
    const paths = Array.from({length: view.levels}, () => []);
    for (let i = 0; i + 2 < bytes.length; i += 3) {
      paths[bytes[i + 2] - 1].push('M0,' + (view.start + bytes[i]) + 'L1,' + (view.start + bytes[i + 1]));
    }
    return paths.map(lines => lines.length ? lines.join('') : view.no_lines);
  };
  // A head view switched to head `index`. Per drawn head (a group): its legend entry, a trace,
  // and its path shapes, one per level; the Head slider's head first (hidden when "more" draws
  // it too), then "more". The shapes are replaced as one array: plotly then redraws only the
  // shapes (~5 ms), where an edit of each shape's path redraws the whole figure (~25 ms).
  // Only the first group can change head. The "more" groups keep their heads and whatever the
  // legend made of them, and so does the first on another layer of the same head; a new head
  // in the first group is shown (unless "more" draws it).
  const switchHeadView = (gd, meta, heads, index) => {
    const view = meta.head_view, n = meta.every_head_of;
    const head = index % n, layer = (index - head) / n;
    const newHead = meta.shown % n !== head;
    const shown = !view.more.includes(head), name = 'head ' + head;
    const shapes = gd.layout.shapes.map(shape => Object.assign({}, shape));
    [head, ...view.more].forEach((drawn, group) => {
      levelPaths(view, heads[layer * n + drawn].lines).forEach((path, level) => {
        const shape = shapes[group * view.levels + level];
        shape.path = path;
        if (newHead && group === 0) {
          Object.assign(shape, {visible: shown, legendgroup: name});
          shape.line = Object.assign({}, shape.line, {color: view.colours[head]});
        }
      });
    });
    meta.shown = index;  // what is drawn now; not a plotly attribute, so setting it draws nothing
    const layout = Object.assign({shapes: shapes}, boldTitle(heads[index].title));
    if (!newHead) return window.Plotly.relayout(gd, layout);
    const entry = {name: [name], legendgroup: [name], 'line.color': [view.colours[head]]};
    // a legend entry's visibility is a "calc" edit: plotly would redraw everything
    if (gd.data[0].visible !== shown) entry.visible = [shown];
    return window.Plotly.update(gd, entry, layout, [0]);
  };
  // The sliders' head into one figure, by the kind of store it carries; nothing if shown.
  const showIn = (main, gd) => {
    const meta = gd.layout && gd.layout.meta;
    const index = meta ? chosenIndex(main, meta) : NaN;
    if (!Number.isInteger(index) || !gd.data || !gd.data[0]) return;
    const frame = meta.frame;  // explorer_charts.model_view_grid: its frame is shape 0
    if (frame) {
      const head = index % meta.every_head_of, layer = (index - head) / meta.every_head_of;
      const edge = i => i * frame.step - 0.5 - frame.gap / 2;  // the gap before thumbnail i
      const side = frame.size + frame.gap, shape = (gd.layout.shapes || [])[0];
      if (!shape || (shape.x0 === edge(head) && shape.y0 === edge(layer))) return;
      // The shapes replaced as one array: plotly redraws only them. An edit of shape 0's x0
      // and y0 made it recompute and redraw the grid's whole heatmap (~50 ms).
      const moved = Object.assign({}, shape, {x0: edge(head), x1: edge(head) + side,
        y0: edge(layer), y1: edge(layer) + side});
      window.Plotly.relayout(gd, {shapes: [moved, ...gd.layout.shapes.slice(1)]});
      return;
    }
    const heads = storesOf(meta), store = heads && heads[index];
    if (!store) return;
    if (meta.head_view) {  // explorer_charts.every_head_view_figure: the head drawn is meta.shown
      if (meta.shown !== index) switchHeadView(gd, meta, heads, index);
      return;
    }
    if (gd.data[0].meta === index) return;  // trace 0's meta: the head shown
    if (store.bars) {  // explorer_charts.every_head_compare_rows: one bar trace per sentence
      const traces = store.bars.map((_, t) => t);
      const y = store.bars.map((packed, t) => unpack(packed, 1, meta.bar_lengths[t], meta.steps)[0]);
      window.Plotly.update(gd, {y: y, meta: traces.map(() => index)}, boldTitle(store.title), traces);
      return;
    }
    // charts.every_head_heatmap: the head's weights and colour scale in trace 0
    const weights = unpack(store.weights, meta.pieces, meta.pieces, meta.steps);
    window.Plotly.update(gd, {z: [weights], zmax: [store.zmax], meta: [index]},
      boldTitle(store.title), [0]);
  };
  const showChosenHead = () => {
    const main = document.querySelector('[data-testid="stMain"]');
    if (!main || !window.Plotly) return;
    const figures = [];
    for (const gd of main.querySelectorAll('.js-plotly-plot')) {
      const meta = gd.layout && gd.layout.meta;
      if (!meta || !Number.isInteger(meta.every_head_of)) continue;
      // After any redraw (a resize, a theme, a new plot that dropped listeners) show the
      // slider's head again: hooked anew each time, never twice.
      gd.removeListener('plotly_afterplot', showChosenHead);
      gd.on('plotly_afterplot', showChosenHead);
      figures.push(gd);
    }
    // One figure per frame, so the first is on screen without waiting for the others: in page
    // order, but a grid's frame last: the head itself is what the visitor watches, the frame
    // only marks where it sits. Each figure reads the sliders when its turn comes, so a late
    // one never shows an old head.
    figures.sort((a, b) => Boolean(a.layout.meta.frame) - Boolean(b.layout.meta.frame));
    const next = () => {
      const gd = figures.shift();
      if (!gd) return;
      showIn(main, gd);
      requestAnimationFrame(() => setTimeout(next, 0));
    };
    next();
  };
  new MutationObserver(showChosenHead).observe(document.body,
    {subtree: true, attributes: true, attributeFilter: ['value']});

  // ---- html_heatmap.attention_grid: one head as HTML cells or an image (the Overview's) ----
  // html_heatmap.VIRIDIS as [r, g, b] (tests/test_html_heatmap.py checks they agree)
  const STOPS = [[68, 1, 84], [72, 40, 120], [62, 73, 137], [49, 104, 142], [38, 130, 142], [31, 158, 137], [53, 183, 121], [110, 206, 88], [181, 222, 43], [253, 231, 37]];
  // html_heatmap.cell_rgb, the same float64 operations in the same order
  const paint = (weight, zmax) => {
    const where = Math.min(Math.max(weight / zmax, 0), 1) * (STOPS.length - 1);
    const lower = Math.min(Math.floor(where), STOPS.length - 2), frac = where - lower;
    return STOPS[lower].map((low, c) => Math.floor(low * (1 - frac) + STOPS[lower + 1][c] * frac + 0.5));
  };
  const hex = rgb => '#' + rgb.map(v => v.toString(16).padStart(2, '0')).join('');
  const luminance = rgb => {  // charts.luminance (WCAG)
    const lin = rgb.map(v => v / 255).map(c => c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4));
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2];
  };
  const headsOf = fig => fig.__heads || (fig.__heads = JSON.parse(fig.dataset.heads));
  const countsOf = (fig, index) => {  // the head's weights as k / steps, row after row
    fig.__counts = fig.__counts || {};
    if (!fig.__counts[index]) {
      const bytes = Uint8Array.from(atob(headsOf(fig)[index].weights), c => c.charCodeAt(0));
      const view = new DataView(bytes.buffer);
      fig.__counts[index] = Array.from({length: bytes.length / 2}, (_, k) => view.getUint16(2 * k, true));
    }
    return fig.__counts[index];
  };
  // More than NUMBERS_UP_TO pieces: one pixel per cell, drawn on a canvas and shown as a PNG.
  const paintImage = (image, counts, steps, zmax, n) => {
    const canvas = document.createElement('canvas');
    canvas.width = n; canvas.height = n;
    const context = canvas.getContext('2d'), pixels = context.createImageData(n, n);
    counts.forEach((count, k) => pixels.data.set([...paint(count / steps, zmax), 255], 4 * k));
    context.putImageData(pixels, 0, 0);
    image.src = canvas.toDataURL('image/png');
    return image.decode();
  };
  const paintCells = (fig, counts, steps, zmax) => {
    fig.querySelectorAll('.ae-grid i').forEach((cell, k) => {
      const rgb = paint(counts[k] / steps, zmax);
      cell.style.background = hex(rgb);
      const hundredths = Math.floor((counts[k] + steps / 200) / (steps / 100));  // number_text
      cell.textContent = hundredths >= 100 ? '1.0' : '.' + String(hundredths).padStart(2, '0');
      cell.style.color = luminance(rgb) > 0.3 ? '#000000' : '#ffffff';
    });
  };
  const showInGrid = (main, fig) => {
    const index = chosenIndex(main, {every_head_of: Number(fig.dataset.everyHeadOf)});
    const store = Number.isInteger(index) ? headsOf(fig)[index] : null;
    if (!store || Number(fig.dataset.shown) === index) return;
    const steps = Number(fig.dataset.steps), counts = countsOf(fig, index);
    const image = fig.querySelector('img.ae-cells');
    const painted = image ? paintImage(image, counts, steps, store.zmax, Number(fig.dataset.pieces))
      : Promise.resolve(paintCells(fig, counts, steps, store.zmax));
    fig.querySelector('.ae-title').textContent = store.title;
    fig.querySelector('.ae-note').textContent = store.note;
    fig.querySelector('.ae-top').textContent = store.top;
    fig.dataset.shown = String(index);
    // announced once painted (a bench listens); a decode cut short by a newer head is no error
    painted.then(() => fig.dispatchEvent(new CustomEvent('ae-headshown', {bubbles: true})), () => {});
  };
  const showInGrids = () => {
    const main = document.querySelector('[data-testid="stMain"]');
    if (main) main.querySelectorAll('.ae-heatmap').forEach(fig => showInGrid(main, fig));
  };
  // A slider moved, or a figure arrived from a run that began before it did.
  new MutationObserver(showInGrids).observe(document.body,
    {subtree: true, childList: true, attributes: true, attributeFilter: ['value']});
  // The cell under the pointer: its query, key and weight, from the figure's own labels and
  // numbers. Hover puts it in the cell's tooltip; a click or a tap (phones have no hover)
  // writes it under the figure.
  const describe = (fig, query, key) => {
    const n = Number(fig.dataset.pieces);
    const weight = countsOf(fig, Number(fig.dataset.shown))[query * n + key] / Number(fig.dataset.steps);
    return 'query ' + query + ': ' + fig.querySelectorAll('.ae-query')[query].textContent +
      '\\nkey ' + key + ': ' + fig.querySelectorAll('.ae-key')[key].textContent +
      '\\nweight ' + weight.toFixed(3);
  };
  // html_heatmap.value_grid's image: its axis titles, labels and data-values (text, row after
  // row; an empty one is data-blank's), all read as text
  const describeValue = (fig, row, column) => {
    fig.__values = fig.__values || fig.dataset.values.split(',');
    const value = fig.__values[row * Number(fig.dataset.columns) + column];
    const text = selector => fig.querySelector(selector).textContent;
    // a dimension's label is its number: said once
    const named = (label, index) => label === String(index) ? '' : ': ' + label;
    return text('.ae-axis-query') + ' ' + row + named(fig.querySelectorAll('.ae-query')[row].textContent, row) +
      '\\n' + text('.ae-axis-key') + ' ' + column + named(fig.querySelectorAll('.ae-key')[column].textContent, column) +
      '\\n' + text('.ae-bar-title') + ' ' + (value === '' ? fig.dataset.blank : value);
  };
  const cellAt = event => {  // {target, fig, text}: the cell's element, figure and description; or null
    const target = event.target;
    if (!target.closest) return null;
    const fig = target.closest('.ae-heatmap, .ae-matrix[data-values]');
    if (!fig) return null;
    const heatmap = fig.matches('.ae-heatmap');
    const rows = Number(heatmap ? fig.dataset.pieces : fig.dataset.rows);
    const columns = Number(heatmap ? fig.dataset.pieces : fig.dataset.columns);
    let query, key;
    if (heatmap && target.matches('.ae-grid i')) {  // a cell of its own, in row order
      const place = Array.prototype.indexOf.call(fig.querySelectorAll('.ae-grid i'), target);
      query = Math.floor(place / columns); key = place % columns;
    } else if (target.matches('img.ae-cells')) {  // one pixel per cell
      const at = (offset, size, n) => Math.min(n - 1, Math.max(0, Math.floor(offset / size * n)));
      query = at(event.offsetY, target.clientHeight, rows);
      key = at(event.offsetX, target.clientWidth, columns);
    } else {
      return null;
    }
    return {target, fig, text: (heatmap ? describe : describeValue)(fig, query, key)};
  };
  const toTooltip = event => {
    const cell = cellAt(event);
    if (cell) cell.target.title = cell.text;
  };
  document.addEventListener('mouseover', toTooltip);
  document.addEventListener('mousemove', toTooltip);
  document.addEventListener('click', event => {
    const cell = cellAt(event);
    if (!cell) return;
    cell.fig.querySelector('.ae-readout').textContent = cell.text.split('\\n').join(' · ');
  });
})();
</script>"""


def head_switch() -> None:
    """The script that switches every-head figures in the browser, and gives the HTML heatmaps
    and value grids drawn as one image their hover and click readout (see HEAD_SWITCH_JS).
    Called unconditionally by a page that may draw one: it is an element of the page, and one
    present on some runs only would shift the widgets after it (they lose keyboard focus)."""
    st.html(HEAD_SWITCH_JS, unsafe_allow_javascript=True)


def image_format() -> str:
    """The format of the plotly camera button (PNG or SVG), chosen once in the sidebar."""
    return st.session_state.get("image_format", "png")


def image_format_picker() -> None:
    with st.sidebar:
        st.radio(
            "Camera button saves figures as",
            ["png", "svg"],
            horizontal=True,
            key="image_format",
            bind="query-params",  # the URL holds the label: PNG or SVG
            format_func=str.upper,
        )


def show_figure(
    fig: go.Figure,
    key: str | None = None,
    filename: str = "attention-explorer",
    on_select: Callable[[], None] | None = None,
) -> None:
    """st.plotly_chart with the export button set up (PNG/SVG at 2x, no plotly logo).

    on_select: a callback run when the user clicks a scatter point (read the points from
    st.session_state[key].selection); heatmap cells cannot be selected (streamlit#8760).
    A figure that carries every head's stores (layout.meta["heads"]) is shown without them,
    after an element of their own (stores_aside says why): the figure given is changed to name
    them instead, so show it once.
    """
    config = {
        "displaylogo": False,
        "toImageButtonOptions": {
            "format": image_format(),
            "filename": filename,
            "scale": 2,
        },
    }
    aside = stores_aside(fig)
    if aside is not None:  # first, so the script finds the stores once the figure is drawn
        _show_stores(aside)
    if on_select is None:
        st.plotly_chart(fig, key=key, config=config, width="stretch")
    else:
        st.plotly_chart(
            fig,
            key=key,
            config=config,
            width="stretch",
            on_select=on_select,
            selection_mode="points",
        )


# Streamlit draws a figure through its theme: it turns the figure's whole spec into a string,
# rewrites the colours in it and parses it again, on every draw (twice when a figure mounts).
# An every-head figure's stores (72 heads of packed weights for MiniLM) are most of its spec and
# hold no colour, so they travel beside it, as the Overview's HTML heatmap keeps its own in
# data-heads: text in an attribute, parsed by HEAD_SWITCH_JS with JSON.parse, never markup.
# With the model view grid in float32, the colour rewrites of an Attention heatmaps update took
# ~12 ms of CPU instead of ~33 (profiles); the update as a whole moved within the noise.
def stores_aside(fig: go.Figure) -> html_heatmap.HtmlFigure | None:
    """Take every head's stores out of fig's layout.meta into the element that carries them.

    None for a figure without them. The figure keeps the rest of its meta and, in
    meta["store"], the id that HEAD_SWITCH_JS finds its stores by.
    """
    meta = fig.layout.meta
    if not isinstance(meta, dict) or "heads" not in meta:
        return None
    store_id, aside = html_heatmap.stores_element(meta["heads"])
    fig.layout.meta = {**{k: v for k, v in meta.items() if k != "heads"}, "store": store_id}
    return aside


def _show_stores(aside: html_heatmap.HtmlFigure) -> None:
    """The stores' element, made by html_heatmap.stores_element (which escapes it)."""
    st.html(aside)


# Labels up to which grouped weights are HTML rows (html_heatmap.bar_rows), past which plotly's
# grouped bars: a page whose first figure is a few bars then loads no plotly.js (~0.6 s of a
# browser's main thread), and a long sentence keeps a chart that fits its hundreds of keys.
HTML_BARS_UP_TO = 24


def show_weight_bars(
    labels: Sequence[str],
    series: Mapping[str, np.ndarray],
    title: str,
    key: str,
    y_title: str = "weight",
    filename: str = "attention-explorer",
    plotly_figure: Callable[[], go.Figure] | None = None,
    decimals: int = 2,
) -> None:
    """Each label's weights or shares, one bar per series: HTML rows for a few labels, else
    plotly's grouped bars, plotly_figure() or course_charts.weight_bars. The same colours (in
    series order), numbers and title either way. A negative value goes to plotly too: its bars
    grow down from zero. decimals: of the HTML bars' numbers."""
    values = [np.asarray(v, dtype=np.float64) for v in series.values()]
    if len(labels) <= HTML_BARS_UP_TO and all((v >= 0).all() for v in values):
        colours = [
            charts.QUALITATIVE_COLOURS[k % len(charts.QUALITATIVE_COLOURS)]
            for k in range(len(series))
        ]
        show_html_figure(
            html_heatmap.bar_rows(
                labels, series, title, y_title, colours, name=key, decimals=decimals
            )
        )
    elif plotly_figure is not None:
        show_figure(plotly_figure(), key, filename)
    else:
        show_figure(course_charts.weight_bars(labels, series, title, y_title), key, filename)


def show_shared_word(
    word: str,
    rows: Mapping[str, tuple[np.ndarray, Sequence[str], int]],
    key: str,
    filename: str,
) -> None:
    """Where a word shared by two sentences looks in each (sentence -> (its softmax row, its
    tokens, the word's position)): two HTML bar charts side by side while both sentences have
    at most HTML_BARS_UP_TO tokens (keys key_A and key_B), else learning_charts'
    shared_word_weights in plotly (key)."""
    (weights_a, tokens_a, index_a), (weights_b, tokens_b, index_b) = rows.values()
    if max(len(tokens_a), len(tokens_b)) <= HTML_BARS_UP_TO:
        largest = float(max(np.max(weights_a), np.max(weights_b)))  # one scale for both
        for column, (sentence_name, (weights, tokens, index)) in zip(
            st.columns(2), rows.items(), strict=True
        ):
            with column:
                show_html_figure(
                    learning_charts.shared_word_bars(
                        word,
                        weights,
                        tokens,
                        index,
                        sentence_name,
                        largest,
                        name=f"{key}_{sentence_name}",
                    )
                )
    else:
        figure = learning_charts.shared_word_weights(
            word, weights_a, tokens_a, index_a, weights_b, tokens_b, index_b
        )
        show_figure(figure, key, filename)


def show_mixing(
    matrix: np.ndarray, labels: Sequence[str], title: str, unit: str, key: str, filename: str
) -> None:
    """An (n, n) rollout, flow or norm mixing matrix (row i: a position after the layer, column
    j: an input piece): HTML cells with their shares written in while small
    (learning_charts.fits_a_grid), one image of them up to fits_an_image, else
    explain_charts.mixing_heatmap. Viridis over the shares' own range either way."""
    if learning_charts.fits_an_image(matrix):
        show_html_figure(
            learning_charts.pair_grid(
                matrix,
                labels,
                title,
                name=key,
                colorbar_title="share",
                zmax=None,
                axis_titles=("position after the layer", f"input {unit} (layer 0)"),
                shape_in_title=False,
            )
        )
    else:
        show_figure(explain_charts.mixing_heatmap(matrix, labels, title, unit=unit), key, filename)


def show_scores_by_method(
    scores: Mapping[str, np.ndarray],
    tokens: Sequence[str],
    title: str,
    unit: str,
    key: str,
    filename: str,
) -> None:
    """Explanation scores (method label -> (n,) scores), a row per method scaled to its largest
    |score|: HTML up to learning_charts.fits_an_image (numbers written in, then one image),
    else explain_charts.methods_heatmap in plotly."""
    method_labels = list(scores)
    matrix = np.array([scores[label] for label in method_labels])  # (methods, n)
    if learning_charts.fits_an_image(matrix):
        show_html_figure(
            explain_charts.methods_grid(matrix, method_labels, tokens, title, unit, key)
        )
    else:
        figure = explain_charts.methods_heatmap(matrix, method_labels, tokens, title)
        show_figure(figure, key, filename)


def show_matrix(
    matrix: np.ndarray,
    tokens: Sequence[str],
    title: str,
    key: str,
    filename: str,
    square: bool,
    x_title: str = "dimension",
    zmax: float | None = 1.0,
    colorbar_title: str = "weight",
) -> None:
    """A token-by-token (square) or token-by-dimension matrix, as HTML where it fits, so that
    a page of such matrices loads no plotly.js: cells with every number in them while it is
    small (learning_charts.fits_a_grid); a few tokens' wide vectors (up to 12 rows of 384) as
    one image (fits_a_strip); else, up to DRAW_LIMIT tokens and 128 columns, one image of the
    cells with a readout (fits_an_image). Past those, learning_charts' plotly heatmap, which
    zooms and draws the first DRAW_LIMIT tokens, as the page's limit_note says. zmax,
    colorbar_title: a square matrix's colour scale, as pair_matrix takes them."""
    pair_scale = {"zmax": zmax, "colorbar_title": colorbar_title}
    written = learning_charts.fits_a_grid(matrix)
    whole = learning_charts.fits_an_image(matrix, max_rows=learning_charts.DRAW_LIMIT)
    if square and whole:
        show_html_figure(learning_charts.pair_grid(matrix, tokens, title, name=key, **pair_scale))
    elif square:
        show_figure(learning_charts.pair_matrix(matrix, tokens, title, **pair_scale), key, filename)
    elif not written and learning_charts.fits_a_strip(matrix):  # a few tokens' wide vectors
        show_html_figure(learning_charts.token_strip(matrix, tokens, title, key, x_title))
    elif whole:
        columns = [str(k) for k in range(matrix.shape[1])]
        show_html_figure(
            learning_charts.token_grid(matrix, tokens, columns, title, name=key, x_title=x_title)
        )
    else:
        show_figure(learning_charts.token_matrix(matrix, tokens, title, x_title), key, filename)


def show_html_figure(figure: html_heatmap.HtmlFigure) -> None:
    """A figure drawn as HTML by ui/html_heatmap.py (visitor text escaped there): its markup
    holds data, and no script."""
    st.html(figure)


def matrix_csv(matrix: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str]) -> str:
    """A labelled CSV of a 2-D matrix; labels are quoted so commas in tokens stay inside cells."""
    buffer = io.StringIO()
    buffer.write(",".join([_csv_label("")] + [_csv_label(c) for c in col_labels]) + "\n")
    for label, row in zip(row_labels, np.asarray(matrix), strict=True):
        buffer.write(",".join([_csv_label(label)] + [f"{v:.6g}" for v in row]) + "\n")
    return buffer.getvalue()


def static_table(columns: Mapping[str, Sequence], decimals: Mapping[str, int]) -> None:
    """A few rows as a static table (st.table), numbers written to the decimals given per column.

    For tables of a handful of rows: st.dataframe's scrolling grid loads a script of its own
    (~0.13 s of a page load, side by side), which a table this small does not need. st.table
    reads its cells as Markdown, so text cells go through escape.literal(). The numbers are
    written here as text, not through pandas' Styler, which needs jinja2 for it; st.table
    aligns text cells left.
    """
    frame = pd.DataFrame(
        {
            name: [_table_cell(value, decimals.get(name)) for value in values]
            for name, values in columns.items()
        }
    )
    st.table(frame, hide_index=True)


def _table_cell(value: object, places: int | None) -> object:
    """A cell as static_table shows it: text escaped, a number to `places` decimals if given."""
    if isinstance(value, str):
        return literal(value)
    if places is None:
        return value
    return f"{value:.{places}f}"


def numbered(tokens: Sequence[str]) -> list[str]:
    """'3:bank' style labels so repeated tokens stay distinct in CSV headers."""
    return [f"{i}:{t}" for i, t in enumerate(tokens)]


def _csv_label(label: str) -> str:
    """A label as one quoted CSV cell: commas and quotes in a token stay inside it."""
    return '"' + str(label).replace('"', '""') + '"'


def every_head_csv(attentions: np.ndarray, labels: Sequence[str]) -> str:
    """(L, H, n, n) -> CSV: one row per layer, head and query, one column per key."""
    buffer = io.StringIO()
    header = ["layer", "head", _csv_label("query")] + [_csv_label(k) for k in labels]
    buffer.write(",".join(header) + "\n")
    for layer, heads in enumerate(attentions):
        for head, attn_weights in enumerate(heads):
            for query, row in zip(labels, attn_weights, strict=True):
                values = ",".join(f"{v:.6g}" for v in row)
                buffer.write(f"{layer},{head},{_csv_label(query)},{values}\n")
    return buffer.getvalue()


def download_every_head(
    weights: Callable[[], np.ndarray],
    labels: Sequence[str],
    filename: str,
    key: str | None = None,
) -> None:
    """A download button for every head's weights as one CSV (built lazily, only when clicked).

    For a page whose sliders switch heads in the browser: the server does not know the head on
    screen until the next run, so a one-head CSV could be another head's.
    weights: returns the (L, H, n, n) weights as shown, from the page's Trace fetched again
    (ui.state.refetch); the button keeps the callable, not a copy, for as long as the visitor's
    page is open.
    """
    st.download_button(
        "Download every head as CSV",
        data=lambda: every_head_csv(weights(), labels),
        file_name=f"{filename}.csv",
        mime="text/csv",
        key=key,
        icon=":material/download:",
        on_click="ignore",
    )


def download_matrix(
    matrix: np.ndarray,
    row_labels: Sequence[str],
    col_labels: Sequence[str],
    filename: str,
    label: str = "Download as CSV",
    key: str | None = None,
) -> None:
    """A download button for a matrix as CSV (built lazily, only when clicked)."""
    # The button's callable lives as long as the visitor's page. A slice of a Trace array is a
    # view that keeps the whole (L, H, n, n) block alive (~75 MB at 512 tokens) after the Trace
    # cache has let it go; one copied (n, n) matrix is ~1 MB.
    own_copy = np.array(matrix, copy=True)
    st.download_button(
        label,
        data=lambda: matrix_csv(own_copy, row_labels, col_labels),
        file_name=f"{filename}.csv",
        mime="text/csv",
        key=key,
        icon=":material/download:",
        on_click="ignore",  # downloading must not rerun the page
    )


def whole_number_input(
    label: str, min_value: int, max_value: int, value: int, key: str, **kwargs: object
) -> int:
    """A number input for a whole number, bound to the URL, safe against any URL value.

    Streamlit seeds a bound number input from the URL. For a whole-number input it calls int()
    on the parsed value, and a URL value such as 1e309 is infinity there: int() raises
    OverflowError inside Streamlit, which it does not catch, and the page shows an error box.
    A float input is checked for finiteness and range instead, and falls back to the default;
    format "%.0f" shows it as the whole number it is.
    """
    chosen = st.number_input(
        label,
        min_value=float(min_value),
        max_value=float(max_value),
        value=float(value),
        step=1.0,
        format="%.0f",
        key=key,
        bind="query-params",
        **kwargs,
    )
    return min(max(round(chosen), min_value), max_value)


def section_tabs(sections: Mapping[str, Callable[[], None]], key: str) -> None:
    """One tab per section of a long page, and only the open tab drawn.

    A closed tab sends nothing to the browser. Each plotly figure costs a browser ~50-110 ms of
    main-thread work when a page loads and again on every update (its layout and text
    measuring; bench/bench_browser.py), so a lesson of a dozen figures drawn at once was slow on
    a phone. The URL keeps the open tab (bound to `key`), so a link opens the section it was
    copied from; opening another tab reruns the page.
    """
    tabs = st.tabs(list(sections), key=key, on_change="rerun", bind="query-params")
    for tab, draw in zip(tabs, sections.values(), strict=True):
        if tab.open:
            with tab:
                draw()


def folded(label: str, key: str, draw: Callable[[], None]) -> None:
    """An expander whose content is drawn only while it is open.

    A table folded away in a plain expander is still sent and laid out: an st.dataframe costs
    a browser ~140 ms of main-thread work on every load and every update that changes it
    (bench/bench_browser.py), for a detail most visitors never open. Opening this one reruns
    the page (a cached rerun) and draws it.
    """
    box = st.expander(label, key=key, on_change="rerun")
    if box.open:
        with box:
            draw()


def token_picker(label: str, tokens: Sequence[str], default: int, key: str) -> int:
    """A slider over token positions 0 … n−1, bound to the URL, with the chosen token named.

    The URL holds the position, not the token: a select box would be bound by its label
    ("2: bank"), which goes stale as soon as the sentence changes, so a copied link would reopen
    on another token. A position stays meaningful; one past the end falls back to the default.
    """
    last = len(tokens) - 1
    default = min(max(default, 0), last)
    if last < 1:
        return 0
    position = st.slider(label, 0, last, default, key=key, bind="query-params")
    position = min(max(int(position), 0), last)
    st.caption(f"Position {position}: **{literal(tokens[position], max_chars=40)}**")
    return position
