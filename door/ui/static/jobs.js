// jobs.js: the jobs list and a job's page.
import { getJSON, request, sse, live, download, scopes, APIError } from './api.js';
import { h, badge, setBadge, fmtBytes, fmtDuration, fmtTime, kv, section, errorBox, forbidden, json, sleep, terminalStatuses } from './dom.js';

const statuses = ['', 'queued', 'running', 'completed', 'failed', 'canceled', 'timed_out', 'policy_denied', 'setup_failed', 'backend_unavailable'];

// Details that never change once known: the request (argv, backend,
// trace) and the result of a finished job.
const requestCache = new Map();
const resultCache = new Map();

async function requestOf(id) {
  if (!requestCache.has(id)) {
    requestCache.set(id, getJSON(`/ui-api/jobs/${encodeURIComponent(id)}/request`).catch(() => null));
  }
  return requestCache.get(id);
}

async function argvOf(id) {
  const req = await requestOf(id);
  return req ? (req.command && req.command.argv || []).join(' ') : '—';
}

async function resultOf(id) {
  if (!resultCache.has(id)) {
    const r = await getJSON(`/v1/jobs/${encodeURIComponent(id)}`);
    if (!terminalStatuses.has(r.status) || !r.ended_at) return null;
    resultCache.set(id, r);
  }
  return resultCache.get(id);
}

