"""The page's shared CSS and JS (re-exported by ``ui.render``): styling for the
classes the ``ui.render.*`` modules emit and for the chat box (its label and
scroll button never over the text), and the script for citation jumps, Save
toggles, topic-map clicks, narrow-screen dropdowns and keeping the start of
the newest answer in view. Under 700 px the map's SVG labels give way to
topic chips (the labels would shrink with the SVG to a few pixels).
"""

# Styling for the classes the ui.render.* modules emit; passed to launch(css=...).
CSS = """
.aqa-card{border:1px solid var(--border-color-primary);border-radius:8px;padding:8px 10px;margin:6px 0;scroll-margin:80px}
.aqa-card-head{font-weight:600}
.aqa-num{color:var(--color-accent);font-weight:700}
.aqa-derived{font-weight:400;font-style:italic;color:var(--body-text-color-subdued)}
.aqa-authors,.aqa-meta,.aqa-score{font-size:.85em;color:var(--body-text-color-subdued)}
.aqa-passage{margin:6px 0;padding-left:8px;border-left:3px solid var(--color-accent);font-size:.92em}
.aqa-passage mark{background:#fde68a;color:inherit;padding:0 1px}
.aqa-abstract summary,.aqa-quote summary{cursor:pointer;font-size:.85em;color:var(--color-accent)}
.aqa-abstract-text{white-space:pre-wrap}
.aqa-empty{color:var(--body-text-color-subdued);font-style:italic}
.aqa-error{color:#b91c1c;font-weight:600}
.aqa-compare{overflow-x:auto}
.aqa-compare table{border-collapse:collapse;width:100%;table-layout:fixed}
.aqa-compare thead th:first-child{width:13%}
.aqa-compare th,.aqa-compare td{border:1px solid var(--border-color-primary);padding:6px;vertical-align:top;text-align:left;overflow-wrap:anywhere;hyphens:auto}
.aqa-not-stated{color:var(--body-text-color-subdued);font-style:italic}
.aqa-unsupported{background:#fee2e2}
.aqa-withdrawn{color:#b91c1c;font-size:.9em}
.aqa-card.aqa-flash{animation:aqa-flash 2.4s ease-out;outline:3px solid var(--color-accent)}
@keyframes aqa-flash{0%{background:#fde68a}100%{background:transparent}}
.aqa-save{border:1px solid var(--border-color-primary);border-radius:6px;padding:0 6px;margin-right:4px;font-size:.85em;cursor:pointer;background:var(--background-fill-secondary)}
.aqa-save.is-saved{background:#fde68a;color:#000}
.aqa-result.is-saved{border-color:#ca8a04}
.aqa-saved ol{margin:4px 0 0 18px;padding:0}
.aqa-map svg{display:block;width:100%;height:auto;max-height:48vh;border:1px solid var(--border-color-primary);border-radius:8px;background:var(--background-fill-primary)}
.aqa-map .aqa-cluster{cursor:pointer}
.aqa-map .aqa-cluster text{font-size:15px;font-weight:600;paint-order:stroke;stroke:var(--background-fill-primary);stroke-width:4px}
.aqa-map .aqa-cluster.is-selected text{font-size:18px;text-decoration:underline}
.aqa-topic-chips{display:none;flex-wrap:wrap;gap:6px;margin:6px 0}
.aqa-chip{font-size:13px;line-height:1.3;padding:3px 8px;border:2px solid;border-radius:14px;background:var(--background-fill-secondary);cursor:pointer;color:inherit}
.aqa-chip.is-selected{background:#fde68a;color:#000;font-weight:600}
.aqa-map .aqa-dot{opacity:.8}
.aqa-map .aqa-dot.is-faded{opacity:.15}
.aqa-hidden{display:none !important}
#aqa-chatbot .bubble-wrap{margin-top:34px;height:calc(100% - 34px);padding-top:var(--spacing-md)}
#aqa-chatbot .scroll-down-button-container{left:auto;right:8px;bottom:8px;transform:none}
@media (max-width:700px){
 #aqa-chatbot .scroll-down-button-container{display:none}
 .aqa-map .aqa-cluster{display:none}
 .aqa-topic-chips{display:flex}
 .aqa-compare table,.aqa-compare tbody,.aqa-compare tr,.aqa-compare td{display:block;width:auto !important}
 .aqa-compare thead{display:none}
 .aqa-compare tbody th{display:block;width:auto;background:var(--background-fill-secondary)}
 .aqa-compare td::before{content:attr(data-paper);display:block;font-weight:600;font-size:.85em;color:var(--color-accent)}
}
"""

