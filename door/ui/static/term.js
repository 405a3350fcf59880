// term.js: a read-only terminal for agent output. It renders ANSI SGR
// (16, 256 and 24-bit colours, bold, dim, italic, underline, inverse),
// drops every other escape sequence, keeps a bounded scrollback and
// follows the end unless the reader scrolled up.

// Colours 0-7 are lightened for the dark background, so each reads at
// WCAG AA contrast or better on it (black is drawn grey).
const palette = [
  '#7a808c', '#f06a6a', '#46b946', '#d4a72c', '#6d9bf1', '#d07be0', '#3fb8b8', '#c5c8c6',
  '#666666', '#ff5f5f', '#5fd75f', '#ffd75f', '#5f87ff', '#ff5fff', '#5fffff', '#ffffff',
];

function color256(n) {
  if (n < 16) return palette[n];
  if (n < 232) {
    n -= 16;
    const v = (x) => (x === 0 ? 0 : 55 + x * 40);
    return `rgb(${v(Math.floor(n / 36))},${v(Math.floor(n / 6) % 6)},${v(n % 6)})`;
  }
  const g = 8 + (n - 232) * 10;
  return `rgb(${g},${g},${g})`;
}

// parseSGR applies the parameters of one ESC[...m to style.
function applySGR(style, params) {
  const p = params.length ? params : [0];
  for (let i = 0; i < p.length; i++) {
    const n = p[i];
    if (n === 0) Object.assign(style, { fg: null, bg: null, bold: false, dim: false, italic: false, underline: false, inverse: false });
    else if (n === 1) style.bold = true;
    else if (n === 2) style.dim = true;
    else if (n === 3) style.italic = true;
    else if (n === 4) style.underline = true;
    else if (n === 7) style.inverse = true;
    else if (n === 22) { style.bold = false; style.dim = false; }
    else if (n === 23) style.italic = false;
    else if (n === 24) style.underline = false;
    else if (n === 27) style.inverse = false;
    else if (n >= 30 && n <= 37) style.fg = palette[n - 30];
    else if (n === 39) style.fg = null;
    else if (n >= 40 && n <= 47) style.bg = palette[n - 40];
    else if (n === 49) style.bg = null;
    else if (n >= 90 && n <= 97) style.fg = palette[n - 90 + 8];
    else if (n >= 100 && n <= 107) style.bg = palette[n - 100 + 8];
    else if (n === 38 || n === 48) {
      let c = null;
      if (p[i + 1] === 5 && p[i + 2] !== undefined) { c = color256(p[i + 2]); i += 2; }
      else if (p[i + 1] === 2 && p[i + 4] !== undefined) { c = `rgb(${p[i + 2]},${p[i + 3]},${p[i + 4]})`; i += 4; }
      if (n === 38) style.fg = c; else style.bg = c;
    }
  }
}