// jobsList: every job that matches the status and trace filters, newest
// first (job ids are time-ordered; GET /v1/jobs lists them oldest first,
// so the page reads all its pages of ids, 1000 a request, and shows them
// the other way round), paged by offset. It reads when the list-wide
// stream (GET /v1/events) connects, then is kept current by its status
// events: a row changes status in place, leaves when it no longer
// matches the status filter, and a job that comes to match is added
// where it sorts (a new job: at the top of the first page; the page
// keeps its size).
export function jobsList(main, query, signal) {
  const status = query.get('status') || '';
  const traceFilter = query.get('trace') || '';
  const limit = query.get('limit') || '25';
  const offset = Math.max(0, Number(query.get('offset') || 0));

  const go = (q) => {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(q)) if (v) p.set(k, v);
    location.hash = '#/jobs' + (p.toString() ? '?' + p : '');
  };
  const statusSel = h('select', { id: 'f-status', name: 'status' }, statuses.map((s) => h('option', { value: s, selected: s === status }, s || 'any status')));
  const traceIn = h('input', { id: 'f-trace', name: 'trace', value: traceFilter, placeholder: 'key=value', size: '18' });
  const limitSel = h('select', { id: 'f-limit', name: 'limit' }, ['10', '25', '50', '100'].map((n) => h('option', { value: n, selected: n === limit }, n)));
  const form = h('form', { class: 'filters', role: 'search', onsubmit: (e) => { e.preventDefault(); go({ status: statusSel.value, trace: traceIn.value.trim(), limit: limitSel.value }); } },
    h('label', { for: 'f-status' }, 'Status'), statusSel,
    h('label', { for: 'f-trace' }, 'Trace'), traceIn,
    h('label', { for: 'f-limit' }, 'Per page'), limitSel,
    h('button', { type: 'submit' }, 'Apply'));

  const tbody = h('tbody', { id: 'jobs-body' });
  const table = h('table', { class: 'list jobs' },
    h('caption', { class: 'sr' }, 'Jobs'),
    h('colgroup', {}, h('col', { class: 'c-id' }), h('col', { class: 'c-status' }), h('col', { class: 'c-backend' }), h('col', { class: 'c-argv' }), h('col', { class: 'c-dur' }), h('col', { class: 'c-time' })),
    h('thead', {}, h('tr', {}, ['Job', 'Status', 'Backend', 'Command', 'Duration', 'Updated'].map((c) => h('th', { scope: 'col' }, c)))),
    tbody);
  const count = h('p', { class: 'muted count', 'aria-live': 'polite' }, '\u00a0');
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  const err = h('div', { class: 'err-slot' });
  main.append(h('h1', {}, 'Jobs'), form, err, h('div', { class: 'table-wrap' }, table), count, pager);
  if (!scopes.read) { err.replaceChildren(forbidden('read')); return; }

  const limitN = Number(limit);
  const [traceKey, traceValue] = traceFilter.includes('=') ? traceFilter.split('=', 2).map((v) => v.trim()) : ['', ''];
  const params = new URLSearchParams({ limit: '1000' });
  if (status) params.set('status', status);
  if (traceKey) params.set('trace.' + traceKey, traceValue);

  // all is every matching job, newest first; the page shows
  // all[offset, offset+limit).
  const rows = new Map();
  let all = [];
  const byID = new Map();
  const newestFirst = (a, b) => (a.job_id < b.job_id ? 1 : a.job_id > b.job_id ? -1 : 0);

  const show = (j) => {
    let r = rows.get(j.job_id);
    if (!r) {
      const link = h('a', { href: '#/jobs/' + encodeURIComponent(j.job_id) }, j.job_id);
      r = { tr: h('tr', { 'data-job': j.job_id }), st: badge(j.status), backend: h('td', { class: 'ellipsis' }), argv: h('td', { class: 'mono ellipsis' }, '\u00a0'), dur: h('td', { class: 'num ellipsis' }, '—'), upd: h('td', { class: 'num ellipsis' }) };
      r.tr.append(h('td', { class: 'mono ellipsis', title: j.job_id }, link), h('td', {}, r.st), r.backend, r.argv, r.dur, r.upd);
      rows.set(j.job_id, r);
      argvOf(j.job_id).then((a) => { r.argv.textContent = a; r.argv.title = a; });
    }
    setBadge(r.st, j.status);
    if (j.backend) r.backend.textContent = j.backend;
    else if (!r.backend.textContent) r.backend.textContent = '—';
    r.upd.textContent = fmtTime(j.updated_at);
    if (terminalStatuses.has(j.status)) {
      resultOf(j.job_id).then((res) => { if (res) r.dur.textContent = fmtDuration(res.duration_ms); }).catch(() => {});
    } else if (j.status === 'running') {
      r.dur.textContent = 'running';
    }
  };

  const draw = () => {
    const page = all.slice(offset, offset + limitN);
    const keep = new Set(page.map((j) => j.job_id));
    for (const [id, r] of rows) if (!keep.has(id)) { r.tr.remove(); rows.delete(id); }
    page.forEach((j, i) => {
      show(j);
      const tr = rows.get(j.job_id).tr;
      if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
    });
    count.textContent = page.length ? `${offset + 1}–${offset + page.length} of ${all.length}, newest first` : 'No jobs match.';
    pager.replaceChildren(
      offset > 0 ? h('a', { href: '#', onclick: (e) => { e.preventDefault(); go({ status, trace: traceFilter, limit, offset: String(Math.max(0, offset - limitN)) }); } }, '← Newer') : h('span', { class: 'muted' }, '← Newer'),
      offset + page.length < all.length ? h('a', { href: '#', onclick: (e) => { e.preventDefault(); go({ status, trace: traceFilter, limit, offset: String(offset + limitN) }); } }, 'Older →') : h('span', { class: 'muted' }, 'Older →'));
  };

  // load is the full read, on every (re)connect of the stream.
  const load = async () => {
    const list = [];
    try {
      for (let cursor = ''; ;) {
        const q = new URLSearchParams(params);
        if (cursor) q.set('cursor', cursor);
        const page = await getJSON('/v1/jobs?' + q, { signal });
        list.push(...(page.jobs || []));
        cursor = page.next_cursor || '';
        if (!cursor) break;
      }
      err.replaceChildren();
    } catch (e) {
      if (signal.aborted) return;
      err.replaceChildren(e instanceof APIError && e.status === 403 ? forbidden('read') : errorBox(e));
      return;
    }
    all = list.sort(newestFirst);
    byID.clear();
    for (const j of all) byID.set(j.job_id, j);
    draw();
  };

  // onStatus applies one status event to the page.
  const onStatus = async (ev) => {
    const id = ev.job_id;
    const matches = !status || ev.status === status;
    const known = byID.get(id);
    if (known) {
      if (matches) {
        Object.assign(known, { status: ev.status, updated_at: ev.time });
      } else {
        all = all.filter((j) => j.job_id !== id);
        byID.delete(id);
      }
      draw();
      return;
    }
    if (!matches) return;
    const req = await requestOf(id);
    if (traceKey && !(req && req.trace && String(req.trace[traceKey]) === traceValue)) return;
    if (byID.has(id) || signal.aborted) return;
    const j = { job_id: id, status: ev.status, backend: req && req.backend && req.backend.kind, updated_at: ev.time };
    byID.set(id, j);
    all = [...all, j].sort(newestFirst);
    draw();
  };

  live(signal, {
    onReady: load,
    onEvent: (type, ev) => (type === 'status' && ev.job_id ? onStatus(ev) : null),
    onError: (e) => {
      if (!e) { err.replaceChildren(); return; }
      err.replaceChildren(e instanceof APIError && e.status === 403 ? forbidden('read') : errorBox(e));
    },
  });
}

