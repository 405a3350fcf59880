// tasks.js: the agent tasks list and a task's page.
import { getJSON, request, sse, live, download, scopes, APIError } from './api.js';
import { h, badge, setBadge, fmtBytes, fmtDuration, fmtTime, kv, section, errorBox, forbidden, sleep } from './dom.js';
import { Terminal } from './term.js';
import { renderDiff } from './diff.js';

const states = ['', 'pending', 'staging', 'provisioning', 'ready', 'running', 'completing', 'completed', 'failed', 'failed_preserved', 'cancelled'];
const terminal = new Set(['completed', 'failed', 'failed_preserved', 'cancelled']);

// tasksList: GET /api/v1/tasks by state and label, offset paging, read
// when the list-wide stream (GET /v1/events) connects, then kept current
// by its task_state events: a row changes state in place (and its tool
// calls are read again), leaves when it no longer matches the state tab,
// and a task that comes to match is added where the API would list it
// (newest first; the page keeps its size).
export function tasksList(main, query, signal) {
  const state = query.get('state') || '';
  const label = query.get('label') || '';
  const limit = Number(query.get('limit') || 25);
  const offset = Number(query.get('offset') || 0);
  const go = (q) => {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries(q)) if (v) p.set(k, v);
    location.hash = '#/tasks' + (p.toString() ? '?' + p : '');
  };
  const tabs = h('nav', { class: 'tabs', 'aria-label': 'Task states' }, states.map((s) =>
    h('a', { href: '#/tasks' + (s ? '?state=' + s : ''), 'aria-current': s === state ? 'page' : null }, s || 'all')));
  const labelIn = h('input', { id: 'f-label', value: label, placeholder: 'key=value', size: '18' });
  const form = h('form', { class: 'filters', role: 'search', onsubmit: (e) => { e.preventDefault(); go({ state, label: labelIn.value.trim() }); } },
    h('label', { for: 'f-label' }, 'Label'), labelIn, h('button', { type: 'submit' }, 'Apply'));
  const tbody = h('tbody', { id: 'tasks-body' });
  const table = h('table', { class: 'list tasks' },
    h('colgroup', {}, h('col', { class: 'c-id' }), h('col', { class: 'c-name' }), h('col', { class: 'c-status' }), h('col', { class: 'c-labels' }), h('col', { class: 'c-tool' }), h('col', { class: 'c-time' })),
    h('thead', {}, h('tr', {}, ['Task', 'Name', 'State', 'Labels', 'Tools', 'Created'].map((c) => h('th', { scope: 'col' }, c)))), tbody);
  const count = h('p', { class: 'muted count', 'aria-live': 'polite' }, '\u00a0');
  const pager = h('nav', { class: 'pager', 'aria-label': 'Pages' });
  const err = h('div', { class: 'err-slot' });
  main.append(h('h1', {}, 'Tasks'), tabs, form, err, h('div', { class: 'table-wrap' }, table), count, pager);
  if (!scopes.read) { err.replaceChildren(forbidden('read')); return; }

  const params = new URLSearchParams({ limit: String(limit), offset: String(offset) });
  if (state) params.set('state', state);
  if (label) params.set('label', label);
  const [labelKey, labelValue] = label.includes('=') ? [label.slice(0, label.indexOf('=')), label.slice(label.indexOf('=') + 1)] : ['', ''];

  // The page as the API would list it now: tasks newest first (then by
  // id), and the count of all that match.
  const rows = new Map();
  let list = [];
  let total = 0;
  const order = (a, b) => {
    const ta = Date.parse(a.created_at), tb = Date.parse(b.created_at);
    return ta === tb ? (a.task_id < b.task_id ? -1 : 1) : tb - ta;
  };

  const show = (t) => {
    let r = rows.get(t.task_id);
    if (!r) {
      r = { tr: h('tr', { 'data-task': t.task_id }), st: badge(t.state), name: h('td', { class: 'ellipsis' }), labels: h('td', { class: 'ellipsis' }), tool: h('td', { class: 'ellipsis' }), created: h('td', { class: 'num' }) };
      r.tr.append(h('td', { class: 'mono ellipsis' }, h('a', { href: '#/tasks/' + encodeURIComponent(t.task_id) }, t.task_id)), r.name, h('td', {}, r.st), r.labels, r.tool, r.created);
      rows.set(t.task_id, r);
    }
    setBadge(r.st, t.state);
    r.name.textContent = t.name || '—';
    r.labels.textContent = Object.entries(t.labels || {}).map(([k, v]) => k + '=' + v).join(' ') || '—';
    const p = t.heartbeat && t.heartbeat.progress;
    r.tool.textContent = p ? `${p.tool_calls} call${p.tool_calls === 1 ? '' : 's'}${p.current_tool ? ' · ' + p.current_tool : ''}` : '—';
    r.created.textContent = fmtTime(t.created_at);
  };

  const draw = () => {
    const keep = new Set(list.map((t) => t.task_id));
    for (const [id, r] of rows) if (!keep.has(id)) { r.tr.remove(); rows.delete(id); }
    list.forEach((t, i) => {
      const tr = rows.get(t.task_id).tr;
      if (tbody.children[i] !== tr) tbody.insertBefore(tr, tbody.children[i] || null);
    });
    count.textContent = total ? `${offset + 1}–${offset + list.length} of ${total}` : 'No tasks match.';
    pager.replaceChildren(
      offset > 0 ? h('a', { href: '#', onclick: (e) => { e.preventDefault(); go({ state, label, offset: String(Math.max(0, offset - limit)) }); } }, '← Previous') : h('span', { class: 'muted' }, '← Previous'),
      offset + list.length < total ? h('a', { href: '#', onclick: (e) => { e.preventDefault(); go({ state, label, offset: String(offset + limit) }); } }, 'Next →') : h('span', { class: 'muted' }, 'Next →'));
  };

  // load is the full read, on every (re)connect of the stream.
  const load = async () => {
    let page;
    try {
      page = await getJSON('/api/v1/tasks?' + params, { signal });
      err.replaceChildren();
    } catch (e) {
      if (signal.aborted) return;
      err.replaceChildren(e instanceof APIError && e.status === 403 ? forbidden('read') : errorBox(e));
      return;
    }
    list = page.tasks || [];
    total = page.total_count || 0;
    list.forEach(show);
    draw();
  };

  // onState applies one task_state event to the page.
  const onState = async (ev) => {
    const id = ev.task_id;
    const matches = !state || ev.state === state;
    const i = list.findIndex((t) => t.task_id === id);
    if (i >= 0 && !matches) {
      list.splice(i, 1);
      total = Math.max(0, total - 1);
      draw();
      return;
    }
    if (i < 0 && !matches) return;
    // The task as it stands (name, labels, tool calls): one read of it,
    // not of the list.
    let t;
    try {
      t = await getJSON('/api/v1/tasks/' + encodeURIComponent(id), { signal });
    } catch (_) { return; }
    t = { ...t, state: ev.state };
    if (i >= 0) {
      const j = list.findIndex((x) => x.task_id === id);
      if (j >= 0) list[j] = t;
      show(t);
      return;
    }
    if (list.some((x) => x.task_id === id)) return;
    if (labelKey && !(t.labels && t.labels[labelKey] === labelValue)) return;
    total++;
    // Where the API lists it: on this page when it sorts after the
    // page's first row (or this is the first page) and before its last
    // (or the page has room).
    const sorted = [...list, t].sort(order);
    const at = sorted.indexOf(t);
    if ((offset > 0 && at === 0) || (at === sorted.length - 1 && list.length >= limit)) { draw(); return; }
    list = sorted.slice(0, limit);
    show(t);
    draw();
  };

  live(signal, {
    onReady: load,
    onEvent: (type, ev) => (type === 'task_state' && ev.task_id ? onState(ev) : null),
    onError: (e) => {
      if (!e) { err.replaceChildren(); return; }
      err.replaceChildren(e instanceof APIError && e.status === 403 ? forbidden('read') : errorBox(e));
    },
  });
}

