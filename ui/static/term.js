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

export class Terminal {
  constructor(el, { scrollback = 5000 } = {}) {
    this.el = el;
    this.scrollback = scrollback;
    this.style = {};
    this.count = 0;
    this.dropped = 0;
    el.classList.add('term');
    el.setAttribute('role', 'log');
    el.setAttribute('tabindex', '0'); // scroll by keyboard
  }

  // write appends one line (stream "stderr" is marked).
  write(line, stream) {
    const atEnd = this.el.scrollHeight - this.el.scrollTop - this.el.clientHeight < 24;
    const div = document.createElement('div');
    div.className = 'tl' + (stream === 'stderr' ? ' stderr' : '');
    div.append(renderLine(line, this.style));
    if (!div.firstChild) div.append('\u200b');
    this.el.append(div);
    this.count++;
    while (this.el.childElementCount > this.scrollback) {
      this.el.firstElementChild.remove();
      this.dropped++;
    }
    if (atEnd) this.el.scrollTop = this.el.scrollHeight;
  }

  text() { return this.el.textContent; }
}