// jobPage: the job's request, policy decision, enforcement and usage,
// live output and egress decisions from the events stream (a finished
// job's from its run record), artifacts, replay hashes and cancel.
export async function jobPage(main, id, signal) {
  const enc = encodeURIComponent(id);
  const st = badge('');
  const cancelBtn = h('button', { type: 'button', class: 'danger', id: 'cancel', disabled: true }, 'Cancel job');
  const cancelMsg = h('span', { class: 'muted', 'aria-live': 'polite' });
  const summary = h('div', { class: 'summary' });
  const stdout = h('pre', { class: 'out', id: 'stdout', tabindex: '0', 'aria-label': 'stdout' });
  const stderr = h('pre', { class: 'out', id: 'stderr', tabindex: '0', 'aria-label': 'stderr' });
  const requestBox = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  const decisionBox = h('div', {}, h('p', { class: 'muted' }, 'Known when the job ends.'));
  const usageBox = h('div', {}, h('p', { class: 'muted' }, 'Known when the job ends.'));
  const artifactsBox = h('div', { id: 'artifacts' }, h('p', { class: 'muted' }, 'Known when the job ends.'));
  const replayBox = h('div', {}, h('p', { class: 'muted' }, 'Known when the job ends.'));
  const egressBody = h('tbody', { id: 'egress-body' });
  const egressNote = h('p', { class: 'muted' }, 'No egress decisions (yet). Jobs with policy.network "allowlist" record one per connection.');
  const egressErr = h('div', { class: 'err-slot' });
  const err = h('div', { class: 'err-slot' });

  main.append(
    h('p', { class: 'crumbs' }, h('a', { href: '#/jobs' }, 'Jobs'), ' / '),
    h('div', { class: 'head' }, h('h1', { class: 'mono' }, id), st, h('span', { class: 'spacer' }), cancelMsg, cancelBtn),
    err, summary,
    h('div', { class: 'grid2' },
      section('Output', h('h3', {}, 'stdout'), stdout, h('h3', {}, 'stderr'), stderr),
      h('div', {}, section('Request', requestBox), section('Policy decision', decisionBox))),
    h('div', { class: 'grid2' }, section('Enforcement and usage', usageBox), section('Artifacts', artifactsBox)),
    section('Egress decisions', egressNote, egressErr, h('div', { class: 'table-wrap' }, h('table', { class: 'list egress' },
      h('colgroup', {}, h('col', { class: 'c-time' }), h('col', { class: 'c-host' }), h('col', { class: 'c-port' }), h('col', { class: 'c-mode' }),
        h('col', { class: 'c-verdict' }), h('col', {}), h('col', { class: 'c-bytes' }), h('col', { class: 'c-bytes' })),
      h('thead', {}, h('tr', {}, ['Time', 'Host', 'Port', 'Mode', 'Decision', 'Rule', 'Up', 'Down'].map((c) => h('th', { scope: 'col' }, c)))), egressBody))),
    section('Replay', replayBox));
  if (!scopes.read) { err.replaceChildren(forbidden('read')); return; }

  summary.append(summaryRows({}));
  let status = '';
  const setStatus = (s) => {
    status = s;
    setBadge(st, s);
    cancelBtn.disabled = !scopes.cancel || terminalStatuses.has(s);
    cancelBtn.hidden = !scopes.cancel;
  };
  cancelBtn.addEventListener('click', async () => {
    cancelBtn.disabled = true;
    cancelMsg.textContent = 'Canceling…';
    try {
      await request('/v1/jobs/' + enc, { method: 'DELETE' });
      cancelMsg.textContent = 'Cancel requested.';
    } catch (e) {
      cancelMsg.textContent = e.message;
      cancelBtn.disabled = false;
    }
  });

  getJSON('/ui-api/jobs/' + enc + '/request', { signal }).then((req) => {
    requestBox.replaceChildren(kv([
      ['Command', h('code', {}, (req.command.argv || []).join(' '))],
      ['Working dir', req.command.cwd || '.'],
      ['Workspace', h('code', {}, req.workspace.path || '')],
      ['Backend', req.backend && req.backend.kind || '—'],
      ['Network', req.policy.network || 'disabled'],
    ]), h('details', {}, h('summary', {}, 'Whole request (environment values withheld)'), json(req)));
  }).catch((e) => requestBox.replaceChildren(errorBox(e)));

  const showResult = (r) => {
    setStatus(r.status);
    summary.replaceChildren(summaryRows(r));
    const d = r.policy_decision || {};
    decisionBox.replaceChildren(kv([
      ['Action', h('span', { class: 'badge ' + (d.action === 'deny' ? 's-failed' : 's-completed') }, d.action || '—')],
      ['Policy version', h('code', { class: 'hash' }, d.policy_version || '—')],
    ]), h('ul', { class: 'messages' }, (d.messages || []).map((m) => h('li', {}, m))));
    const en = r.enforcement || {};
    usageBox.replaceChildren(kv([
      ['Enforced', (en.enforced || []).join(', ') || '—'],
      ['Not enforced', h('span', { class: (en.not_enforced || []).length ? 'warn' : '' }, (en.not_enforced || []).join(', ') || 'none')],
      ['CPU time', r.usage ? fmtDuration(r.usage.cpu_time_ms) : '—'],
      ['Peak memory', r.usage ? fmtBytes(r.usage.peak_memory_bytes) : '—'],
      ['stdout', `${fmtBytes(r.stdout && r.stdout.total_bytes)}${r.stdout && r.stdout.truncated ? ' (truncated)' : ''}`],
      ['stderr', `${fmtBytes(r.stderr && r.stderr.total_bytes)}${r.stderr && r.stderr.truncated ? ' (truncated)' : ''}`],
    ]));
    const rp = r.replay || {};
    replayBox.replaceChildren(kv([
      ['Request', h('code', { class: 'hash' }, rp.request_sha256 || '—')],
      ['Workspace snapshot', h('code', { class: 'hash' }, rp.workspace_snapshot_sha256 || '—')],
      ['Result', h('code', { class: 'hash' }, rp.result_sha256 || '—')],
      rp.readonly_mounts_sha256 && ['Read-only mounts', h('code', { class: 'hash' }, rp.readonly_mounts_sha256)],
    ]));
    artifactsBox.replaceChildren(artifactTable(enc, r.artifacts || [], r.artifacts_skipped || []));
    if (stdout.textContent === '' && r.stdout && r.stdout.text) stdout.textContent = r.stdout.text;
    if (stderr.textContent === '' && r.stderr && r.stderr.text) stderr.textContent = r.stderr.text;
  };

  const append = (pre, text) => {
    const atEnd = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 24;
    pre.append(text);
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  };
  const addEgress = (d) => {
    egressNote.hidden = true;
    egressBody.append(h('tr', { class: d.allowed ? '' : 'denied' },
      h('td', { class: 'num' }, fmtTime(d.time)), h('td', { class: 'mono ellipsis', title: d.host }, d.host), h('td', { class: 'num' }, String(d.port)), h('td', {}, d.mode),
      h('td', {}, h('span', { class: 'badge ' + (d.allowed ? 's-completed' : 's-failed') }, d.allowed ? 'allowed' : 'refused')),
      h('td', { class: 'mono ellipsis', title: d.rule || '' }, d.rule || ''), h('td', { class: 'num' }, fmtBytes(d.bytes_up)), h('td', { class: 'num' }, fmtBytes(d.bytes_down))));
  };

  // recordedEgress shows the decisions the run record holds (GET
  // /v1/jobs/{id}/egress) once the job has ended: all of them when the
  // page opened after the end, or when the live stream (replayed from
  // the record after its events expired) carried fewer.
  const recordedEgress = async () => {
    let log;
    try {
      log = await getJSON('/v1/jobs/' + enc + '/egress', { signal });
      egressErr.replaceChildren();
    } catch (e) {
      if (!signal.aborted) egressErr.replaceChildren(errorBox(e));
      return;
    }
    const ds = log.decisions || [];
    if (ds.length > egressBody.children.length) {
      egressBody.replaceChildren();
      ds.forEach(addEgress);
    }
    if (log.truncated) {
      egressNote.textContent = `The first ${ds.length} decisions; the run record holds more.`;
      egressNote.hidden = false;
    }
  };

  let first;
  try {
    first = await getJSON('/v1/jobs/' + enc, { signal });
  } catch (e) {
    err.replaceChildren(e instanceof APIError && e.status === 403 ? forbidden('read') : errorBox(e));
    return;
  }
  setStatus(first.status);
  if (first.ended_at) {
    // Finished before the page opened: the result holds the output,
    // the run record the egress decisions.
    showResult(first);
    await recordedEgress();
    return;
  }

  // Follow the events stream, resuming after a dropped connection.
  let lastID = 0;
  while (!signal.aborted) {
    let ended = false;
    try {
      await sse('/v1/jobs/' + enc + '/events', (type, ev, evID) => {
        if (evID) lastID = Number(evID);
        if (type === 'stdout') append(stdout, ev.text || '');
        else if (type === 'stderr') append(stderr, ev.text || '');
        else if (type === 'egress' && ev.egress) addEgress(ev.egress);
        else if (type === 'status') {
          setStatus(ev.status);
          if (terminalStatuses.has(ev.status)) ended = true;
        }
      }, { signal, lastID });
    } catch (e) {
      if (signal.aborted) return;
      err.replaceChildren(errorBox(e));
    }
    if (ended || terminalStatuses.has(status)) break;
    await sleep(1000, signal);
  }
  if (signal.aborted) return;
  // The record is written before the terminal event is published.
  for (let i = 0; i < 20 && !signal.aborted; i++) {
    const r = await getJSON('/v1/jobs/' + enc, { signal }).catch(() => null);
    if (r && r.ended_at) { showResult(r); await recordedEgress(); return; }
    await sleep(250, signal);
  }
}

