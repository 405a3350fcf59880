// sessionterm.js: a terminal in a sandbox. xterm.js (vendored from npm,
// MIT, see vendor/xterm/LICENSE) draws it; a shell started with a pty
// (POST .../processes) is attached over the process's WebSocket in
// Kubernetes exec framing (subprotocol v4.channel.k8s.io): the first
// byte of every binary message is its channel, 0 stdin (keystrokes), 1
// stdout and 2 stderr (written to the terminal), 3 the exit status
// (JSON), 4 a resize ({"Width", "Height"}, sent whenever the terminal's
// size in cells changes).
import { Terminal } from './vendor/xterm/xterm.mjs';
import { FitAddon } from './vendor/addon-fit/addon-fit.mjs';
import { getJSON, socketProtocols } from './api.js';
import { adoptStyles } from './cspstyles.js';

const protocol = 'v4.channel.k8s.io';
const STDIN = 0, STDOUT = 1, STDERR = 2, STATUS = 3, RESIZE = 4;

// The colours of the dashboard's read-only terminal (style.css --term-*).
const theme = { background: '#14161a', foreground: '#e4e6ea', cursor: '#e4e6ea', selectionBackground: '#3a4a66' };

// exitText says how a process ended from its channel 3 status.
export function exitText(status) {
  if (status.status === 'Success') return 'exited 0';
  const cause = ((status.details || {}).causes || []).find((c) => c.reason === 'ExitCode');
  return cause ? 'exited ' + cause.message : 'ended: ' + (status.message || status.reason || 'failure');
}

// openTerminal starts `sh` with a pty sized to the terminal drawn in el
// and attaches it, or, given pid, attaches that running process (its
// output from the start of what its buffer still holds, then live).
// onState(text, ended) reports the connection ("running, pid N",
// "exited 0", ...). It returns { pid, close }; close (or signal's abort)
// detaches the terminal and leaves the process running, as closing any
// socket does.
export async function openTerminal(el, sandbox, { signal, onState, pid }) {
  const term = new Terminal({ theme, fontFamily: '"DejaVu Sans Mono", "Liberation Mono", ui-monospace, Menlo, monospace', fontSize: 13, cursorBlink: true, scrollback: 5000 });
  const fit = new FitAddon();
  term.loadAddon(fit);
  const dropStyles = adoptStyles(el);
  // Shift+Tab is not sent to the shell: the browser moves the focus out
  // of the terminal with it, so the keyboard is never trapped there.
  term.attachCustomKeyEventHandler((e) => !(e.key === 'Tab' && e.shiftKey));
  term.open(el);
  fit.fit();
  el.dataset.cols = term.cols;
  el.dataset.rows = term.rows;
  onState(pid ? 'attaching…' : 'starting a shell…', false);
  const base = '/v1/sandboxes/' + encodeURIComponent(sandbox) + '/processes';
  let proc = { pid };
  try {
    if (!pid) proc = await getJSON(base, { method: 'POST', signal, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ argv: ['sh'], pty: { cols: term.cols, rows: term.rows }, tag: 'terminal' }) });
  } catch (e) {
    term.dispose();
    dropStyles();
    throw e;
  }
  el.dataset.pid = proc.pid;
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(`${scheme}//${location.host}${base}/${proc.pid}/ws`, socketProtocols(protocol));
  ws.binaryType = 'arraybuffer';
  const enc = new TextEncoder();
  const send = (ch, bytes) => {
    if (ws.readyState !== WebSocket.OPEN) return;
    const b = new Uint8Array(bytes.length + 1);
    b[0] = ch;
    b.set(bytes, 1);
    ws.send(b);
  };
  const sendSize = ({ cols, rows }) => {
    el.dataset.cols = cols;
    el.dataset.rows = rows;
    send(RESIZE, enc.encode(JSON.stringify({ Width: cols, Height: rows })));
  };
  let ended = false;
  ws.onopen = () => {
    onState('running, pid ' + proc.pid, false);
    sendSize({ cols: term.cols, rows: term.rows });
    term.focus();
  };
  ws.onmessage = (m) => {
    const b = new Uint8Array(m.data);
    if (b.length === 0) return;
    if (b[0] === STDOUT || b[0] === STDERR) {
      term.write(b.subarray(1));
    } else if (b[0] === STATUS) {
      ended = true;
      const text = exitText(JSON.parse(new TextDecoder().decode(b.subarray(1))));
      el.dataset.exit = text;
      onState(text, true);
    }
  };
  ws.onclose = (e) => {
    if (!ended) onState('disconnected' + (e.reason ? ': ' + e.reason : '') + ' (the shell may still run)', true);
  };
  const subs = [
    term.onData((d) => send(STDIN, enc.encode(d))),
    term.onBinary((d) => send(STDIN, Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff))),
    term.onResize(sendSize),
  ];
  const sized = new ResizeObserver(() => fit.fit());
  sized.observe(el);
  // close detaches quietly: the socket's own events no longer report to
  // the page, which may show another terminal already.
  const close = () => {
    sized.disconnect();
    subs.forEach((s) => s.dispose());
    ws.onopen = ws.onmessage = ws.onclose = null;
    ws.close();
    term.dispose();
    dropStyles();
  };
  signal.addEventListener('abort', close, { once: true });
  return { pid: proc.pid, close };
}