const svgNS = 'http://www.w3.org/2000/svg';

// sparkline draws samples as a fixed-size SVG polyline.
function sparkline(values, fmt) {
  const W = 280, H = 48;
  const svg = document.createElementNS(svgNS, 'svg');
  svg.setAttribute('viewBox', `0 0 ${W} ${H}`);
  svg.setAttribute('width', W);
  svg.setAttribute('height', H);
  svg.setAttribute('class', 'spark');
  svg.setAttribute('role', 'img');
  const last = values.length ? values[values.length - 1] : null;
  svg.setAttribute('aria-label', last === null ? 'no samples yet' : `latest ${fmt(last)}, ${values.length} samples`);
  if (values.length > 0) {
    const max = Math.max(...values, 1e-9);
    const step = values.length > 1 ? W / (values.length - 1) : 0;
    const pts = values.map((v, i) => `${(i * step).toFixed(1)},${(H - 2 - (v / max) * (H - 4)).toFixed(1)}`).join(' ');
    const pl = document.createElementNS(svgNS, 'polyline');
    pl.setAttribute('points', values.length > 1 ? pts : `0,${H / 2} ${W},${H / 2}`);
    svg.append(pl);
  }
  return svg;
}

// taskPage: the live terminal, state timeline, progress, CPU and memory
// from the heartbeats (all from the task's stream), then the patch,
// artifacts and children; cancel and destroy.
export async function taskPage(main, id, signal) {
  const enc = encodeURIComponent(id);
  const st = badge('');
  const cancelBtn = h('button', { type: 'button', class: 'danger', id: 'task-cancel', hidden: !scopes.cancel }, 'Cancel task');
  const destroyBtn = h('button', { type: 'button', class: 'danger', id: 'task-destroy', hidden: !scopes.cancel, disabled: true, title: 'A task can be destroyed once it has ended' }, 'Destroy');
  const actionMsg = h('span', { class: 'muted', 'aria-live': 'polite' });
  const termEl = h('div', { id: 'terminal', 'aria-label': 'Agent output' });
  const noteText = h('span', { id: 'term-count' }, '\u00a0');
  const saveBtn = h('button', { type: 'button', class: 'link', id: 'term-save', hidden: true }, 'download the full log');
  const saveMsg = h('span', { 'aria-live': 'polite' });
  const termNote = h('p', { class: 'muted term-note' }, noteText, ' ', saveBtn, ' ', saveMsg);
  // The note is drawn with the terminal, once a frame, never a line.
  const term = new Terminal(termEl, { onDraw: () => {
    noteText.textContent = `${term.count} line${term.count === 1 ? '' : 's'}` +
      (term.dropped ? `; ${term.dropped} earlier line${term.dropped === 1 ? '' : 's'} not shown,` : '');
    saveBtn.hidden = !term.dropped;
    if (term.chars > progress.output_bytes) showProgress();
  } });
  const timeline = h('ol', { class: 'timeline', id: 'timeline' });
  const progressBox = h('div', { id: 'progress' });
  const cpuBox = h('div', { class: 'chart' });
  const memBox = h('div', { class: 'chart' });
  const summary = h('div', { class: 'summary' });
  const patchBox = h('div', { id: 'patch' }, h('p', { class: 'muted' }, 'Collected when the task ends.'));
  const artifactsBox = h('div', { id: 'task-artifacts' }, h('p', { class: 'muted' }, 'Collected when the task ends.'));
  const childrenBox = h('div', {}, h('p', { class: 'muted' }, 'None.'));
  const err = h('div', { class: 'err-slot' });

  main.append(
    h('p', { class: 'crumbs' }, h('a', { href: '#/tasks' }, 'Tasks'), ' / '),
    h('div', { class: 'head' }, h('h1', { class: 'mono' }, id), st, h('span', { class: 'spacer' }), actionMsg, cancelBtn, destroyBtn),
    err, summary,
    section('Terminal', termEl, termNote),
    h('div', { class: 'grid3' },
      section('State timeline', timeline),
      section('Progress', progressBox),
      section('CPU and memory', h('h3', {}, 'CPU (cores)'), cpuBox, h('h3', {}, 'Memory'), memBox)),
    section('Patch', patchBox),
    h('div', { class: 'grid2' }, section('Artifacts', artifactsBox), section('Children', childrenBox)));
  if (!scopes.read) { err.replaceChildren(forbidden('read')); return; }

  let state = '';
  const setState = (s) => {
    const ended = terminal.has(s) && !terminal.has(state);
    state = s;
    setBadge(st, s);
    cancelBtn.disabled = terminal.has(s);
    destroyBtn.disabled = !terminal.has(s);
    saveBtn.disabled = !terminal.has(s);
    saveBtn.title = terminal.has(s) ? '' : 'The full log downloads once the task has ended';
    if (ended) showCharts();
  };
  const act = async (label, path, method) => {
    actionMsg.textContent = label + '…';
    try {
      await request(path, { method });
      actionMsg.textContent = label + ' requested.';
    } catch (e) { actionMsg.textContent = e.message; }
  };
  cancelBtn.addEventListener('click', () => act('Cancel', '/api/v1/tasks/' + enc, 'DELETE'));
  saveBtn.addEventListener('click', async () => {
    saveMsg.textContent = 'reading the log…';
    try {
      await saveLog(enc, id);
      saveMsg.textContent = '';
    } catch (e) { saveMsg.textContent = e.message; }
  });
  destroyBtn.addEventListener('click', () => {
    if (confirm('Destroy task ' + id + '? Its workspace and records are removed.')) act('Destroy', '/api/v1/tasks/' + enc + '/destroy', 'POST');
  });

  const progress = { tool_calls: 0, current_tool: '', output_bytes: 0, events: 0, last_activity: '' };
  const showProgress = () => progressBox.replaceChildren(kv([
    ['Tool calls', String(progress.tool_calls)],
    ['Current tool', progress.current_tool || '—'],
    // The heartbeat's count, or what the stream brought when more (the
    // heartbeats come every 30 s by default).
    ['Output', fmtBytes(Math.max(progress.output_bytes || 0, term.chars))],
    ['Stream events', String(progress.events)],
    ['Last activity', fmtTime(progress.last_activity)],
  ]));
  const cpu = [], mem = [];
  let lastCPU = null;
  let peak = 0, procs = null;
  // none is what a chart says without samples: a running task waits for
  // its first heartbeat; a finished one had none its backend measured.
  const none = () => (terminal.has(state) ? 'not measured by the backend' : 'no heartbeat yet');
  // A finished task's charts say its totals (its last heartbeat is taken
  // after the agent exited: no memory in use, no processes).
  const showCharts = () => {
    const ended = terminal.has(state);
    const cpuText = cpu.length && !ended ? `latest ${cpu[cpu.length - 1].toFixed(2)} cores`
      : lastCPU ? `${lastCPU.v.toFixed(2)} CPU-seconds in all` : none();
    const memText = mem.length && !ended ? `latest ${fmtBytes(mem[mem.length - 1])}, peak ${fmtBytes(peak)}${procs !== null ? ', ' + procs + ' processes' : ''}`
      : peak ? `peak ${fmtBytes(peak)}` : none();
    cpuBox.replaceChildren(sparkline(cpu, (v) => v.toFixed(2)), h('p', { class: 'muted num', id: 'cpu-note' }, cpuText));
    memBox.replaceChildren(sparkline(mem, fmtBytes), h('p', { class: 'muted num', id: 'mem-note' }, memText));
  };
  showProgress();
  showCharts();

  const showStatus = (t) => {
    setState(t.state);
    const md = t.metadata;
    // The same rows before and after the task ends: nothing moves.
    summary.replaceChildren(kv([
      ['Name', t.name || '—'],
      ['Labels', Object.entries(t.labels || {}).map(([k, v]) => k + '=' + v).join(' ') || '—'],
      ['Parent', t.parent_id ? h('a', { href: '#/tasks/' + encodeURIComponent(t.parent_id) }, t.parent_id) : '—'],
      ['Created', fmtTime(t.created_at)],
      ['Started', fmtTime(t.started_at)],
      ['Ended', fmtTime(t.ended_at)],
      ['Backend', md ? md.backend : '—'],
      ['Exit code', md && md.exit_code !== undefined && md.exit_code !== null ? String(md.exit_code) : '—'],
      ['Duration', md ? fmtDuration(md.duration_ms) : '—'],
      ['Not enforced', md && md.not_enforced ? h('span', { class: 'warn' }, md.not_enforced.join(', ')) : '—'],
      ['Error', t.error ? h('span', { class: 'error' }, `${t.error.code}: ${t.error.message}`) : '—'],
    ]));
    if (md && md.children && md.children.length) {
      childrenBox.replaceChildren(h('ul', {}, md.children.map((c) => h('li', {}, h('a', { href: '#/tasks/' + encodeURIComponent(c.task_id) }, c.task_id), ' ', badge(c.state)))));
    }
  };

  let first;
  try {
    first = await getJSON('/api/v1/tasks/' + enc, { signal });
  } catch (e) {
    err.replaceChildren(e instanceof APIError && e.status === 403 ? forbidden('read') : errorBox(e));
    return;
  }
  showStatus(first);

  // The task API's stream, read as Server-Sent Events over fetch (which
  // carries the token): the task's whole history, then live news. After
  // a dropped connection it resumes after the last message it got
  // (Last-Event-ID): nothing is lost or shown twice.
  timeline.replaceChildren();
  term.clear();
  cpu.length = 0; mem.length = 0; lastCPU = null;
  let lastID = '';
  while (!signal.aborted) {
    try {
      await sse(taskStream(enc), (type, m, id) => {
        if (id) lastID = id;
        switch (m.type) {
          case 'state_change':
            setState(m.to);
            timeline.append(h('li', {}, h('span', { class: 'num' }, fmtTime(m.time)), ' ', badge(m.to), m.reason ? h('span', { class: 'muted' }, ' ' + m.reason) : null));
            break;
          case 'output':
            // Chunks of lines (lines set) or one line, in arrival order.
            if (m.lines) term.writeChunk(m.text || '', m.stream);
            else term.write(m.text || '', m.stream);
            break;
          case 'progress':
            Object.assign(progress, m.progress || {});
            showProgress();
            break;
          case 'metrics':
            if (m.cpu_seconds !== undefined) {
              const t = new Date(m.time).getTime();
              if (lastCPU && t > lastCPU.t) cpu.push(Math.max(0, (m.cpu_seconds - lastCPU.v) / ((t - lastCPU.t) / 1000)));
              lastCPU = { t, v: m.cpu_seconds };
            }
            if (m.memory_bytes !== undefined) mem.push(m.memory_bytes);
            if (m.peak_memory_bytes !== undefined) peak = Math.max(peak, m.peak_memory_bytes);
            if (m.processes !== undefined) procs = m.processes;
            if (cpu.length > 120) cpu.shift();
            if (mem.length > 120) mem.shift();
            showCharts();
            break;
          case 'error':
            if (m.error) err.replaceChildren(errorBox(m.error));
            break;
        }
      }, { signal, lastID });
    } catch (e) {
      if (signal.aborted) return;
      err.replaceChildren(errorBox(e));
    }
    if (terminal.has(state)) break;
    await sleep(1000, signal);
  }
  if (signal.aborted) return;
  const done = await getJSON('/api/v1/tasks/' + enc, { signal }).catch(() => null);
  if (!done) return;
  showStatus(done);
  const arts = (done.metadata && done.metadata.artifacts) || [];
  artifactsBox.replaceChildren(arts.length ? taskArtifacts(enc, arts) : h('p', { class: 'muted' }, 'No artifacts.'));
  const patch = arts.find((a) => a.name.endsWith('.patch'));
  if (!patch) { patchBox.replaceChildren(h('p', { class: 'muted' }, 'The agent changed nothing.')); return; }
  try {
    const res = await request(`/api/v1/tasks/${enc}/artifacts/${patch.name.split('/').map(encodeURIComponent).join('/')}`, { signal });
    patchBox.replaceChildren(renderDiff(await res.text()));
  } catch (e) { patchBox.replaceChildren(errorBox(e)); }
}

