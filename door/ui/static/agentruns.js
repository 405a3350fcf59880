// agentruns.js: capability runs (/v1/agent-runs): a form that launches a
// scripted task or a mock-agent run from a manifest, the list of runs, and
// a run's page with its compiled policy, its audit trail (denied calls
// highlighted) and the verification of the audit log's hash chain. Both
// follow GET /v1/events (live): its agent_run events say when a run
// starts, makes a tool call and ends, so nothing is re-read on a timer.
import { getJSON, request, live, APIError } from './api.js';
import { h, badge, setBadge, fmtTime, kv, section, errorBox, forbidden, json } from './dom.js';

const exampleManifest = `name: log-analyst
capabilities:
  tools: [list_logs, read_log, tail_log, grep_log]
  filesystem:
    read: [logs]      # relative to the server's first --workspace-root
    write: []
  commands:
    allow: []
limits:
  max_tool_calls: 12
`;

const exampleTask = `steps:
  - tool: list_logs
    args: {directory: logs}
  - tool: grep_log
    args: {path: logs, pattern: ERROR}
  - tool: read_log
    args: {path: /etc/passwd}   # outside the read roots: denied
`;

const runStatuses = { running: 'running', finished: 'completed', interrupted: 'failed' };

// runBadge shows a run's status with the colours of the job statuses.
function runBadge(status) {
  const b = badge(status);
  b.className = 'badge s-' + (runStatuses[status] || 'unknown');
  return b;
}

function setRunBadge(el, status) {
  setBadge(el, status);
  el.className = 'badge s-' + (runStatuses[status] || 'unknown');
}

