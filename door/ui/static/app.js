// app.js: the dashboard's router. Pages live in the URL fragment
// (#/jobs, #/jobs/<id>, #/tasks, #/tasks/<id>, #/agent-runs,
// #/agent-runs/<id>, #/sessions, #/sessions/<id>, #/), so /ui/ is the only
// page the server serves; each page gets an AbortSignal that ends its
// streams and refreshes when the reader navigates away.
import { onAuthChange, signedIn, logout } from './api.js';
import { h, errorBox } from './dom.js';
import { overview } from './overview.js';
import { jobsList, jobPage } from './jobs.js';
import { tasksList, taskPage } from './tasks.js';
import { agentRunsList, agentRunPage } from './agentruns.js';
import { sessionsList } from './sessions.js';
import { sessionPage } from './session.js';

const routes = [
  [/^\/?$/, 'overview', (main, m, q, s) => overview(main, q, s)],
  [/^\/jobs$/, 'jobs', (main, m, q, s) => jobsList(main, q, s)],
  [/^\/jobs\/(.+)$/, 'jobs', (main, m, q, s) => jobPage(main, decodeURIComponent(m[1]), s)],
  [/^\/tasks$/, 'tasks', (main, m, q, s) => tasksList(main, q, s)],
  [/^\/tasks\/(.+)$/, 'tasks', (main, m, q, s) => taskPage(main, decodeURIComponent(m[1]), s)],
  [/^\/agent-runs$/, 'agent-runs', (main, m, q, s) => agentRunsList(main, q, s)],
  [/^\/agent-runs\/(.+)$/, 'agent-runs', (main, m, q, s) => agentRunPage(main, decodeURIComponent(m[1]), s)],
  [/^\/sessions$/, 'sessions', (main, m, q, s) => sessionsList(main, q, s)],
  [/^\/sessions\/(.+)$/, 'sessions', (main, m, q, s) => sessionPage(main, decodeURIComponent(m[1]), s)],
];

let current = null;

function render() {
  if (current) current.abort();
  current = new AbortController();
  const main = document.getElementById('main');
  main.replaceChildren();
  const frag = location.hash.replace(/^#/, '');
  const [path, qs] = frag.split('?');
  const query = new URLSearchParams(qs || '');
  for (const [re, nav, page] of routes) {
    const m = re.exec(path);
    if (!m) continue;
    document.querySelectorAll('[data-nav]').forEach((a) => a.toggleAttribute('aria-current', a.dataset.nav === nav));
    document.querySelectorAll('[data-nav][aria-current]').forEach((a) => a.setAttribute('aria-current', 'page'));
    Promise.resolve(page(main, m, query, current.signal)).catch((e) => { if (!current.signal.aborted) main.append(errorBox(e)); });
    return;
  }
  main.append(h('h1', {}, 'Not found'), h('p', {}, h('a', { href: '#/' }, 'Back to the overview')));
}

function authState() {
  const el = document.getElementById('auth-state');
  el.replaceChildren(signedIn() ? h('button', { type: 'button', class: 'link', onclick: logout }, 'Forget token') : '');
}

window.addEventListener('hashchange', () => { render(); document.getElementById('main').focus({ preventScroll: true }); });
onAuthChange(() => { authState(); render(); });
authState();
render();
