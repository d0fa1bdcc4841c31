// The links of the model map and the course's progress row (ui/model_map_chart.py marks them
// data-ae-page): open the page inside the app. A plain link loads the app anew, in a new
// session: the visitor's sentence, switches and progress would be gone. Streamlit's own
// navigation links (the sidebar's) switch pages within the session, so a click on one of ours
// is handed to the navigation link to the same page. With none (or with a modifier key held,
// to open a new tab) the link stays a plain link. Reads addresses only; writes nothing.
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
})();
