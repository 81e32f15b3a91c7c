"""Accessibility-tree text of a page, with a stable id on every element an agent can act on.

:data:`AXTREE_JS` runs in every document (a context init script) and defines
``window.__envgymAX``: ``snapshot(options)`` walks the visible DOM under ``document.body`` and
returns the tree as text, one line a node, indented two spaces per depth::

    [3] checkbox "fuq", checked
    [5] button "Submit", focused
    StaticText "Last name"

Roles follow ARIA's implicit roles of HTML elements (``button``, ``link``, ``textbox``,
``checkbox``, ``radio``, ``combobox``/``listbox`` and their ``option`` lines, ``slider``,
``spinbutton``, ``heading``, ``list``/``listitem``, ``table``/``row``/``cell``/``columnheader``,
``img``, ``label``, ``paragraph``, ``form``, ``dialog``, ...), an explicit ``role`` attribute
wins, SVG shapes keep their tag (``circle``, ``rect``, ``polygon``, ``text``...) and other
elements are ``generic``. Names: ``aria-label``, ``aria-labelledby``, a form control's
``<label>``, ``placeholder``, ``alt``, ``title``, else the element's text when it holds only
text (or its role takes its name from its content: buttons, links, options, headings, cells,
tabs, menu items). Properties after the name, in this order: ``type="..."`` (an input that is
not a plain text field: ``password``, ``date``, ``time``, ``number``...), ``multiline`` (a
textarea), ``value="..."`` (text fields, sliders, the chosen option of a select; verbatim, up to
2,000 characters), ``checked``, ``selected``, ``focused``, ``disabled``, ``expanded``, and
``class="..."`` on ``generic`` and SVG nodes (tokens sorted). Names and values are JSON strings (``\"``,
``\\``, ``\n`` escapes).

A ``generic`` element gets a line when it holds only text (its name), has a click handler (an
``on...`` attribute or property, a d3 or jQuery listener), or is a
childless box (an icon, a coloured tile); any other one is a mere wrapper: no line, its children
move up. Text mixed with elements shows as
``StaticText`` lines (no id: click the element around it). Invisible elements (``display:
none``, ``visibility: hidden``, no box) are left out.

Ids are numbers assigned in document order the first time an element is seen and kept (in a
``WeakMap``, the page's DOM is not touched) until ``reset()``: an element keeps its id for the
whole episode and an id is never reused for another element. ``element(id)`` returns the
element, ``locate(id)`` scrolls it into view and returns its box. ``snapshot`` also returns
``rects`` (``[id, x, y, width, height]`` of every line with an id, viewport CSS pixels) and, with
``boxes: true``, ``nodes`` (id, role, name, depth, box).
"""

from __future__ import annotations

__all__ = ["AXTREE_JS"]

