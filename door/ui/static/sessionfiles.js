// sessionfiles.js: a sandbox's files. GET .../files?path=P answers a
// directory as a JSON listing ({path, entries: [{name, path, type, size,
// mode, modified_at}], truncated}) and a file as its bytes; a small file
// that is text is shown as text.
import { request } from './api.js';
import { h, fmtBytes, fmtTime, errorBox } from './dom.js';

// maxShownBytes is the largest file shown as text.
const maxShownBytes = 256 * 1024;

export function filesBrowser(id, signal) {
  const base = '/v1/sandboxes/' + encodeURIComponent(id) + '/files?path=';
  const pathIn = h('input', { id: 'files-path', size: '40', value: '.', spellcheck: 'false' });
  const where = h('p', { id: 'files-where', class: 'mono', 'aria-live': 'polite' });
  const body = h('div', { id: 'files-view' });
  const open = async (path) => {
    pathIn.value = path;
    where.textContent = path;
    body.replaceChildren(h('p', { class: 'muted' }, 'Reading…'));
    let res;
    try {
      res = await request(base + encodeURIComponent(path), { signal });
    } catch (e) {
      if (!signal.aborted) body.replaceChildren(errorBox(e));
      return;
    }
    if ((res.headers.get('Content-Type') || '').startsWith('application/json')) {
      listing(await res.json());
      return;
    }
    const bytes = new Uint8Array(await res.arrayBuffer());
    if (bytes.length > maxShownBytes) {
      body.replaceChildren(h('p', { class: 'muted' }, `${fmtBytes(bytes.length)}: too big to show here.`));
      return;
    }
    let text;
    try {
      text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
    } catch (_) {
      body.replaceChildren(h('p', { class: 'muted' }, `${fmtBytes(bytes.length)} of binary data.`));
      return;
    }
    body.replaceChildren(h('pre', { class: 'file-text', id: 'files-text', tabindex: '0' }, text));
  };
  const parent = (p) => (p.includes('/') ? p.slice(0, p.lastIndexOf('/')) : '.');
  const listing = (dir) => {
    const rows = (dir.entries || []).map((e) => h('tr', { 'data-path': e.path },
      h('td', { class: 'mono ellipsis' }, e.type === 'dir' || e.type === 'file'
        ? h('a', { href: '#', onclick: (ev) => { ev.preventDefault(); open(e.path); } }, e.name + (e.type === 'dir' ? '/' : ''))
        : e.name + (e.type === 'symlink' ? ' (symlink)' : '')),
      h('td', {}, e.type), h('td', { class: 'num' }, e.type === 'file' ? fmtBytes(e.size) : '—'),
      h('td', { class: 'mono' }, e.mode || '—'), h('td', { class: 'num' }, fmtTime(e.modified_at))));
    const up = dir.path && dir.path !== '.' ? h('p', {}, h('a', { href: '#', onclick: (ev) => { ev.preventDefault(); open(parent(dir.path)); } }, '↑ Parent directory')) : '';
    body.replaceChildren(up,
      h('table', { class: 'list files' },
        h('colgroup', {}, h('col', {}), h('col', { class: 'c-type' }), h('col', { class: 'c-size' }), h('col', { class: 'c-mode' }), h('col', { class: 'c-time' })),
        h('thead', {}, h('tr', {}, ['Name', 'Type', 'Size', 'Mode', 'Modified'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, rows)),
      rows.length ? '' : h('p', { class: 'muted' }, 'Empty directory.'),
      dir.truncated ? h('p', { class: 'warn' }, 'The listing was cut short: the directory holds more entries.') : '');
  };
  const form = h('form', { class: 'filters', onsubmit: (e) => { e.preventDefault(); open(pathIn.value.trim() || '.'); } },
    h('label', { for: 'files-path' }, 'Path'), pathIn, h('button', { type: 'submit', id: 'files-open' }, 'Open'));
  const box = h('div', {}, form, where, body);
  queueMicrotask(() => open('.'));
  return box;
}