// agentRunsList: the launch form and the runs, read when the stream opens
// and kept current by its agent_run events.
export function agentRunsList(main, query, signal) {
  const manifest = h('textarea', { id: 'ar-manifest', name: 'manifest', rows: '14', spellcheck: 'false', class: 'mono' });
  manifest.value = exampleManifest;
  const task = h('textarea', { id: 'ar-task', name: 'task', rows: '8', spellcheck: 'false', class: 'mono' });
  task.value = exampleTask;
  const message = h('input', { id: 'ar-message', name: 'message', size: '60', placeholder: 'Find the errors in the logs and summarize them.' });
  const taskField = h('div', { class: 'field', id: 'ar-task-field' }, h('label', { for: 'ar-task' }, 'Task (steps, YAML or JSON)'), task);
  const messageField = h('div', { class: 'field', id: 'ar-message-field', hidden: true }, h('label', { for: 'ar-message' }, 'Message to the mock agent'), message);
  const modeRadio = (value, label) => h('label', { class: 'radio' },
    h('input', { type: 'radio', name: 'mode', value, id: 'ar-mode-' + value, checked: value === 'task', onchange: () => {
      taskField.hidden = value !== 'task';
      messageField.hidden = value !== 'mock';
    } }), ' ', label);
  const formErr = h('div', { class: 'err-slot', id: 'ar-launch-error' });
  const submit = h('button', { type: 'submit', id: 'ar-launch' }, 'Launch');
  const form = h('form', { class: 'launch', onsubmit: async (e) => {
    e.preventDefault();
    const mode = form.querySelector('input[name=mode]:checked').value;
    const body = { manifest_yaml: manifest.value, mode };
    if (mode === 'task') body.task_yaml = task.value;
    else if (message.value.trim()) body.message = message.value.trim();
    submit.disabled = true;
    formErr.replaceChildren();
    try {
      const res = await request('/v1/agent-runs', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      const run = await res.json();
      location.hash = '#/agent-runs/' + encodeURIComponent(run.run_id);
    } catch (err) {
      formErr.replaceChildren(err instanceof APIError && err.status === 403 ? forbidden('submit') : errorBox(err));
    } finally {
      submit.disabled = false;
    }
  } },
  h('div', { class: 'field' }, h('label', { for: 'ar-manifest' }, 'Manifest (YAML)'), manifest),
  h('fieldset', { class: 'modes' }, h('legend', {}, 'Mode'), modeRadio('task', 'Scripted task'), modeRadio('mock', 'Mock agent loop')),
  taskField, messageField, formErr, submit);

  const tbody = h('tbody', { id: 'agent-runs-body' });
  const table = h('table', { class: 'list agent-runs' },
    h('caption', { class: 'sr' }, 'Capability runs'),
    h('colgroup', {}, h('col', { class: 'c-id' }), h('col', { class: 'c-status' }), h('col', { class: 'c-mode' }), h('col', { class: 'c-name' }), h('col', { class: 'c-exit' }), h('col', { class: 'c-calls' }), h('col', { class: 'c-time' })),
    h('thead', {}, h('tr', {}, ['Run', 'Status', 'Mode', 'Agent', 'Exit', 'Calls (denied)', 'Started'].map((c) => h('th', { scope: 'col' }, c)))),
    tbody);
  const count = h('p', { class: 'muted count', 'aria-live': 'polite' }, '\u00a0');
  const err = h('div', { class: 'err-slot' });
  main.append(h('h1', {}, 'Capability runs'), section('Launch a run', form), err, h('div', { class: 'table-wrap' }, table), count);

  const showError = (e) => err.replaceChildren(e instanceof APIError && e.status === 403 ? forbidden('read') : errorBox(e));
  const rows = new Map();
  // show adds or updates run's row (not its place in the table).
  const show = (run) => {
    let r = rows.get(run.run_id);
    if (!r) {
      r = { tr: h('tr', { 'data-run': run.run_id }), st: runBadge(run.status), exit: h('td', {}), calls: h('td', { class: 'num' }) };
      r.tr.append(h('td', { class: 'mono ellipsis' }, h('a', { href: '#/agent-runs/' + encodeURIComponent(run.run_id) }, run.run_id)),
        h('td', {}, r.st), h('td', {}, run.mode), h('td', { class: 'ellipsis' }, run.agent), r.exit, r.calls, h('td', { class: 'num' }, fmtTime(run.started_at)));
      rows.set(run.run_id, r);
    }
    setRunBadge(r.st, run.status);
    r.exit.textContent = run.exit_reason || '—';
    r.calls.textContent = `${run.tool_calls_used || 0} (${run.denied || 0})`;
    return r;
  };
  const counted = () => {
    count.textContent = rows.size ? `${rows.size} run${rows.size === 1 ? '' : 's'}` : 'No capability runs yet.';
  };

  // load is the full read, on every (re)connect of the stream.
  const load = async () => {
    let page;
    try {
      page = await getJSON('/v1/agent-runs?limit=100', { signal });
      err.replaceChildren();
    } catch (e) {
      if (!signal.aborted) showError(e);
      return;
    }
    const list = page.runs || [];
    const keep = new Set(list.map((r) => r.run_id));
    for (const [id, r] of rows) if (!keep.has(id)) { r.tr.remove(); rows.delete(id); }
    list.forEach((run, i) => {
      const r = show(run);
      if (tbody.children[i] !== r.tr) tbody.insertBefore(r.tr, tbody.children[i] || null);
    });
    counted();
  };

  // onRun applies one agent_run event: a run on the page changes in
  // place; a new one (the newest) is read once and goes on top.
  const onRun = async (ev) => {
    if (rows.has(ev.run_id)) {
      show({ run_id: ev.run_id, status: ev.status, exit_reason: ev.exit_reason, tool_calls_used: ev.calls, denied: ev.denied });
      return;
    }
    let run;
    try {
      run = await getJSON('/v1/agent-runs/' + encodeURIComponent(ev.run_id), { signal });
    } catch (e) {
      if (!signal.aborted) showError(e);
      return;
    }
    if (rows.has(run.run_id) || signal.aborted) return;
    tbody.insertBefore(show(run).tr, tbody.firstChild);
    while (rows.size > 100) {
      const last = tbody.lastElementChild;
      rows.delete(last.dataset.run);
      last.remove();
    }
    counted();
  };

  live(signal, {
    onReady: load,
    onEvent: (type, ev) => (type === 'agent_run' && ev.run_id ? onRun(ev) : null),
    onError: (e) => (e ? showError(e) : err.replaceChildren()),
  });
}

// agentRunPage: one run, read when the page opens and again on each of
// its agent_run events, until it is no longer running.
export async function agentRunPage(main, id, signal) {
  const enc = encodeURIComponent(id);
  const st = runBadge('running');
  const facts = h('div', { id: 'ar-summary' });
  const chain = h('p', { id: 'ar-chain', class: 'verify', 'aria-live': 'polite' }, 'Verifying…');
  const policy = h('div', { id: 'ar-policy' });
  const tbody = h('tbody', { id: 'ar-audit-body' });
  const trail = h('table', { class: 'list audit' },
    h('caption', { class: 'sr' }, 'Audit events'),
    h('colgroup', {}, h('col', { class: 'c-seq' }), h('col', { class: 'c-event' }), h('col', { class: 'c-tool' }), h('col', { class: 'c-decision' }), h('col', {})),
    h('thead', {}, h('tr', {}, ['#', 'Event', 'Tool', 'Decision', 'Detail'].map((c) => h('th', { scope: 'col' }, c)))),
    tbody);
  const err = h('div', { class: 'err-slot' });
  main.append(
    h('p', { class: 'crumbs' }, h('a', { href: '#/agent-runs' }, '← Capability runs')),
    h('div', { class: 'head' }, h('h1', {}, 'Run ', h('span', { class: 'mono' }, id)), st),
    err,
    section('Summary', facts),
    section('Audit chain', chain),
    section('Audit trail', h('p', { class: 'muted' }, 'Denied calls are marked and highlighted.'), h('div', { class: 'table-wrap' }, trail)),
    section('Compiled policy', policy));

  const showError = (e) => err.replaceChildren(e instanceof APIError && e.status === 403 ? forbidden('read') : errorBox(e));
  // follow ends with the page, or once the run can no longer change.
  const follow = new AbortController();
  signal.addEventListener('abort', () => follow.abort(), { once: true });
  let shownPolicy = false;
  let seen = 0;
  // read re-reads the run and its audit trail, appending the new events.
  // Reads never overlap: events that arrive during one are served by one
  // more read after it, and none once the run has ended.
  let reading = null;
  let again = false;
  let ended = false;
  const read = async () => {
    if (ended) return;
    if (reading) {
      again = true;
      return;
    }
    reading = (async () => {
      do {
        again = false;
        await readOnce();
      } while (again && !ended);
    })();
    try {
      await reading;
    } finally {
      reading = null;
    }
  };
  const readOnce = async () => {
    let run, audit;
    try {
      run = await getJSON(`/v1/agent-runs/${enc}`, { signal });
      audit = await getJSON(`/v1/agent-runs/${enc}/audit`, { signal });
      err.replaceChildren();
    } catch (e) {
      if (!signal.aborted) showError(e);
      return;
    }
    setRunBadge(st, run.status);
    facts.replaceChildren(summaryOf(run));
    if (!shownPolicy && run.policy) {
      policy.replaceChildren(policyOf(run.policy));
      shownPolicy = true;
    }
    showChain(chain, audit);
    const events = audit.events || [];
    for (; seen < events.length; seen++) tbody.append(eventRow(events[seen]));
    if (run.status !== 'running') {
      ended = true;
      follow.abort();
    }
  };
  live(follow.signal, {
    onReady: read,
    onEvent: (type, ev) => (type === 'agent_run' && ev.run_id === id ? read() : null),
    onError: (e) => (e ? showError(e) : null),
  });
}

function summaryOf(run) {
  const s = run.summary || {};
  return h('div', {}, kv([
    ['Agent', run.agent],
    ['Mode', run.mode === 'task' ? 'scripted task' : run.mode === 'mock' ? 'mock agent loop' : run.mode],
    ['Status', run.status],
    ['Started', fmtTime(run.started_at)],
    ['Ended', fmtTime(run.ended_at)],
    ['Exit reason', run.exit_reason || '—'],
    ['Tool calls', run.status === 'finished' ? `${run.tool_calls_used} of ${s.max_tool_calls} (allowed ${run.allowed}, denied ${run.denied}, failed ${run.failed})`
      : run.status === 'running' ? `${run.tool_calls_used} so far (allowed ${run.allowed}, denied ${run.denied}, failed ${run.failed})` : '—'],
  ]), s.final_answer ? [h('h3', {}, 'Final answer'), h('pre', { class: 'answer', id: 'ar-answer' }, s.final_answer)] : null);
}

function policyOf(p) {
  const list = (xs) => (xs && xs.length ? h('ul', { class: 'plain' }, xs.map((x) => h('li', { class: 'mono' }, x))) : h('span', { class: 'muted' }, 'none'));
  const lim = p.limits || {};
  return h('div', {},
    kv([
      ['Name', p.name],
      ['Tools', list(p.tools)],
      ['Read roots', list(p.read_roots)],
      ['Write roots', list(p.write_roots)],
      ['Commands', list((p.commands || []).map((c) => c.path + (c.sha256 ? '  sha256:' + c.sha256 : '  (not pinned)')))],
      ['Network', p.network ? (p.network_hosts && p.network_hosts.length ? 'allowlist: ' + p.network_hosts.join(', ') : 'host network') : 'none'],
      ['Git', p.git ? 'yes' : 'no'],
      ['Limits', `${lim.max_runtime_seconds} s, ${lim.max_memory_mb} MB, ${lim.max_tool_calls} tool calls` + (lim.defaulted && lim.defaulted.length ? ` (defaulted: ${lim.defaulted.join(', ')})` : '')],
      p.warnings && p.warnings.length ? ['Warnings', h('ul', { class: 'plain warn' }, p.warnings.map((w) => h('li', {}, w)))] : null,
    ]),
    h('h3', {}, 'As recorded in run_start'), json(p));
}

function showChain(el, audit) {
  const v = audit.verify || {};
  el.dataset.ok = v.ok ? 'true' : 'false';
  if (v.ok) {
    el.className = 'verify ok';
    const tail = audit.status === 'running' ? ' so far (run in progress)' : v.complete ? ', ends with run_end' : ', but no run_end (cut short)';
    el.textContent = `Hash chain verified: ${v.lines} line${v.lines === 1 ? '' : 's'}${tail}. Head sha256 ${v.head_sha256}`;
  } else {
    el.className = 'verify error';
    el.textContent = `Hash chain broken at line ${v.broken_line}: ${v.problem}`;
  }
}

function eventRow(ev) {
  const denied = ev.event === 'tool_call' && ev.allowed === false;
  let decision = '';
  let detail = '';
  switch (ev.event) {
    case 'run_start':
      detail = `agent ${ev.agent}, mode ${ev.mode}, manifest sha256 ${ev.manifest_sha256}`;
      break;
    case 'tool_call':
      decision = denied ? h('strong', { class: 'denied-mark' }, 'DENIED') : 'allowed';
      detail = JSON.stringify(ev.args) + (denied ? ` — ${ev.code}: ${ev.reason}` : '');
      break;
    case 'tool_result':
      decision = ev.ok ? 'ok' : 'failed';
      detail = ev.ok ? resultText(ev.result) : `${ev.code}: ${ev.error}`;
      break;
    case 'run_end':
      detail = `exit ${ev.exit_reason}, ${ev.tool_calls_used} tool calls`;
      break;
  }
  return h('tr', { class: denied ? 'denied' : '', 'data-seq': ev.seq, 'data-event': ev.event, 'data-denied': denied ? 'true' : null },
    h('td', { class: 'num' }, ev.seq), h('td', {}, ev.event), h('td', { class: 'mono' }, ev.tool || ''), h('td', {}, decision),
    h('td', { class: 'mono detail' }, detail));
}

function resultText(r) {
  if (!r) return '';
  if (r.job_id) return `job ${r.job_id} ${r.status}` + (r.stdout ? ': ' + r.stdout.trim() : '');
  const s = JSON.stringify(r);
  return s.length > 300 ? s.slice(0, 300) + '…' : s;
}
