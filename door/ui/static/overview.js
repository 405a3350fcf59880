// overview.js: queue depth, running jobs and tasks, job outcomes
// (from /metrics) and server health (/health), read again when the
// list-wide stream (GET /v1/events) connects and when a job or task
// changes state.
import { request, live, scopes, APIError } from './api.js';
import { h, kv, section, errorBox, forbidden } from './dom.js';

// parseMetrics reads the Prometheus text format into name -> [{labels, value}].
export function parseMetrics(text) {
  const out = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const p of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[p[1]] = p[2];
    if (!out.has(m[1])) out.set(m[1], []);
    out.get(m[1]).push({ labels, value: Number(m[4]) });
  }
  return out;
}

const sum = (ms, name, pred = () => true) => (ms.get(name) || []).filter((s) => pred(s.labels)).reduce((a, s) => a + s.value, 0);

export function overview(main, _query, signal) {
  const health = h('span', { class: 'badge s-unknown', id: 'health' }, 'checking');
  const tiles = {
    depth: tile('Queue depth', 'queue-depth'),
    capacity: tile('Queue capacity', 'queue-capacity'),
    running: tile('Jobs running', 'jobs-running'),
    tasks: tile('Tasks active', 'tasks-active'),
  };
  const bar = h('div', { class: 'bar', role: 'meter', 'aria-label': 'Queue fill', 'aria-valuemin': '0', 'aria-valuemax': '100', 'aria-valuenow': '0' }, h('div', { class: 'fill' }));
  const outcomes = h('div', {}, h('p', { class: 'muted' }, '\u00a0'));
  const err = h('div', { class: 'err-slot' });
  main.append(h('h1', {}, 'Overview'),
    h('p', {}, 'Server health: ', health),
    err,
    h('div', { class: 'tiles' }, Object.values(tiles).map((t) => t.el)),
    bar,
    section('Job outcomes since start', outcomes),
    h('p', { class: 'muted' }, 'Workers: this server runs its own (serve --workers); remote workers report no health of their own to the API.'));

  const read = async () => {
    try {
      const r = await fetch('/health', { cache: 'no-store', signal });
      const ok = r.ok && (await r.json()).status === 'ok';
      health.className = 'badge ' + (ok ? 's-completed' : 's-failed');
      health.textContent = ok ? 'ok' : 'unhealthy (' + r.status + ')';
    } catch (_) {
      if (signal.aborted) return;
      health.className = 'badge s-failed';
      health.textContent = 'unreachable';
    }
    if (!scopes.read) { err.replaceChildren(forbidden('read')); return; }
    let ms;
    try {
      ms = parseMetrics(await (await request('/metrics', { signal })).text());
      err.replaceChildren();
    } catch (e) {
      if (signal.aborted) return;
      err.replaceChildren(e instanceof APIError && e.status === 403 ? forbidden('read') : errorBox(e));
      return;
    }
    const depth = sum(ms, 'agent_runner_queue_depth');
    const cap = sum(ms, 'agent_runner_queue_capacity');
    tiles.depth.set(depth);
    tiles.capacity.set(cap);
    tiles.running.set(sum(ms, 'agent_runner_jobs_running'));
    tiles.tasks.set(sum(ms, 'agentic_tasks_active', (l) => !['completed', 'failed', 'cancelled', 'failed_preserved'].includes(l.state)));
    const pct = cap > 0 ? Math.min(100, (depth / cap) * 100) : 0;
    bar.firstChild.style.width = pct + '%';
    bar.setAttribute('aria-valuenow', String(Math.round(pct)));
    const byStatus = {};
    for (const s of ms.get('agent_runner_jobs_total') || []) byStatus[s.labels.status] = (byStatus[s.labels.status] || 0) + s.value;
    const pairs = Object.entries(byStatus).sort();
    outcomes.replaceChildren(pairs.length ? kv(pairs.map(([k, v]) => [k, String(v)])) : h('p', { class: 'muted' }, 'No job has finished yet.'));
  };

  // A burst of events is one read at a time, plus one after it; and one
  // more a second after the last event, because a worker frees the
  // queue slot and counts the outcome just after it publishes a job's
  // terminal status.
  let busy = false, again = false, settle = null;
  const refresh = async () => {
    if (busy) { again = true; return; }
    busy = true;
    try {
      do { again = false; await read(); } while (again && !signal.aborted);
    } finally { busy = false; }
  };
  signal.addEventListener('abort', () => clearTimeout(settle), { once: true });

  // Without read only health is shown, and the stream would be refused.
  if (!scopes.read) { read(); return; }
  live(signal, {
    onReady: refresh,
    onEvent: () => {
      refresh();
      clearTimeout(settle);
      settle = setTimeout(() => { if (!signal.aborted) refresh(); }, 1000);
    },
    onError: (e) => {
      if (!e) return;
      if (e instanceof APIError) {
        err.replaceChildren(e.status === 403 ? forbidden('read') : errorBox(e));
        return;
      }
      // The server did not answer at all.
      health.className = 'badge s-failed';
      health.textContent = 'unreachable';
      err.replaceChildren(errorBox(e));
    },
  });
}

function tile(label, id) {
  const v = h('span', { class: 'tile-v num', id }, '—');
  return { el: h('div', { class: 'tile' }, h('span', { class: 'tile-l' }, label), v), set: (n) => { v.textContent = String(n); } };
}