function artifactTable(enc, artifacts, skipped) {
  if (!artifacts.length && !skipped.length) return h('p', { class: 'muted' }, 'No artifacts (policy.artifact_globs selects them).');
  const rows = artifacts.map((a) => {
    const out = h('span', { class: 'verify', 'aria-live': 'polite' });
    const name = a.path.split('/').pop();
    const btn = h('button', { type: 'button', class: 'link', 'data-artifact': a.path, onclick: async () => {
      out.textContent = 'downloading…';
      try {
        const d = await download(`/v1/jobs/${enc}/artifacts/${a.path.split('/').map(encodeURIComponent).join('/')}`, name, a.sha256);
        out.textContent = d.ok ? 'SHA-256 verified' : 'SHA-256 MISMATCH: ' + d.digest;
        out.className = 'verify ' + (d.ok ? 'ok' : 'error');
      } catch (e) { out.textContent = e.message; out.className = 'verify error'; }
    } }, 'Download');
    return h('tr', {}, h('td', { class: 'mono ellipsis', title: a.path }, a.path), h('td', { class: 'num' }, fmtBytes(a.size_bytes)),
      h('td', {}, h('code', { class: 'hash', title: a.sha256 }, a.sha256)), h('td', {}, btn, ' ', out));
  });
  return h('div', {},
    h('div', { class: 'table-wrap' }, h('table', { class: 'list artifacts' },
      h('thead', {}, h('tr', {}, ['Path', 'Size', 'SHA-256', ''].map((c) => h('th', { scope: 'col' }, c)))), h('tbody', {}, rows))),
    skipped.length ? h('div', {}, h('h3', {}, 'Skipped by the caps'), h('ul', {}, skipped.map((s) => h('li', {}, `${s.path}: ${s.reason} (${fmtBytes(s.size_bytes)})`)))) : null);
}

// summaryRows has the same rows for a running job (dashes) as for a
// finished one, so the page does not move when the result arrives.
function summaryRows(r) {
  const dash = (v) => (v === null || v === undefined || v === '' ? '—' : String(v));
  return kv([
    ['Backend', dash(r.backend)],
    ['Exit code', dash(r.exit_code)],
    ['Duration', r.ended_at ? fmtDuration(r.duration_ms) : '—'],
    ['Started', fmtTime(r.started_at)],
    ['Ended', fmtTime(r.ended_at)],
    ['Attempt', dash(r.attempt)],
    ['Termination', r.termination ? r.termination.reason + (r.termination.signal ? ' (' + r.termination.signal + ')' : '') : '—'],
    ['Error', r.error ? h('span', { class: 'error' }, `${r.error.code}: ${r.error.message}`) : '—'],
  ]);
}