// taskStream is the path of a task's stream, output in chunks of lines.
function taskStream(enc) {
  return '/ws/tasks/' + enc + '/stream?output=chunks';
}

// saveLog downloads the task's output as <id>.log, stdout and stderr in
// the order the stream gives them. It reads the stream to its end, so it
// is offered once the task has ended.
async function saveLog(enc, id) {
  const parts = [];
  await sse(taskStream(enc), (type, m) => { if (m.type === 'output') parts.push(m.text || '', '\n'); });
  const a = document.createElement('a');
  a.href = URL.createObjectURL(new Blob(parts, { type: 'text/plain' }));
  a.download = id + '.log';
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
}

function taskArtifacts(enc, arts) {
  return h('div', { class: 'table-wrap' }, h('table', { class: 'list artifacts' },
    h('thead', {}, h('tr', {}, ['Name', 'Size', 'SHA-256', ''].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, arts.map((a) => {
      const out = h('span', { class: 'verify', 'aria-live': 'polite' });
      return h('tr', {}, h('td', { class: 'mono ellipsis', title: a.name }, a.name), h('td', { class: 'num' }, fmtBytes(a.size_bytes)),
        h('td', {}, h('code', { class: 'hash', title: a.sha256 }, a.sha256)),
        h('td', {}, h('button', { type: 'button', class: 'link', 'data-artifact': a.name, onclick: async () => {
          out.textContent = 'downloading…';
          try {
            const d = await download(`/api/v1/tasks/${enc}/artifacts/${a.name.split('/').map(encodeURIComponent).join('/')}`, a.name.split('/').pop(), a.sha256);
            out.textContent = d.ok ? 'SHA-256 verified' : 'SHA-256 MISMATCH: ' + d.digest;
            out.className = 'verify ' + (d.ok ? 'ok' : 'error');
          } catch (e) { out.textContent = e.message; out.className = 'verify error'; }
        } }, 'Download'), ' ', out));
    }))));
}
