// Attention heatmaps' model view (html_heatmap.model_view, through ui/model_view.py): the frame
// follows the page's Layer and Head sliders, and a click or tap on a head moves the sliders to
// it, as arrow keys on them would (the sliders then redraw the page's other figures, in the
// browser or through a run, as a key press does). It reads numbers from the page and writes
// a class only: no visitor text. Streamlit's sanitiser drops a script holding a less-than sign
// before a letter or a slash, so there is none in this file.
(() => {
  if (window.__attentionModelView) return;
  window.__attentionModelView = true;
  const sliderOf = (main, label) => main.querySelector(
    '[data-testid="stSlider"] input[type="range"][aria-label="' + label + '"]');
  // The frame on the head the sliders hold (none while they are missing or out of range).
  const frame = () => {
    const main = document.querySelector('[data-testid="stMain"]');
    if (!main) return;
    const layer = sliderOf(main, 'Layer'), head = sliderOf(main, 'Head');
    if (!layer || !head) return;
    for (const fig of main.querySelectorAll('.ae-model-view')) {
      const index = Number(layer.value) * Number(fig.dataset.everyHeadOf) + Number(head.value);
      if (Number(fig.dataset.shown) === index) continue;
      fig.querySelectorAll('.ae-mv-tile').forEach(tile => {
        const on = Number(tile.dataset.layer) === Number(layer.value)
          && Number(tile.dataset.head) === Number(head.value);
        tile.classList.toggle('ae-mv-on', on);
      });
      fig.dataset.shown = String(index);
    }
  };
  // A slider moved by keys, as a visitor's arrow keys move it: each press is one step, and
  // the slider reports each (a value set on the input itself would not be sent).
  const press = (input, key) => input.dispatchEvent(new KeyboardEvent('keydown',
    {key: key, code: key, bubbles: true, cancelable: true}));
  const nextFrame = () => new Promise(resolve => requestAnimationFrame(resolve));
  // One press at a time, each waited for until the slider shows it (React draws it a frame
  // or so later); a press that moves nothing ends the walk.
  const moveTo = async (input, target) => {
    input.focus({preventScroll: true});
    for (let guard = 0; guard !== 64 && Number(input.value) !== target; guard += 1) {
      const before = input.value;
      press(input, Number(before) > target ? 'ArrowLeft' : 'ArrowRight');
      for (let wait = 0; wait !== 30 && input.value === before; wait += 1) await nextFrame();
      if (input.value === before) return;
    }
  };
  document.addEventListener('click', async event => {
    const tile = event.target.closest && event.target.closest('.ae-model-view .ae-mv-tile');
    const main = document.querySelector('[data-testid="stMain"]');
    if (!tile || !main) return;
    const layer = sliderOf(main, 'Layer'), head = sliderOf(main, 'Head');
    if (!layer || !head) return;
    await moveTo(layer, Number(tile.dataset.layer));
    await moveTo(head, Number(tile.dataset.head));
    frame();
  });
  new MutationObserver(frame).observe(document.body,
    {subtree: true, childList: true, attributes: true, attributeFilter: ['value']});
})();
