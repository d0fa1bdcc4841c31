// Head view (views/head_view.py, through ui/head_view_hover.py): pointing at a token's dot keeps
// only the lines that start or end at it, as bertviz's head view does; leaving the dot brings
// every line back. On a touch screen a tap on the dot keeps them, and a tap off the dots brings
// every line back. Nothing is sent to the server and nothing moves: the figure's line
// shapes are filtered in place.
//
// A figure of head_view_charts.head_view_figure or every_head_view_figure says it takes part
// with layout.meta.hover_lines. Its lines are path shapes "M0,qL1,k…" (query q on the left at
// x = 0, key k on the right at x = 1); its token dots are the scatter traces at x = 0 and x = 1.
// The script reads numbers from the figure only and writes shapes only: no visitor text.
// Streamlit's sanitiser drops a script holding a less-than sign before a letter or a slash,
// so there is none in this file.
(() => {
  if (window.__attentionHeadViewHover) return;
  window.__attentionHeadViewHover = true;
  const LINE = /M0,(-?\d+)L1,(-?\d+)/g;
  const NO_LINES = 'M0,0';  // head_view_charts.NO_LINES: a level with no line draws nothing
  // One shape's path with only the lines of token `position` on `side` (0 = query, 1 = key).
  const keepLines = (path, position, side) => {
    const kept = [];
    for (const match of path.matchAll(LINE)) {
      if (Number(match[side + 1]) === position) kept.push(match[0]);
    }
    return kept.length ? kept.join('') : NO_LINES;
  };
  // Keep only the lines of the token under `point` (its dot: x 0 = query side, 1 = key side).
  const isolate = (gd, point) => {
    const shapes = gd.layout.shapes || [];
    // the shapes as the server or the head switch drew them, kept while the token is picked
    if (!gd.__allLines || gd.__allLines.drawn !== shapes) gd.__allLines = {shapes: shapes};
    const filtered = gd.__allLines.shapes.map(shape => Object.assign({}, shape,
      {path: keepLines(shape.path, point.y, point.x)}));
    gd.__allLines.drawn = filtered;
    gd.__allLines.token = point.x + ':' + point.y;
    window.Plotly.relayout(gd, {shapes: filtered});
  };
  // Every line back: only if the lines on screen are still the filtered ones (a head switched
  // meanwhile drew its own full set, which stays).
  const restore = gd => {
    const saved = gd.__allLines;
    if (!saved || gd.layout.shapes !== saved.drawn) return;
    gd.__allLines = null;
    window.Plotly.relayout(gd, {shapes: saved.shapes});
  };
  const tokenDot = event => {
    const point = event.points && event.points[0];
    return point && (point.x === 0 || point.x === 1) && Number.isInteger(point.y) ? point : null;
  };
  const hook = gd => {
    if (gd.__hoverLines) return;
    gd.__hoverLines = true;
    gd.on('plotly_hover', event => {
      const point = tokenDot(event);
      if (point) isolate(gd, point);
    });
    gd.on('plotly_unhover', () => restore(gd));
    // A finger has no hover: plotly turns a tap into a click alone (its event a touchstart),
    // with the hover label but no plotly_hover. A tap on a dot keeps the token's lines, as
    // pointing does; a tap off the dots brings every line back.
    // The browser's click event comes after plotly_click: it tells whether the tap hit a dot.
    gd.on('plotly_click', event => {
      const source = event.event && event.event.type;
      const point = tokenDot(event);
      if (!point || !source || !source.startsWith('touch')) return;
      gd.__tapOnDot = true;
      isolate(gd, point);
      // plotly's next tap, wherever it lands, would select the point this tap hovered (its
      // hover data outlive a finger): forget them, so a tap keeps lines and never selects
      gd._hoverdata = undefined;
    });
    gd.addEventListener('touchstart', () => { gd.__touched = true; }, {passive: true});
    gd.addEventListener('click', () => {
      if (!gd.__touched) return;  // a mouse: the hover and the page's selection handle it
      gd.__touched = false;
      if (!gd.__tapOnDot) restore(gd);
      gd.__tapOnDot = false;
    });
  };
  const hookAll = () => {
    for (const gd of document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')) {
      const meta = gd.layout && gd.layout.meta;
      if (meta && meta.hover_lines && typeof gd.on === 'function') hook(gd);
    }
  };
  // a figure arrives, or is drawn anew by a run: hook it (once per element)
  new MutationObserver(hookAll).observe(document.body, {subtree: true, childList: true});
  hookAll();
})();