# Page script (passed to launch(head=...)): clickable [n] markers scroll to and
# flash their card; Save toggles and topic-map labels report to hidden
# textboxes; on narrow screens a dropdown closes after a pick; the chat
# scrolls to the newest question, not to the end of its answer.
JS = """
<script>
(() => {
  const report = (id, value) => {
    const el = document.querySelector('#' + id + ' textarea, #' + id + ' input');
    if (!el) return;
    el.value = value;
    el.dispatchEvent(new Event('input', {bubbles: true}));
  };
  document.addEventListener('click', (e) => {
    const t = e.target instanceof Element ? e.target : null;
    if (!t) return;
    const cite = t.closest('a[href*="#aqa-cite-"]');
    if (cite) {
      e.preventDefault(); e.stopPropagation();
      const n = cite.getAttribute('href').split('#aqa-cite-')[1];
      const card = document.getElementById('aqa-cite-' + n);
      if (card) {
        card.scrollIntoView({behavior: 'smooth', block: 'center'});
        card.classList.remove('aqa-flash'); void card.offsetWidth; card.classList.add('aqa-flash');
      }
      return;
    }
    const save = t.closest('[data-save]');
    if (save) {
      e.preventDefault();
      const id = save.getAttribute('data-save');
      const on = !save.classList.contains('is-saved');
      document.querySelectorAll('.aqa-result [data-save]').forEach((b) => {
        if (b.getAttribute('data-save') !== id) return;
        b.classList.toggle('is-saved', on); b.textContent = on ? '★ Saved' : '☆ Save';
      });
      report('aqa-save-toggle', id + '|' + Date.now());
      return;
    }
    const cl = t.closest('#aqa-topic-map [data-cluster]');
    if (cl) { report('aqa-topic-pick', cl.getAttribute('data-cluster') + '|' + Date.now()); return; }
  }, true);
  // Narrow screens: close a dropdown's option list once an option is picked.
  document.addEventListener('mousedown', (e) => {
    const t = e.target instanceof Element ? e.target : null;
    if (!t || !t.closest('ul[role=listbox] li') || window.innerWidth > 700) return;
    setTimeout(() => {
      const a = document.activeElement;
      if (!a || !a.blur) return;
      a.dispatchEvent(new KeyboardEvent('keydown', {key: 'Escape', bubbles: true}));
      a.blur();
    }, 120);
  }, true);
  // Gradio's autoscroll (off) would follow the end of a streaming answer and
  // push its start out of view. Instead, a new question is scrolled up while
  // its answer grows, until it reaches the top of the box (or the reader scrolls).
  let seen = 0, anchor = null;
  const stopFollowing = () => { anchor = null; };
  new MutationObserver(() => {
    const wrap = document.querySelector('#aqa-chatbot .bubble-wrap');
    if (!wrap) return;
    if (!wrap.dataset.aqaScroll) {
      wrap.dataset.aqaScroll = '1';
      ['wheel', 'touchmove', 'keydown', 'pointerdown'].forEach((k) => wrap.addEventListener(k, stopFollowing));
    }
    const users = wrap.querySelectorAll('[data-testid=user]');
    if (users.length !== seen) { anchor = users.length > seen ? users[users.length - 1] : null; seen = users.length; }
    if (!anchor || !anchor.isConnected) return;
    const gap = anchor.getBoundingClientRect().top - wrap.getBoundingClientRect().top - 8;
    if (gap > 1) wrap.scrollTop += gap;
  }).observe(document.body, {childList: true, subtree: true, characterData: true});
})();
</script>
"""
