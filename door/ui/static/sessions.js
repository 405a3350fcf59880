// sessions.js: the sessions list (kept sandboxes, GET /v1/sandboxes),
// filtered by state, read when the list-wide stream (GET /v1/events)
// connects and kept current by its session_state events.
import { getJSON, live, scopes, APIError } from './api.js';
import { h, badge, setBadge, fmtTime, errorBox, forbidden } from './dom.js';

export const sessionStates = ['starting', 'running', 'paused', 'stopped', 'failed', 'expired'];

// metadataText is a sandbox's metadata as "k=v k=v".
export function metadataText(m) {
  return Object.entries(m || {}).map(([k, v]) => k + '=' + v).join(' ') || '—';
}

export function sessionsList(main, query, signal) {
  const state = query.get('state') || '';
  const tabs = h('nav', { class: 'tabs', 'aria-label': 'Session states' }, ['', ...sessionStates].map((s) =>
    h('a', { href: '#/sessions' + (s ? '?state=' + s : ''), 'aria-current': s === state ? 'page' : null }, s || 'all')));
  const tbody = h('tbody', { id: 'sessions-body' });
  const table = h('table', { class: 'list sessions' },
    h('colgroup', {}, h('col', { class: 'c-id' }), h('col', { class: 'c-status' }), h('col', { class: 'c-backend' }), h('col', { class: 'c-time' }), h('col', { class: 'c-time' }), h('col', {}), h('col', { class: 'c-runs' })),
    h('thead', {}, h('tr', {}, ['Sandbox', 'State', 'Backend', 'Created', 'Expires', 'Metadata', 'Execs / processes'].map((c) => h('th', { scope: 'col' }, c)))), tbody);
  const count = h('p', { class: 'muted count', 'aria-live': 'polite' }, '\u00a0');
  const err = h('div', { class: 'err-slot' });
  main.append(h('h1', {}, 'Sessions'), tabs, err, h('div', { class: 'table-wrap' }, table), count);
  if (!scopes.sessions) { err.replaceChildren(forbidden('sessions')); return; }

  const rows = new Map();
  const show = (sb) => {
    let r = rows.get(sb.id);
    if (!r) {
      r = { tr: h('tr', { 'data-sandbox': sb.id }), st: badge(sb.state), backend: h('td', {}), created: h('td', { class: 'num' }), expires: h('td', { class: 'num' }), meta: h('td', { class: 'ellipsis' }), runs: h('td', { class: 'num' }) };
      r.tr.append(h('td', { class: 'mono ellipsis' }, h('a', { href: '#/sessions/' + encodeURIComponent(sb.id) }, sb.id)), h('td', {}, r.st), r.backend, r.created, r.expires, r.meta, r.runs);
      rows.set(sb.id, r);
    }
    setBadge(r.st, sb.state);
    r.backend.textContent = sb.backend || '—';
    r.created.textContent = fmtTime(sb.created_at);
    r.expires.textContent = fmtTime(sb.expires_at);
    r.meta.textContent = metadataText(sb.metadata);
    r.runs.textContent = `${sb.execs || 0} / ${sb.processes || 0}`;
    return r;
  };
  const counted = () => { count.textContent = rows.size ? `${rows.size} sandbox${rows.size === 1 ? '' : 'es'}` : 'No sandboxes match.'; };
  const showError = (e) => err.replaceChildren(e instanceof APIError && e.status === 403 ? forbidden('sessions') : errorBox(e));

  // load is the full read (oldest first, as the API lists them).
  const load = async () => {
    let page;
    try {
      page = await getJSON('/v1/sandboxes' + (state ? '?state=' + encodeURIComponent(state) : ''), { signal });
    } catch (e) {
      if (!signal.aborted) showError(e);
      return;
    }
    const list = page.sandboxes || [];
    const keep = new Set(list.map((sb) => sb.id));
    for (const [id, r] of rows) if (!keep.has(id)) { r.tr.remove(); rows.delete(id); }
    list.forEach((sb, i) => {
      const r = show(sb);
      if (tbody.children[i] !== r.tr) tbody.insertBefore(r.tr, tbody.children[i] || null);
    });
    counted();
  };

  // onState applies one session_state event: the sandbox is read once
  // (its counts and times); it leaves when it no longer matches the tab
  // and is appended (the newest) when it comes to match.
  const onState = async (ev) => {
    const id = ev.sandbox_id;
    if (state && ev.state !== state) {
      const r = rows.get(id);
      if (r) { r.tr.remove(); rows.delete(id); counted(); }
      return;
    }
    let sb;
    try {
      sb = await getJSON('/v1/sandboxes/' + encodeURIComponent(id), { signal });
    } catch (_) { return; }
    if (signal.aborted) return;
    const known = rows.has(id);
    const r = show({ ...sb, state: ev.state });
    if (!known) tbody.append(r.tr);
    counted();
  };

  if (!scopes.read) {
    // GET /v1/events needs the read scope: without it, one read.
    count.before(h('p', { class: 'muted' }, 'Not live: your token lacks the "read" scope the event stream needs; reload to refresh.'));
    load();
    return;
  }
  live(signal, {
    onReady: load,
    onEvent: (type, ev) => (type === 'session_state' && ev.sandbox_id ? onState(ev) : null),
    onError: (e) => (e ? showError(e) : err.replaceChildren()),
  });
}
