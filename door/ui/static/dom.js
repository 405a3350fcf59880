// dom.js: building elements and formatting values, shared by the pages.

// h builds an element: attrs sets properties for on* handlers and
// "class"/"text", attributes otherwise; children are nodes or strings.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'text') el.textContent = v;
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

export function badge(status) {
  return h('span', { class: 'badge s-' + (status || 'unknown'), 'data-status': status || '' }, status || '—');
}

export function setBadge(el, status) {
  el.className = 'badge s-' + (status || 'unknown');
  el.dataset.status = status || '';
  el.textContent = status || '—';
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + ' ' + units[i];
}

export function fmtDuration(ms) {
  if (ms === null || ms === undefined || isNaN(ms)) return '—';
  if (ms < 1000) return Math.round(ms) + ' ms';
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + ' s';
  const m = Math.floor(s / 60);
  if (m < 60) return m + ' min ' + Math.round(s % 60) + ' s';
  return Math.floor(m / 60) + ' h ' + (m % 60) + ' min';
}

export function fmtTime(iso) {
  if (!iso || iso.startsWith('0001-')) return '—';
  const d = new Date(iso);
  return isNaN(d) ? '—' : d.toLocaleString();
}

// kv is a definition list of [label, value] pairs.
export function kv(pairs) {
  return h('dl', { class: 'kv' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

export function section(title, ...children) {
  const id = 'sec-' + title.toLowerCase().replace(/[^a-z0-9]+/g, '-');
  return h('section', { class: 'card', 'aria-labelledby': id }, h('h2', { id }, title), ...children);
}

export function errorBox(err) {
  const msg = err && err.code ? `${err.code}: ${err.message}` : String(err && err.message || err);
  return h('p', { class: 'error', role: 'alert' }, msg);
}

// forbidden says which scope a section needs when the token lacks it.
export function forbidden(scope) {
  return h('p', { class: 'muted' }, `Your token lacks the "${scope}" scope.`);
}

export function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal && signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
  });
}

// every calls f now and then every ms until signal aborts (for the data
// the API offers no stream of: lists and metrics).
export async function every(ms, signal, f) {
  while (!signal.aborted) {
    try { await f(); } catch (e) { if (signal.aborted) return; console.warn(e); }
    await sleep(ms, signal);
  }
}

export function json(v) {
  return h('pre', { class: 'json' }, JSON.stringify(v, null, 2));
}

export const terminalStatuses = new Set(['completed', 'failed', 'timed_out', 'policy_denied', 'setup_failed', 'backend_unavailable', 'canceled']);
