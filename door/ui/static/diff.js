// diff.js: a unified diff (git format-patch output) shown with file
// headers, hunk headers, additions and deletions marked.
import { h } from './dom.js';

export function renderDiff(text) {
  const out = h('div', { class: 'diff', role: 'region', 'aria-label': 'Patch', tabindex: '0' });
  let files = 0, add = 0, del = 0;
  for (const line of text.split('\n')) {
    let cls = 'ctx';
    if (line.startsWith('diff --git')) { cls = 'file'; files++; }
    else if (line.startsWith('+++') || line.startsWith('---') || line.startsWith('index ') || line.startsWith('new file') || line.startsWith('deleted file')) cls = 'meta';
    else if (line.startsWith('@@')) cls = 'hunk';
    else if (line.startsWith('+')) { cls = 'add'; add++; }
    else if (line.startsWith('-')) { cls = 'del'; del++; }
    out.append(h('div', { class: 'dl ' + cls }, line || '\u200b'));
  }
  const summary = h('p', { class: 'muted' }, `${files} file${files === 1 ? '' : 's'} changed, ${add} insertion${add === 1 ? '' : 's'}(+), ${del} deletion${del === 1 ? '' : 's'}(-)`);
  return h('div', {}, summary, out);
}