AXTREE_JS = r"""
(() => {
  if (window.__envgymAX) return;
  let ids = new WeakMap();
  let byId = new Map();
  let next = 1;
  const SKIP_TAGS = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'BR', 'TEMPLATE', 'HEAD', 'META', 'LINK', 'TITLE',
                             'DEFS', 'CLIPPATH', 'MASK', 'LINEARGRADIENT', 'RADIALGRADIENT', 'STOP', 'PATTERN']);
  const FROM_CONTENT = new Set(['button', 'link', 'option', 'heading', 'cell', 'columnheader', 'rowheader', 'tab',
                                'menuitem', 'menuitemcheckbox', 'menuitemradio', 'treeitem', 'tooltip', 'label',
                                'checkbox', 'radio', 'switch']);
  const TEXT_INPUTS = new Set(['text', 'email', 'password', 'search', 'tel', 'url', 'date', 'time',
                               'datetime-local', 'month', 'week', '']);
  const HANDLERS = ['click', 'mousedown', 'mouseup', 'dblclick'];
  const clean = (s) => (s || '').replace(/\s+/g, ' ').trim();
  const clip = (s, n) => s.length > n ? s.slice(0, n - 3) + '...' : s;

  function idOf(el) {
    let id = ids.get(el);
    if (id === undefined) { id = next++; ids.set(el, id); byId.set(id, el); }
    return id;
  }
  function roleOf(el) {
    const explicit = el.getAttribute('role');
    if (explicit && explicit.trim() && explicit.trim() !== 'presentation' && explicit.trim() !== 'none') {
      return explicit.trim().split(/\s+/)[0];
    }
    const tag = el.tagName.toLowerCase();
    if (el instanceof SVGElement) return tag === 'g' ? 'generic' : tag;
    switch (tag) {
      case 'a': return 'link';
      case 'button': return 'button';
      case 'input': {
        const t = (el.getAttribute('type') || '').toLowerCase();
        if (t === 'hidden') return null;
        if (['button', 'submit', 'reset', 'image'].includes(t)) return 'button';
        if (t === 'checkbox') return 'checkbox';
        if (t === 'radio') return 'radio';
        if (t === 'range') return 'slider';
        if (t === 'number') return 'spinbutton';
        if (t === 'color') return 'colorpicker';
        if (t === 'file') return 'button';
        return 'textbox';
      }
      case 'textarea': return 'textbox';
      case 'select': return (el.multiple || el.size > 1) ? 'listbox' : 'combobox';
      case 'option': return 'option';
      case 'h1': case 'h2': case 'h3': case 'h4': case 'h5': case 'h6': return 'heading';
      case 'img': return 'img';
      case 'canvas': return 'canvas';
      case 'ul': case 'ol': return 'list';
      case 'li': return 'listitem';
      case 'table': return 'table';
      case 'tr': return 'row';
      case 'td': return 'cell';
      case 'th': return 'columnheader';
      case 'label': return 'label';
      case 'form': return 'form';
      case 'p': return 'paragraph';
      case 'dialog': return 'dialog';
      case 'nav': return 'navigation';
      case 'hr': return 'separator';
      case 'textarea': return 'textbox';
      default: return 'generic';
    }
  }
  function hasHandler(el) {
    for (const h of HANDLERS) {
      if (el['on' + h] || el['__on' + h] || el.hasAttribute('on' + h)) return true;
    }
    const jq = window.jQuery || window.$;
    if (jq && jq._data) {
      try {
        const ev = jq._data(el, 'events');
        if (ev) for (const h of HANDLERS) if (ev[h]) return true;
      } catch (e) {}
    }
    return false;
  }
  function labelText(el) {
    if (el.labels && el.labels.length) {
      const parts = [];
      for (const label of el.labels) {
        let t = '';
        label.childNodes.forEach((n) => {
          if (n !== el && !(n.contains && n.contains(el))) t += ' ' + (n.textContent || '');
        });
        parts.push(clean(t));
      }
      return clean(parts.join(' '));
    }
    return '';
  }
  function nameOf(el, role, textOnly) {
    // [name, whether it is the element's own text]
    let n = clean(el.getAttribute('aria-label'));
    if (n) return [n, false];
    const by = el.getAttribute('aria-labelledby');
    if (by) {
      n = clean(by.split(/\s+/).map((i) => { const e = document.getElementById(i); return e ? e.textContent : ''; }).join(' '));
      if (n) return [n, false];
    }
    const tag = el.tagName;
    if (tag === 'INPUT' || tag === 'TEXTAREA' || tag === 'SELECT') {
      const t = (el.getAttribute('type') || '').toLowerCase();
      if (tag === 'INPUT' && ['button', 'submit', 'reset'].includes(t)) return [clean(el.value) || t, false];
      return [labelText(el) || clean(el.getAttribute('placeholder')) || clean(el.getAttribute('title')), false];
    }
    if (tag === 'IMG') return [clean(el.getAttribute('alt')) || clean(el.getAttribute('title')), false];
    if (textOnly || FROM_CONTENT.has(role)) {
      n = clean(el.textContent);
      if (n) return [n, true];
    }
    return [clean(el.getAttribute('title')), false];
  }
  function visible(el) {
    return styleIfVisible(el) !== null;
  }
  function styleIfVisible(el) {
    if (!el.getClientRects().length) return null;
    const style = getComputedStyle(el);
    return style.visibility !== 'hidden' && style.visibility !== 'collapse' ? style : null;
  }
  function props(el, role, maxValue) {
    const out = [];
    const tag = el.tagName;
    if (tag === 'INPUT') {
      const t = String(el.type || 'text').toLowerCase();  // the browser's reading: unknown types are text
      if (t !== 'text' && !['checkbox', 'radio', 'button', 'submit', 'reset'].includes(t)) out.push('type=' + JSON.stringify(t));
    } else if (tag === 'TEXTAREA') {
      out.push('multiline');
    }
    if (role === 'textbox' || role === 'spinbutton' || role === 'slider' || role === 'searchbox' || role === 'colorpicker') {
      if (tag === 'INPUT' || tag === 'TEXTAREA') {
        out.push('value=' + JSON.stringify(clip(String(el.value), maxValue)));
      } else if (el.isContentEditable) {
        out.push('value=' + JSON.stringify(clip(clean(el.textContent), 200)));
      }
    } else if (tag === 'SELECT' && !el.multiple) {
      const o = el.options[el.selectedIndex];
      out.push('value=' + JSON.stringify(o ? clean(o.textContent) : ''));
    }
    if ((tag === 'INPUT' && el.checked) || el.getAttribute('aria-checked') === 'true') out.push('checked');
    if ((tag === 'OPTION' && el.selected) || el.getAttribute('aria-selected') === 'true') out.push('selected');
    const disabled = el.disabled || el.getAttribute('aria-disabled') === 'true';
    // Chromium blurs a focused element that becomes disabled asynchronously: a disabled element is
    // never reported focused, so the tree does not depend on when that blur lands.
    if (document.activeElement === el && el !== document.body && !disabled) out.push('focused');
    if (disabled) out.push('disabled');
    if (el.getAttribute('aria-expanded') === 'true' || (tag === 'DETAILS' && el.open)) out.push('expanded');
    if (role === 'generic' || el instanceof SVGElement) {
      // tokens sorted: their order means nothing (widgets re-initialised on a reused page add them
      // in another order)
      const cls = clean(typeof el.className === 'string' ? el.className : el.getAttribute('class'))
                  .split(' ').filter((c) => c).sort().join(' ');
      if (cls) out.push('class=' + JSON.stringify(clip(cls, 80)));
    }
    return out;
  }

  function snapshot(opts) {
    opts = opts || {};
    const skip = new Set(opts.skipIds || []);
    const maxName = opts.maxName || 200;
    const maxValue = opts.maxValue || 2000;
    const lines = [];
    const nodes = opts.boxes ? [] : null;
    const rects = [];
    const pad = (d) => '  '.repeat(d);
    function emit(el, role, name, depth) {
      const id = idOf(el);
      let line = pad(depth) + '[' + id + '] ' + role;
      if (name) line += ' ' + JSON.stringify(clip(name, maxName));
      const p = props(el, role, maxValue);
      if (p.length) line += ', ' + p.join(', ');
      lines.push(line);
      const r = el.getBoundingClientRect();
      rects.push([id, r.left, r.top, r.width, r.height]);
      if (nodes) nodes.push({id: id, role: role, name: name, depth: depth, box: [r.left, r.top, r.width, r.height]});
    }
    function text(node, depth) {
      const t = clean(node.data);
      if (t) lines.push(pad(depth) + 'StaticText ' + JSON.stringify(clip(t, maxName)));
    }
    function walk(el, depth, inName) {
      if (SKIP_TAGS.has(el.tagName.toUpperCase()) || (el.id && skip.has(el.id))) return;
      const role = roleOf(el);
      if (role === null) return;
      const style = styleIfVisible(el);
      if (style === null) return;
      if (el.tagName === 'TEXTAREA') {  // its text is its value
        emit(el, role, nameOf(el, role, false)[0], depth);
        return;
      }
      if (el.tagName === 'SELECT') {
        emit(el, role, nameOf(el, role, false)[0], depth);
        for (const o of el.options) emit(o, 'option', clean(o.textContent), depth + 1);
        return;
      }
      let textOnly = true, hasText = false;
      el.childNodes.forEach((c) => {
        if (c.nodeType === 1) { if (!SKIP_TAGS.has(c.tagName.toUpperCase())) textOnly = false; }
        else if (c.nodeType === 3 && /\S/.test(c.data)) hasText = true;
      });
      // (cursor: pointer is not taken as a sign of a handler: it is often a :hover style, which
      // would make the tree depend on where the pointer rests)
      const handler = hasHandler(el);
      const interactive = role !== 'generic' || handler;
      if (inName && !interactive && !(textOnly && hasText)) {  // a wrapper inside a named element
        for (const c of el.children) walk(c, depth, true);
        return;
      }
      let leafBox = el.children.length === 0;
      if (leafBox && role === 'generic' && !handler && !hasText) {  // an empty box is shown only if it has an area
        const r = el.getBoundingClientRect();
        leafBox = r.width > 0 && r.height > 0;
        if (!leafBox) return;
      }
      if (role === 'generic' && !handler && !(textOnly && hasText) && !leafBox) {
        // a wrapper: no line, children move up; its own loose text becomes StaticText lines
        el.childNodes.forEach((c) => {
          if (c.nodeType === 1) walk(c, depth, false);
          else if (c.nodeType === 3) text(c, depth);
        });
        return;
      }
      const [name, named] = nameOf(el, role, textOnly);
      emit(el, role, name, depth);
      el.childNodes.forEach((c) => {
        if (c.nodeType === 1) walk(c, depth + 1, named);
        else if (c.nodeType === 3 && !named) text(c, depth + 1);  // text not already in the name
      });
    }
    const root = opts.rootId ? document.getElementById(opts.rootId) : document.body;
    if (root) for (const c of root.children) walk(c, 0, false);
    return {text: lines.join('\n'), nodes: nodes, rects: rects};
  }

  function locate(id, need) {
    // The element's box, after scrolling it into view; nothing moves when it cannot be acted on
    // (hidden, or not a text field when ``need`` is 'editable').
    const el = byId.get(id);
    if (!el || !el.isConnected) return null;
    const tag = el.tagName.toUpperCase();
    const type = (el.getAttribute('type') || '').toLowerCase();
    const editable = (tag === 'INPUT' && (TEXT_INPUTS.has(type) || ['number', 'range', 'color'].includes(type)))
                     || tag === 'TEXTAREA' || !!el.isContentEditable;
    // an option of a closed <select> has no box of its own: it is shown when its list is
    const box = tag === 'OPTION' && el.closest('select') ? el.closest('select') : el;
    let r = box.getBoundingClientRect();
    const shown = visible(box) && r.width > 0 && r.height > 0;
    const out = {tag: tag, type: type, visible: shown, editable: editable, disabled: !!el.disabled};
    if (!shown || (need === 'editable' && (!editable || el.disabled))) return out;
    if (box.scrollIntoViewIfNeeded) box.scrollIntoViewIfNeeded(); else if (box.scrollIntoView) box.scrollIntoView();
    r = box.getBoundingClientRect();
    out.x = r.left; out.y = r.top; out.w = r.width; out.h = r.height;
    return out;
  }

  Object.defineProperty(window, '__envgymAX', {
    value: Object.freeze({
      snapshot: snapshot,
      element: (id) => byId.get(id) || null,
      locate: locate,
      reset: () => { ids = new WeakMap(); byId = new Map(); next = 1; },
    }),
    enumerable: false,
  });
})();
"""
