// session.js: one sandbox's page: its record and usage, pause, resume
// and delete, a terminal (sessionterm.js), its processes (start, kill)
// and its files (sessionfiles.js).
import { getJSON, request, live, scopes, APIError } from './api.js';
import { h, badge, setBadge, fmtBytes, fmtDuration, fmtTime, kv, section, errorBox, forbidden, json } from './dom.js';
import { metadataText } from './sessions.js';
import { openTerminal } from './sessionterm.js';
import { filesBrowser } from './sessionfiles.js';

// liveStates are the states a sandbox can still change from.
const liveStates = new Set(['starting', 'running', 'paused']);

// workspaceText says where a sandbox's workspace came from.
function workspaceText(w) {
  if (w.repository) return [w.repository, w.branch && '@' + w.branch, w.commit && ' ' + w.commit].filter(Boolean).join('');
  return w.path || '(empty)';
}

// unitSuffix ends a usage figure's name with its unit.
const unitSuffix = /_(bytes|ms|ns|us|s|seconds)$/;

// usageLabel is a usage figure's name without its unit ("cpu_time_ms":
// "CPU time").
function usageLabel(k) {
  const words = k.replace(unitSuffix, '').replace(/_/g, ' ').replace(/^cpu\b/, 'CPU');
  return words.charAt(0).toUpperCase() + words.slice(1);
}

// usageValue formats one usage figure by its name's unit suffix.
function usageValue(k, v) {
  if (/_at$/.test(k)) return fmtTime(v);
  if (typeof v !== 'number') return typeof v === 'object' ? JSON.stringify(v) : String(v);
  if (/_bytes$/.test(k)) return fmtBytes(v);
  if (/_ms$/.test(k)) return fmtDuration(v);
  if (/_ns$/.test(k)) return fmtDuration(v / 1e6);
  if (/_us$/.test(k)) return fmtDuration(v / 1e3);
  if (/(_s|_seconds)$/.test(k)) return fmtDuration(v * 1000);
  return String(v);
}

// usageRows is a record's usage as [label, value] pairs, in its order.
export function usageRows(usage) {
  return Object.entries(usage).map(([k, v]) => [usageLabel(k), usageValue(k, v)]);
}

