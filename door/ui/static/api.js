// api.js: every request the dashboard makes. The bearer token lives in
// this module's memory only (never localStorage): closing or reloading the
// tab forgets it. A 401 opens the login dialog and retries the request.

let token = '';
let pendingLogin = null;
const listeners = new Set();

// scopes records what the token may do, learnt by side-effect-free probes
// after sign-in (a route answers 403 before its handler runs when the
// token lacks the route's scope). Without a token file everything is allowed.
export const scopes = { read: true, cancel: true, sessions: true };

export function onAuthChange(f) { listeners.add(f); }
export function signedIn() { return token !== ''; }

export class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function withToken(h) {
  const out = new Headers(h || {});
  if (token) out.set('Authorization', 'Bearer ' + token);
  return out;
}

async function toError(res) {
  let code = 'http.' + res.status;
  let message = res.statusText || 'request failed';
  try {
    const body = await res.json();
    if (body && body.error) {
      code = body.error.code || code;
      message = body.error.message || message;
    }
  } catch (_) { /* not JSON */ }
  return new APIError(res.status, code, message);
}

// request fetches path with the token; 401 asks for a token and retries.
export async function request(path, opts = {}) {
  for (;;) {
    const res = await fetch(path, { ...opts, headers: withToken(opts.headers), cache: 'no-store' });
    if (res.status === 401) {
      await login();
      continue;
    }
    if (!res.ok) throw await toError(res);
    return res;
  }
}

export async function getJSON(path, opts) {
  return (await request(path, opts)).json();
}

// login shows the token dialog once for every caller waiting on a 401.
export function login() {
  if (pendingLogin) return pendingLogin;
  pendingLogin = new Promise((resolve) => {
    const dlg = document.getElementById('login');
    const form = document.getElementById('login-form');
    const input = document.getElementById('token');
    const err = document.getElementById('login-error');
    err.textContent = '';
    dlg.addEventListener('cancel', (e) => e.preventDefault()); // Escape leaves it open: nothing to show without a token
    form.onsubmit = async (e) => {
      e.preventDefault();
      const t = input.value.trim();
      if (!t) return;
      const res = await fetch('/v1/jobs?limit=1', { headers: { Authorization: 'Bearer ' + t }, cache: 'no-store' });
      if (res.status === 401) {
        err.textContent = 'The server does not know this token.';
        input.select();
        return;
      }
      token = t;
      input.value = '';
      await probeScopes();
      dlg.close();
      pendingLogin = null;
      listeners.forEach((f) => f());
      resolve();
    };
    if (!dlg.open) dlg.showModal();
    input.focus();
  });
  return pendingLogin;
}

export function logout() {
  token = '';
  listeners.forEach((f) => f());
  location.reload();
}

async function probeScopes() {
  const h = withToken();
  const read = await fetch('/v1/jobs?limit=1', { headers: h, cache: 'no-store' });
  scopes.read = read.status !== 403;
  // "_probe" is not a valid job id, so no job can ever be canceled by this.
  const cancel = await fetch('/v1/jobs/_probe', { method: 'DELETE', headers: h, cache: 'no-store' });
  scopes.cancel = cancel.status !== 403;
  const sessions = await fetch('/v1/sandboxes?state=running', { headers: h, cache: 'no-store' });
  scopes.sessions = sessions.status !== 403;
}

// socketProtocols is what a WebSocket to this server offers: protocol,
// and with a token the subprotocol that carries it
// (base64url.bearer.authorization.k8s.io.<token>, Kubernetes' form), as
// a browser's WebSocket cannot send an Authorization header. The server
// selects protocol and never echoes the token; it is in no URL.
export function socketProtocols(protocol) {
  if (!token) return [protocol];
  const b64 = btoa(String.fromCharCode(...new TextEncoder().encode(token)));
  return [protocol, 'base64url.bearer.authorization.k8s.io.' + b64.replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')];
}

async function* lines(res, sep) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let start = 0, i;
    while ((i = buf.indexOf(sep, start)) >= 0) {
      yield buf.slice(start, i);
      start = i + sep.length;
    }
    buf = buf.slice(start);
  }
}

// sse reads a text/event-stream through fetch (EventSource cannot send a
// token) and calls onEvent(type, data, id) for each event. It returns
// when the server ends the stream.
export async function sse(path, onEvent, { signal, lastID } = {}) {
  const headers = lastID ? { 'Last-Event-ID': String(lastID) } : {};
  const res = await request(path, { signal, headers });
  for await (const block of lines(res, '\n\n')) {
    let type = 'message';
    let id = '';
    const data = [];
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) continue;
      const c = line.indexOf(':');
      const k = c < 0 ? line : line.slice(0, c);
      let v = c < 0 ? '' : line.slice(c + 1);
      if (v.startsWith(' ')) v = v.slice(1);
      if (k === 'event') type = v;
      else if (k === 'data') data.push(v);
      else if (k === 'id') id = v;
    }
    if (data.length) onEvent(type, JSON.parse(data.join('\n')), id);
  }
}

// live keeps GET /v1/events (every job's status events and every task's
// state changes) open until signal aborts, and is how the lists and the
// overview stay current without polling. On each (re)connect the server's
// first event is "ready": onReady runs then, and re-reads what the page
// shows; onEvent(type, ev) gets the events that follow, in order, each
// after onReady has finished (so none is lost between the read and the
// stream, and none applies to a page being rebuilt). A dropped stream
// is opened again with Last-Event-ID after a pause that grows to 10 s.
// onError(err) shows a failure and onError(null) clears it; a token
// without the read scope stops the loop (retrying cannot help).
export async function live(signal, { onReady, onEvent, onError }) {
  let lastID = 0;
  let chain = Promise.resolve();
  const queue = (f) => {
    chain = chain.then(f).catch((e) => { if (!signal.aborted) onError(e); });
  };
  let pause = 500;
  while (!signal.aborted) {
    try {
      await sse('/v1/events', (type, ev, id) => {
        if (id) lastID = Number(id);
        if (signal.aborted) return;
        if (type === 'ready') {
          pause = 500;
          queue(async () => { onError(null); await onReady(); });
        } else {
          queue(() => onEvent(type, ev));
        }
      }, { signal, lastID });
    } catch (e) {
      if (signal.aborted) return;
      onError(e);
      if (e instanceof APIError && e.status === 403) return;
    }
    if (signal.aborted) return;
    await new Promise((resolve) => {
      const t = setTimeout(resolve, pause);
      signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
    });
    pause = Math.min(pause * 2, 10000);
  }
}

// download fetches a file with the token, checks its SHA-256 against
// want, and saves it under name. It returns the digest it computed.
export async function download(path, name, want) {
  const res = await request(path);
  const blob = await res.blob();
  const digest = await sha256(blob);
  const a = document.createElement('a');
  a.href = URL.createObjectURL(blob);
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(a.href), 10000);
  return { digest, ok: !want || digest === want };
}

async function sha256(blob) {
  const buf = await crypto.subtle.digest('SHA-256', await blob.arrayBuffer());
  return Array.from(new Uint8Array(buf), (b) => b.toString(16).padStart(2, '0')).join('');
}
