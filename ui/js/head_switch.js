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
  const boldTitle = text => ({'title.text': '\x3cb>' + text + '\x3c/b>'});
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
  // head_view_charts.packed_lines -> one SVG path per opacity level (1..levels), written as
  // head_view_charts.line_path writes it: (0, query) to (1, key), in data coordinates
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
    const heads = storesOf(meta), store = heads && heads[index];
    if (!store) return;
    if (meta.head_view) {  // head_view_charts.every_head_view_figure: the head drawn is meta.shown
      if (meta.shown !== index) switchHeadView(gd, meta, heads, index);
      return;
    }
    if (gd.data[0].meta === index) return;  // trace 0's meta: the head shown
    if (store.bars) {  // heatmaps_charts.every_head_compare_rows: one bar trace per sentence
      const traces = store.bars.map((_, t) => t);
      const y = store.bars.map((packed, t) => unpack(packed, 1, meta.bar_lengths[t], meta.steps)[0]);
      window.Plotly.update(gd, {y: y, meta: traces.map(() => index)}, boldTitle(store.title), traces);
      return;
    }
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
    // One figure per frame, in page order, so the first is on screen without waiting for the
    // others. Each figure reads the sliders when its turn comes, so a late one never shows an
    // old head.
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
  // A figure's heads by index l·H + h: its own data-heads (the head it was drawn with) and,
  // once it has arrived, every head from the stores element its data-store names (sent after
  // the figure: display.show_html_figure). Parsed once per element.
  const headsOf = fig => {
    if (fig.__every) return fig.__every;
    const own = fig.__heads || (fig.__heads = JSON.parse(fig.dataset.heads));
    const id = fig.dataset.store;
    const aside = id && [...document.querySelectorAll('.ae-stores')].find(el => el.dataset.store === id);
    if (!aside) return own;
    try {
      fig.__every = Object.assign(JSON.parse(aside.dataset.heads), own);
    } catch (error) {
      return own;
    }
    return fig.__every;
  };
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
    if (fig.__picked) {  // the framed cell's readout follows the head now shown
      const text = describe(fig, fig.__picked.query, fig.__picked.key);
      fig.querySelector('.ae-readout').textContent = text.split('\n').join(' · ');
    }
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
      '\nkey ' + key + ': ' + fig.querySelectorAll('.ae-key')[key].textContent +
      '\nweight ' + weight.toFixed(3);
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
      '\n' + text('.ae-axis-key') + ' ' + column + named(fig.querySelectorAll('.ae-key')[column].textContent, column) +
      '\n' + text('.ae-bar-title') + ' ' + (value === '' ? fig.dataset.blank : value);
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
    return {target, fig, query, key, heatmap, text: (heatmap ? describe : describeValue)(fig, query, key)};
  };
  // The clicked or tapped cell stays framed, so the readout under the figure points somewhere:
  // a grid's cell is framed itself; on an image (one pixel per cell) a frame is laid over it.
  const pick = cell => {
    cell.fig.querySelectorAll('.ae-picked').forEach(e => e.classList.remove('ae-picked'));
    cell.fig.querySelectorAll('.ae-mark').forEach(e => e.remove());
    cell.fig.__picked = cell.heatmap ? {query: cell.query, key: cell.key} : null;
    if (cell.target.matches('.ae-grid i')) {
      cell.target.classList.add('ae-picked');
      return;
    }
    const image = cell.target, rows = image.clientHeight, columns = image.clientWidth;
    const n = {rows: Number(cell.fig.dataset.pieces || cell.fig.dataset.rows),
      columns: Number(cell.fig.dataset.pieces || cell.fig.dataset.columns)};
    const mark = document.createElement('span');
    mark.className = 'ae-mark';
    // the grid is the image's offsetParent (position: relative): place the frame in its pixels
    mark.style.left = (image.offsetLeft + cell.key * columns / n.columns) + 'px';
    mark.style.top = (image.offsetTop + cell.query * rows / n.rows) + 'px';
    mark.style.width = (columns / n.columns) + 'px';
    mark.style.height = (rows / n.rows) + 'px';
    image.parentElement.appendChild(mark);
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
    cell.fig.querySelector('.ae-readout').textContent = cell.text.split('\n').join(' · ');
    pick(cell);
  });
})();