export async function sessionPage(main, id, signal) {
  const base = '/v1/sandboxes/' + encodeURIComponent(id);
  const st = badge('');
  const pause = h('button', { type: 'button', id: 'session-pause', disabled: true }, 'Pause');
  const resume = h('button', { type: 'button', id: 'session-resume', disabled: true }, 'Resume');
  const del = h('button', { type: 'button', id: 'session-delete', class: 'danger', disabled: true }, 'Delete');
  const refresh = h('button', { type: 'button', id: 'session-refresh' }, 'Refresh');
  const err = h('div', { class: 'err-slot', id: 'session-error' });
  const record = h('div', { id: 'session-record' });
  const usage = h('div', { id: 'session-usage' }, h('p', { class: 'muted' }, 'No usage in the record.'));
  const termEl = h('div', { id: 'session-terminal', class: 'xterm-host', tabindex: '-1' });
  const termState = h('p', { id: 'session-terminal-state', class: 'muted term-note', 'aria-live': 'polite' }, 'No terminal open.');
  const newTerm = h('button', { type: 'button', id: 'session-new-terminal' }, 'New terminal');
  const procs = h('tbody', { id: 'session-processes' });
  const cmd = h('input', { id: 'session-cmd', size: '40', placeholder: 'sleep 60', spellcheck: 'false' });
  const procErr = h('div', { class: 'err-slot' });
  main.append(
    h('p', { class: 'crumbs' }, h('a', { href: '#/sessions' }, '← Sessions')),
    h('div', { class: 'head' }, h('h1', {}, 'Sandbox ', h('span', { class: 'mono' }, id)), st, h('span', { class: 'spacer' }), refresh, pause, resume, del),
    err,
    h('div', { class: 'grid2' }, section('Record', record), section('Usage', usage)),
    section('Terminal', h('div', { class: 'filters' }, newTerm), termEl, termState),
    section('Processes',
      h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); start(); } },
        h('label', { for: 'session-cmd' }, 'Command (run with sh -c)'), cmd, h('button', { type: 'submit', id: 'session-start' }, 'Start')),
      procErr,
      h('div', { class: 'table-wrap' }, h('table', { class: 'list procs' },
        h('colgroup', {}, h('col', { class: 'c-pid' }), h('col', { class: 'c-tag' }), h('col', {}), h('col', { class: 'c-status' }), h('col', { class: 'c-code' }), h('col', { class: 'c-started' }), h('col', { class: 'c-act' })),
        h('thead', {}, h('tr', {}, ['PID', 'Tag', 'Command', 'State', 'Exit', 'Started'].map((c) => h('th', { scope: 'col' }, c)), h('th', { scope: 'col' }, h('span', { class: 'sr' }, 'Actions')))), procs))),
    section('Files', filesBrowser(id, signal)));
  if (!scopes.sessions) { err.replaceChildren(forbidden('sessions')); return; }
  const showError = (slot, e) => slot.replaceChildren(e instanceof APIError && e.status === 403 ? forbidden('sessions') : errorBox(e));

  const showRecord = (r) => {
    setBadge(st, r.state);
    const running = r.state === 'running';
    pause.disabled = !running;
    resume.disabled = r.state !== 'paused';
    del.disabled = !liveStates.has(r.state);
    newTerm.disabled = !running;
    const lim = r.limits || {};
    record.replaceChildren(kv([
      ['Backend', r.backend || '—'],
      ['Created', fmtTime(r.created_at)],
      ['Updated', fmtTime(r.updated_at)],
      ['Expires', fmtTime(r.expires_at)],
      r.ended_at && ['Ended', fmtTime(r.ended_at)],
      ['Timeout', fmtDuration((r.timeout_s || 0) * 1000)],
      ['Workspace', h('span', { class: 'mono' }, workspaceText(r.workspace || {}))],
      ['Limits', `${lim.memory_mb || '—'} MB memory, ${lim.cpu_count || '—'} CPUs, ${lim.max_processes || '—'} processes, ${lim.tmp_mb || '—'} MB /tmp`],
      ['Network', (r.network || {}).mode || 'disabled'],
      r.idle_timeout_s && ['Idle timeout', fmtDuration(r.idle_timeout_s * 1000) + (r.auto_pause ? ', then paused' : '')],
      r.paused_by && ['Paused by', r.paused_by],
      r.end_reason && ['End reason', r.end_reason],
      r.env && ['Environment', Object.keys(r.env).sort().join(' ')],
      r.secrets && r.secrets.length && ['Secrets', r.secrets.join(' ')],
      ['Metadata', metadataText(r.metadata)],
      ['Execs', String(r.execs || 0)],
      ['Processes', String(r.processes || 0)],
      r.last_run && ['Last run', h('span', { class: 'mono' }, r.last_run)],
      r.policy && ['Policy', json(r.policy)],
      r.error && ['Error', h('span', { class: 'error' }, `${r.error.code}: ${r.error.message}`)],
    ]));
    if (r.usage && typeof r.usage === 'object') {
      usage.replaceChildren(kv(usageRows(r.usage)));
    }
  };
  const readRecord = async () => {
    try {
      showRecord(await getJSON(base, { signal }));
      err.replaceChildren();
    } catch (e) {
      if (!signal.aborted) showError(err, e);
    }
  };
  // act posts a state change and shows the sandbox it answers.
  const act = async (method, path) => {
    try {
      showRecord(await (await request(base + path, { method, signal })).json());
      err.replaceChildren();
    } catch (e) {
      if (!signal.aborted) showError(err, e);
    }
    readProcs();
  };
  pause.onclick = () => act('POST', '/pause');
  resume.onclick = () => act('POST', '/resume');
  del.onclick = () => { if (confirm(`Delete sandbox ${id}? Its processes are killed and its workspace removed.`)) act('DELETE', ''); };

  const readProcs = async () => {
    let list;
    try {
      list = (await getJSON(base + '/processes', { signal })).processes || [];
      procErr.replaceChildren();
    } catch (e) {
      if (!signal.aborted) showError(procErr, e);
      return;
    }
    procs.replaceChildren(...list.map((p) => {
      const running = p.state === 'running';
      const exit = p.exit_code === null || p.exit_code === undefined ? '—' : String(p.exit_code);
      return h('tr', { 'data-pid': String(p.pid) },
        h('td', { class: 'num' }, String(p.pid)), h('td', { class: 'ellipsis' }, p.tag || '—'),
        h('td', { class: 'mono ellipsis', title: (p.argv || []).join(' ') }, (p.argv || []).join(' '), p.pty ? h('span', { class: 'muted' }, ' (pty)') : ''),
        h('td', {}, badge(running ? 'running' : (p.status || p.state))), h('td', { class: 'num' }, exit), h('td', { class: 'num ellipsis', title: fmtTime(p.started_at) }, fmtTime(p.started_at)),
        h('td', {}, h('div', { class: 'acts' },
          running && p.pty ? h('button', { type: 'button', 'aria-label': `Attach the terminal to process ${p.pid}`, onclick: () => attach(p.pid) }, 'Attach') : '',
          running ? h('button', { type: 'button', class: 'danger', 'aria-label': `Kill process ${p.pid}`, onclick: () => kill(p.pid) }, 'Kill') : '')));
    }));
  };
  const kill = async (pid) => {
    try { await request(`${base}/processes/${pid}`, { method: 'DELETE', signal }); } catch (e) { if (!signal.aborted) showError(procErr, e); }
    readProcs();
  };
  const start = async () => {
    const text = cmd.value.trim();
    if (!text) return;
    try {
      await request(base + '/processes', { method: 'POST', signal, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ argv: ['sh', '-c', text] }) });
      cmd.value = '';
    } catch (e) {
      if (!signal.aborted) showError(procErr, e);
    }
    readProcs();
  };

  // attach opens the terminal on a new shell (pid undefined) or on a
  // running process with a pty, detaching the one it showed.
  let terminal = null;
  const attach = async (pid) => {
    if (terminal) terminal.close();
    terminal = null;
    termEl.replaceChildren();
    delete termEl.dataset.exit;
    try {
      terminal = await openTerminal(termEl, id, {
        signal,
        pid,
        onState: (text, ended) => {
          termState.textContent = text;
          if (ended) readProcs();
        },
      });
    } catch (e) {
      if (!signal.aborted) { termState.textContent = 'No terminal open.'; showError(err, e); }
      return;
    }
    readProcs();
  };
  newTerm.onclick = () => attach();
  // Usage is read with the record, and processes have no stream: Refresh
  // reads both again.
  refresh.onclick = () => { readRecord(); readProcs(); };

  await readRecord();
  readProcs();
  if (scopes.read) {
    // Its state changes (pause, expiry, delete elsewhere) from the stream.
    live(signal, {
      onReady: readRecord,
      onEvent: (type, ev) => (type === 'session_state' && ev.sandbox_id === id ? readRecord() : null),
      onError: (e) => (e ? showError(err, e) : null),
    });
  }
}
