// The links of the model map and the course's progress row (ui/model_map_chart.py marks them
// data-ae-page): open the page inside the app. A plain link loads the app anew, in a new
// session: the visitor's sentence, switches and progress would be gone. Streamlit's own
// navigation links (the sidebar's) switch pages within the session, so a click on one of ours
// is handed to the navigation link to the same page. With none (or with a modifier key held,
// to open a new tab) the link stays a plain link. Reads addresses only; writes nothing but the
// links' tabindex (below).
(() => {
  if (window.__attentionPageLinks) return;
  window.__attentionPageLinks = true;
  // an address's path without its trailing slash: the default page is "" (or the base path)
  const pathOf = href => new URL(href, document.baseURI).pathname.replace(/\/+$/, '');
  document.addEventListener('click', event => {
    if (event.defaultPrevented || event.button !== 0) return;
    if (event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    const link = event.target.closest ? event.target.closest('a[data-ae-page]') : null;
    if (!link) return;
    const wanted = pathOf(link.href);
    const navigation = document.querySelectorAll(
      '[data-testid="stSidebarNav"] a, [data-testid="stTopNav"] a');
    for (const candidate of navigation) {
      if (candidate.href && pathOf(candidate.href) === wanted) {
        event.preventDefault();
        candidate.click();
        return;
      }
    }
  });

  // One Tab stop for the map and one for the progress row: their dozen links each were two
  // dozen Tab presses between "Skip to main content" and a page's first control. Inside each,
  // the arrow keys (and Home, End) move between the links; Tab leaves. The stop is the map's
  // first link (Previous), and the progress row's step after the page on screen (a roving
  // tabindex).
  const GROUPS = 'nav.ae-map, nav.ae-progress';
  const linksOf = nav => [...nav.querySelectorAll('a[data-ae-page]')];
  const rove = (nav, chosen) => {
    for (const link of linksOf(nav)) link.tabIndex = link === chosen ? 0 : -1;
  };
  const setUp = () => {
    for (const nav of document.querySelectorAll(GROUPS)) {
      if (nav.dataset.aeRoving) continue;  // a run draws the nav anew, without the mark
      nav.dataset.aeRoving = '1';
      const links = linksOf(nav);
      const here = nav.matches('.ae-progress') ? nav.querySelector('[aria-current]') : null;
      const after = here ? links.find(link =>
        here.compareDocumentPosition(link) & Node.DOCUMENT_POSITION_FOLLOWING) : null;
      if (links.length) rove(nav, after || links[0]);
    }
  };
  const MOVES = {ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1};
  document.addEventListener('keydown', event => {
    const link = event.target.closest ? event.target.closest('a[data-ae-page]') : null;
    const nav = link ? link.closest(GROUPS) : null;
    if (!nav || event.altKey || event.ctrlKey || event.metaKey) return;
    const links = linksOf(nav);
    const at = links.indexOf(link);
    let to = null;
    if (event.key in MOVES) to = (at + MOVES[event.key] + links.length) % links.length;
    else if (event.key === 'Home') to = 0;
    else if (event.key === 'End') to = links.length - 1;
    if (to === null) return;
    event.preventDefault();
    rove(nav, links[to]);
    links[to].focus();
  });
  new MutationObserver(setUp).observe(document.body, {subtree: true, childList: true});
  setUp();
})();
