"""The map of the model on every page, and the course's progress under it (drawn by app.py).

The markup comes from ui/model_map_chart.py (pure), the course from ui/path.py, the sizes from
the model the sidebar loaded. Links between pages go through ui/js/page_links.js, which hands a
click to Streamlit's own navigation: the visitor's session, sentence and progress stay.
"""

from __future__ import annotations

import streamlit as st

import core
from ui import anatomy_text, model_map_chart, path, scripts
from ui.html_heatmap import HtmlFigure

# A click on a map's or progress row's link opens the page inside the app (see the file).
PAGE_LINKS_JS = scripts.script_element("page_links.js")

# The map's, the progress row's and the start link's styles. Style-only HTML (Streamlit puts it
# in its event container: no element, no gap). Text and borders inherit the theme's colour, so
# they read in light and dark alike; marked parts use Streamlit's blue, at a tint that keeps
# text readable on both backgrounds.
COURSE_CSS = """<style>
/* ---- the map (model_map_chart.model_map): the parts flow in a row and wrap as text does */
.ae-map, .ae-progress { font-size: 12px; line-height: 1.3; margin: 0; }
.ae-map ol, .ae-progress ol { list-style: none; margin: 0; padding: 0; display: flex;
  flex-wrap: wrap; align-items: center; row-gap: 0.3rem; }
/* (Streamlit's own list style sets 1rem on every li: the map's size is set again) */
.ae-map li, .ae-progress li { margin: 0; padding: 0; display: flex; align-items: center;
  font-size: 12px; }
/* an arrow before every part but the first shown; none before the band's "6 layers, each:" */
.ae-map .ae-flow > li:not(.ae-gap) ~ li:not(.ae-gap)::before { content: "→"; opacity: 0.6;
  padding: 0 0.15rem; }
.ae-map .ae-flow > li:has(> .ae-layer-label)::before { content: none !important; }
.ae-gap { display: none !important; }
.ae-where { display: block; font-size: 12px; margin-bottom: 0.25rem; }
.ae-where a { color: inherit; }
.ae-part { padding: 0.05rem 0.3rem; border: 1px solid rgba(128, 128, 128, 0.45);
  border-radius: 0.35rem; color: inherit; text-decoration: none; white-space: nowrap; }
.ae-part b { font-weight: 600; }
.ae-part small { font-size: 10.5px; opacity: 0.8; }
.ae-part.ae-here { border: 2px solid #1c83e1; background: rgba(28, 131, 225, 0.16); }
a.ae-part:hover, a.ae-step:hover { border-color: #1c83e1; }
/* Keyboard focus as the sidebar's links show it: Previous/Next under a page had only a faint
   grey fill (Streamlit's page links) */
.ae-map a:focus-visible, .ae-progress a:focus-visible, .st-key-ae_start_course a:focus-visible,
[data-testid="stMain"] [data-testid="stPageLink"] a:focus-visible {
  outline: 3px solid #1c83e1; outline-offset: 2px; }
.ae-tick { font-style: normal; margin-right: 0.2rem; }
/* the parts every layer repeats: one tinted band (its items' backgrounds join up) */
.ae-map .ae-in-layer { background: rgba(128, 128, 128, 0.13); padding: 0.15rem 0; }
.ae-layer-label { font-size: 11px; padding: 0 0.1rem 0 0.3rem; }
.ae-map .ae-flow > li.ae-in-layer:has(+ li:not(.ae-in-layer)) { padding-right: 0.3rem; }
/* A phone shows the marked parts only, each run of the others as one "…". */
@media (max-width: 640px) {
  .ae-map .ae-away { display: none !important; }
  .ae-gap { display: flex !important; opacity: 0.7; }
  .ae-map .ae-flow > .ae-gap:not(:first-child)::before { content: "→"; padding: 0 0.15rem; }
}
/* ---- the course's progress under a page (model_map_chart.path_progress) */
.ae-progress ol { gap: 0.25rem; }
.ae-step { display: inline-flex; align-items: center; justify-content: center; min-width: 1.9rem;
  height: 1.9rem; padding: 0 0.25rem; border: 1px solid rgba(128, 128, 128, 0.45);
  border-radius: 0.95rem; color: inherit; text-decoration: none; box-sizing: border-box; }
.ae-step.ae-seen::after { content: "✓"; font-size: 10px; margin-left: 0.1rem; }
.ae-step.ae-now { border: 2px solid #1c83e1; background: rgba(28, 131, 225, 0.16);
  font-weight: 600; }
/* ---- the Overview's way into the course (path.start_button): a link that looks like one */
.st-key-ae_start_course a { border: 1px solid #1c83e1; border-radius: 0.5rem;
  background: rgba(28, 131, 225, 0.12); padding: 0.35rem 0.8rem; }
.st-key-ae_start_course a p { font-weight: 600; }
</style>"""


def sizes_of(model: core.Transformer) -> model_map_chart.ModelSizes:
    """The loaded model's sizes, as the map writes them."""
    dims = model.dims
    anatomy = anatomy_text.of(model)
    return model_map_chart.ModelSizes(
        vocab_size=dims.vocab_size,
        d_model=model.d_model,
        max_positions=model.max_positions,
        n_heads=model.n_heads,
        d_head=model.d_head,
        d_ff=dims.d_ff,
        n_layers=model.n_layers,
        norm_name=anatomy.norm_name,
        pre_norm=anatomy.pre_norm,
        rotary=not anatomy.position_table,
        n_kv_heads=anatomy.dims.n_kv_heads,
    )


def page_link(
    target: path.Step, on_screen: path.Step, visited: frozenset[str]
) -> model_map_chart.PageLink:
    """Where a link to `target` leads, seen from the page `on_screen`."""
    return model_map_chart.PageLink(
        href="./" + path.url_path(target),
        title=target.title,
        visited=target.file in visited,
        current=target is on_screen,
    )


def show_map(step: path.Step, model: core.Transformer, visited: frozenset[str]) -> None:
    """The map above a page: the parts `step` explains marked, each part linked to its page."""
    st.html(COURSE_CSS)
    links = {
        key: page_link(path.step_of(home), step, visited) for key, home in path.PART_HOME.items()
    }
    before, after = path.neighbours(step)
    figure = model_map_chart.model_map(
        sizes_of(model),
        frozenset(step.parts),
        links,
        path.where(step),
        previous=None if before is None else page_link(before, step, visited),
        following=None if after is None else page_link(after, step, visited),
    )
    _show(figure)


def show_progress(step: path.Step, visited: frozenset[str]) -> None:
    """The row of every step under a page, and the script that keeps its links in the app."""
    steps = [(path.mark(other), page_link(other, step, visited)) for other in path.STEPS]
    _show(model_map_chart.path_progress(steps))


def links_script() -> None:
    """The script that opens the map's and the progress row's links inside the app (installed
    once per browser tab; on every run all the same, so no element after it moves)."""
    st.html(PAGE_LINKS_JS, unsafe_allow_javascript=True)


def _show(figure: HtmlFigure) -> None:
    """Markup made by ui/model_map_chart.py, which escapes every text in it."""
    st.html(figure)