// render turns one line of text with escapes into spans; style carries
// over from line to line as in a terminal.
export function renderLine(text, style) {
  const frag = document.createDocumentFragment();
  // CSI sequences, OSC sequences (to BEL or ST), other two-byte escapes.
  const re = /\x1b\[([0-9;?]*)([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]/g;
  let last = 0;
  let m;
  const push = (s) => {
    if (!s) return;
    s = s.replace(/[\x00-\x08\x0b-\x1f\x7f]/g, '');
    if (!s) return;
    const plain = !style.fg && !style.bg && !style.bold && !style.dim && !style.italic && !style.underline && !style.inverse;
    if (plain) { frag.append(s); return; }
    const span = document.createElement('span');
    span.textContent = s;
    let fg = style.fg, bg = style.bg;
    if (style.inverse) { [fg, bg] = [bg || 'var(--term-bg)', fg || 'var(--term-fg)']; }
    if (fg) span.style.color = fg;
    if (bg) span.style.backgroundColor = bg;
    if (style.bold) span.style.fontWeight = '700';
    if (style.dim) span.style.opacity = '0.7';
    if (style.italic) span.style.fontStyle = 'italic';
    if (style.underline) span.style.textDecoration = 'underline';
    frag.append(span);
  };
  while ((m = re.exec(text)) !== null) {
    push(text.slice(last, m.index));
    last = re.lastIndex;
    if (m[2] === 'm') applySGR(style, (m[1] || '').split(';').filter((x) => x !== '').map(Number));
  }
  push(text.slice(last));
  return frag;
}

// advanceStyle applies the SGR escapes of a line that is not drawn (it
// scrolled out before it was), so the lines after it keep their colours.
function advanceStyle(text, style) {
  if (text.indexOf('\x1b[') < 0) return;
  const re = /\x1b\[([0-9;?]*)m/g;
  let m;
  while ((m = re.exec(text)) !== null) applySGR(style, (m[1] || '').split(';').filter((x) => x !== '').map(Number));
}

// frameBudget is the milliseconds of a frame the terminal may spend
// drawing; what is left waits for the next frame, so the page stays
// responsive however fast the agent writes.
const frameBudget = 8;

// Terminal draws lines in batches: write and writeChunk only queue, and
// one requestAnimationFrame callback draws what is queued (a fragment per
// frame, one layout read and one scroll). At most scrollback lines are
// kept in the DOM; queued lines that would scroll out at once are never
// drawn (their escapes still apply). onDraw runs after each frame.
export class Terminal {
  constructor(el, { scrollback = 5000, onDraw = null } = {}) {
    this.el = el;
    this.scrollback = scrollback;
    this.onDraw = onDraw;
    this.style = {};
    this.count = 0; // lines received
    this.chars = 0; // characters received, newlines included
    this.dropped = 0; // lines received and not in the DOM
    this.queue = []; // {lines, i, stream}
    this.queued = 0;
    this.frame = 0;
    el.classList.add('term');
    el.setAttribute('role', 'log');
    el.setAttribute('tabindex', '0'); // scroll by keyboard
  }

  // write queues one line (stream "stderr" is marked).
  write(line, stream) { this.push([line], stream, line.length + 1); }

  // writeChunk queues text holding lines joined by "\n".
  writeChunk(text, stream) { this.push(text.split('\n'), stream, text.length + 1); }

  push(lines, stream, chars) {
    this.queue.push({ lines, i: 0, stream });
    this.queued += lines.length;
    this.count += lines.length;
    this.chars += chars;
    // A hidden tab draws no frames: the queue still keeps no more
    // than it could show.
    if (this.queued > 2 * this.scrollback) this.trim();
    if (!this.frame) this.frame = requestAnimationFrame(() => this.draw());
  }

  // trim skips queued lines that would scroll out as soon as drawn.
  trim() {
    while (this.queued > this.scrollback) {
      const q = this.queue[0];
      const n = Math.min(q.lines.length - q.i, this.queued - this.scrollback);
      for (let k = 0; k < n; k++) advanceStyle(q.lines[q.i + k], this.style);
      q.i += n;
      this.queued -= n;
      this.dropped += n;
      if (q.i === q.lines.length) this.queue.shift();
    }
  }

  // clear forgets every line (a replay starts over).
  clear() {
    if (this.frame) cancelAnimationFrame(this.frame);
    this.frame = 0;
    this.queue = [];
    this.queued = 0;
    this.count = this.chars = this.dropped = 0;
    this.style = {};
    this.el.replaceChildren();
  }

  draw() {
    this.frame = 0;
    this.trim();
    const atEnd = this.el.scrollHeight - this.el.scrollTop - this.el.clientHeight < 24;
    const frag = document.createDocumentFragment();
    const start = performance.now();
    let drawn = 0;
    while (this.queue.length) {
      const q = this.queue[0];
      const cls = 'tl' + (q.stream === 'stderr' ? ' stderr' : '');
      while (q.i < q.lines.length) {
        const div = document.createElement('div');
        div.className = cls;
        div.append(renderLine(q.lines[q.i++], this.style));
        if (!div.firstChild) div.append('\u200b');
        frag.append(div);
        this.queued--;
        if (++drawn % 64 === 0 && performance.now() - start > frameBudget) break;
      }
      if (q.i === q.lines.length) this.queue.shift();
      if (drawn % 64 === 0 && performance.now() - start > frameBudget) break;
    }
    this.el.append(frag);
    const excess = this.el.childElementCount - this.scrollback;
    if (excess > 0) {
      const r = document.createRange();
      r.setStartBefore(this.el.firstElementChild);
      r.setEndAfter(this.el.children[excess - 1]);
      r.deleteContents();
      this.dropped += excess;
    }
    if (atEnd) this.el.scrollTop = this.el.scrollHeight;
    if (this.queued > 0) this.frame = requestAnimationFrame(() => this.draw());
    if (this.onDraw) this.onDraw();
  }

  text() { return this.el.textContent; }
}
