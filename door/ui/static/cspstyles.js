// cspstyles.js: makes xterm.js's own styles apply under the dashboard's
// Content-Security-Policy. xterm.js's DOM renderer writes its colours,
// font and cell sizes into <style> elements it creates inside the
// terminal; the policy (style-src 'self', no 'unsafe-inline') rightly
// refuses to apply those (the browser logs a violation for each). A
// constructed stylesheet is not markup and the policy permits it, so
// each such element's text is mirrored into one (adopted by the
// document) and kept current while the terminal lives. Only <style>
// elements under the terminal's own element are mirrored: the terminal's
// output is written as text, never as markup, so a program in the
// sandbox cannot add one.

// adoptStyles mirrors the <style> elements under root until the returned
// function is called, which drops the mirrored sheets.
export function adoptStyles(root) {
  const sheets = new Map(); // style element -> { sheet, text }
  const sync = () => {
    for (const el of root.querySelectorAll('style')) {
      let m = sheets.get(el);
      if (!m) {
        m = { sheet: new CSSStyleSheet(), text: null };
        sheets.set(el, m);
        document.adoptedStyleSheets = [...document.adoptedStyleSheets, m.sheet];
      }
      if (m.text !== el.textContent) {
        m.text = el.textContent;
        m.sheet.replaceSync(m.text);
      }
    }
  };
  const isStyle = (n) => n && n.nodeName === 'STYLE';
  const touchesStyle = (r) => isStyle(r.target) || isStyle(r.target.parentNode) || [...r.addedNodes].some(isStyle);
  const observer = new MutationObserver((records) => { if (records.some(touchesStyle)) sync(); });
  observer.observe(root, { childList: true, subtree: true, characterData: true });
  sync();
  return () => {
    observer.disconnect();
    const mine = new Set([...sheets.values()].map((m) => m.sheet));
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => !mine.has(s));
  };
}
