"""A virtual clock for pages: time moves only when the environment says so.

:data:`VIRTUAL_CLOCK_JS` runs before a page's own scripts (a context init script) and replaces
``Date``, ``performance.now``, ``setTimeout``/``setInterval`` (and their ``clear``),
``requestAnimationFrame`` and ``requestIdleCallback`` by versions driven by a virtual time that
starts at :data:`EPOCH_MS` and advances only through ``window.__envgymClock.advance(ms)``, which
runs the due callbacks in time order. A page then behaves the same whatever the machine's speed
or load: animations, countdowns and delayed widgets are functions of the actions taken, which
makes seeded episodes repeat exactly. ``__envgymClock.reset()`` puts the time back to the epoch
and drops every pending callback (a fast episode reset). ``frame()`` waits for one real
rendering frame, so that events Chromium dispatches with frames (scroll events, hover updates)
have run before the page is read; ``framePending()`` says whether such an event can be pending
at all, so that a reader waits for a frame only then (a frame is 16 ms of real time, more than the
rest of a step on a quiet page): when the page listens to an event Chromium dispatches with frames
(``scroll``, ``wheel``, ``resize``, CSS animation and transition events, ``selectionchange``) or
observes sizes or intersections (``ResizeObserver``, ``IntersectionObserver``), and when the
element under the pointer is no longer the one the last real mouse event went to (Chromium then
moves the hover, with its ``mouseover``/``mouseout`` events and ``:hover`` styles, at the next
frame). The init script also stops real-time sources the page does not
own: scroll restoration after a reload, native spin buttons' auto-repeat. ``imagesLoaded()`` waits for the
images the page added to load (they load in real time, and an image has no size before). CSS animations and transitions are not
JavaScript timers; pages are opened with ``reduced_motion="reduce"``.
"""

from __future__ import annotations

__all__ = ["EPOCH_MS", "VIRTUAL_CLOCK_JS"]

#: The virtual wall-clock time every document starts at: 2024-01-15 12:00:00 UTC (a Monday).
EPOCH_MS = 1_705_320_000_000

VIRTUAL_CLOCK_JS = """
(() => {
  if (window.__envgymClock) return;
  // A reloaded page must not get its old scroll offsets back a moment later (Chromium restores them
  // asynchronously): that would move elements under the agent between a read and an action.
  try { history.scrollRestoration = 'manual'; } catch (e) {}
  // Native spin buttons repeat on a real-time timer while the mouse is held on them: a press or a
  // drag there would change the value by however long it took. They are hidden (keys and fill()
  // still set numbers).
  document.addEventListener('DOMContentLoaded', () => {
    const style = document.createElement('style');
    style.textContent = 'input::-webkit-inner-spin-button, input::-webkit-outer-spin-button '
                        + '{ -webkit-appearance: none; margin: 0; }';
    (document.head || document.documentElement).appendChild(style);
  });
  const EPOCH = __EPOCH__;
  const RealDate = Date;
  const realTimeout = window.setTimeout.bind(window);
  const realFrame = window.requestAnimationFrame.bind(window);
  let now = EPOCH;
  let seq = 0;
  let nextId = 1;
  const timers = new Map();
  function FakeDate(...args) {
    if (!new.target) return new RealDate(now).toString();
    return args.length ? new RealDate(...args) : new RealDate(now);
  }
  FakeDate.prototype = RealDate.prototype;
  FakeDate.now = () => now;
  FakeDate.parse = RealDate.parse;
  FakeDate.UTC = RealDate.UTC;
  function add(fn, delay, args, every) {
    const id = nextId++;
    if (typeof fn === 'string') { const code = fn; fn = () => (0, eval)(code); }
    if (typeof fn !== 'function') return id;
    delay = Math.max(0, Number(delay) || 0);
    timers.set(id, {at: now + delay, seq: seq++, fn: fn, args: args,
                    every: every ? Math.max(1, delay) : 0});
    return id;
  }
  const clear = (id) => { timers.delete(id); };
  window.Date = FakeDate;
  window.setTimeout = (fn, delay, ...args) => add(fn, delay, args, false);
  window.setInterval = (fn, delay, ...args) => add(fn, delay, args, true);
  window.clearTimeout = clear;
  window.clearInterval = clear;
  window.requestAnimationFrame = (fn) => add(() => fn(now - EPOCH), 16, [], false);
  window.cancelAnimationFrame = clear;
  window.requestIdleCallback = (fn) => add(() => fn({didTimeout: false, timeRemaining: () => 50}), 1, [], false);
  window.cancelIdleCallback = clear;
  try { performance.now = () => now - EPOCH; } catch (e) {}
  // What the next rendering frame could change (framePending): listeners of the events Chromium
  // dispatches with frames, size/intersection observers, and the hover, which follows the element
  // under the pointer (tracked from the real mouse events, in the capture phase, before the page's).
  const FRAME_EVENTS = new Set(['scroll', 'scrollend', 'wheel', 'mousewheel', 'resize', 'selectionchange',
                                'transitionrun', 'transitionstart', 'transitionend', 'transitioncancel',
                                'animationstart', 'animationend', 'animationiteration', 'animationcancel']);
  const FRAME_HANDLERS = '[onscroll],[onwheel],[onmousewheel],[onresize],[ontransitionend],[onanimationend],'
                         + '[onanimationstart],[onanimationiteration],[onselectionchange]';
  let frameListeners = false;
  const realAdd = EventTarget.prototype.addEventListener;
  EventTarget.prototype.addEventListener = function (type, ...rest) {
    if (FRAME_EVENTS.has(String(type).toLowerCase())) frameListeners = true;
    return realAdd.call(this, type, ...rest);
  };
  for (const proto of [HTMLElement.prototype, SVGElement.prototype, Document.prototype, window]) {
    for (const type of FRAME_EVENTS) {
      const d = Object.getOwnPropertyDescriptor(proto, 'on' + type);
      if (!d || !d.set || !d.configurable) continue;
      Object.defineProperty(proto, 'on' + type, {
        configurable: true, enumerable: d.enumerable, get: d.get,
        set: function (v) { if (v) frameListeners = true; return d.set.call(this, v); },
      });
    }
  }
  for (const name of ['ResizeObserver', 'IntersectionObserver']) {
    const Real = window[name];
    if (typeof Real !== 'function') continue;
    window[name] = class extends Real { constructor(...args) { super(...args); frameListeners = true; } };
  }
  let pointer = null;  // {x, y, target} of the last real mouse event
  const track = (e) => {
    if (!e.isTrusted) return;
    pointer = {x: e.clientX, y: e.clientY, target: e.target};
    if (waiters.length) channel.port2.postMessage(0);
  };
  for (const type of ['mousemove', 'mouseover', 'mousedown', 'mouseup']) {
    realAdd.call(window, type, track, {capture: true, passive: true});
  }
  // Real mouse releases seen, and waiters for the end of the input task that dispatched an awaited
  // event (the n-th release: its pointerup, mouseup, click and the click's default actions run in
  // that task; or a move to a point): a script sent together with the input runs only after it
  // (afterUps, afterPointerAt), whichever of the two reaches the page first. A release is counted
  // by its pointerup: Chromium sends no mouseup (nor click) to a disabled form control, nor after a
  // pointerdown whose default the page prevented, but the pointerup always; a read waiting for a
  // mouseup there waited out its whole timeout.
  let ups = 0;
  const waiters = [];
  const channel = new MessageChannel();
  channel.port1.onmessage = () => {
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (waiters[i].ready()) { const w = waiters.splice(i, 1)[0]; w.resolve(true); }
    }
  };
  realAdd.call(window, 'pointerup', (e) => {
    if (e.isTrusted && e.pointerType === 'mouse') { ups++; channel.port2.postMessage(0); }
  }, {capture: true, passive: true});
  function after(ready, timeoutMs) {
    if (ready()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const w = {ready: ready, resolve: resolve};
      waiters.push(w);
      realTimeout(() => { const i = waiters.indexOf(w); if (i >= 0) { waiters.splice(i, 1); resolve(false); } },
                  timeoutMs);
    });
  }
  const afterUps = (n, timeoutMs) => after(() => ups >= n, timeoutMs);
  const afterPointerAt = (x, y, timeoutMs) => after(() => pointer !== null && pointer.x === x && pointer.y === y,
                                                    timeoutMs);
  // Images load in real time: an <img> the page adds (an icon in a list item) has no size until its
  // file is read, so a read taken before that would see a different layout (imagesLoaded).
  const loading = () => Array.from(document.images).filter((img) => !img.complete && img.loading !== 'lazy');
  function imagesLoaded(timeoutMs) {
    const pending = loading();
    if (!pending.length) return Promise.resolve(true);
    const left = new Set(pending);
    return new Promise((resolve) => {
      const done = (img) => { left.delete(img); if (!left.size) resolve(true); };
      for (const img of pending) {
        realAdd.call(img, 'load', () => done(img), {once: true});
        realAdd.call(img, 'error', () => done(img), {once: true});
      }
      realTimeout(() => resolve(loading().length === 0), timeoutMs);
    });
  }
  function framePending() {
    if (frameListeners || document.querySelector(FRAME_HANDLERS) !== null) return true;
    if (pointer === null) return false;  // no real pointer over this document yet: no hover to move
    return document.elementFromPoint(pointer.x, pointer.y) !== pointer.target;
  }
  function advance(ms) {
    const target = now + Math.max(0, Number(ms) || 0);
    let fired = 0;
    while (fired < 100000) {
      let best = null, bestId = 0;
      for (const [id, t] of timers) {
        if (t.at <= target && (best === null || t.at < best.at || (t.at === best.at && t.seq < best.seq))) {
          best = t; bestId = id;
        }
      }
      if (best === null) break;
      if (best.at > now) now = best.at;
      if (best.every) { best.at += best.every; best.seq = seq++; } else { timers.delete(bestId); }
      fired++;
      try { best.fn.apply(window, best.args); } catch (e) { console.error(e); }
    }
    now = target;
    return fired;
  }
  Object.defineProperty(window, '__envgymClock', {
    value: Object.freeze({
      now: () => now,
      pending: () => timers.size,
      advance: advance,
      // resolves after the browser's next real rendering frame: the events Chromium dispatches
      // with frames (scroll, resize, hover updates after layout) have then run
      frame: (n) => new Promise((resolve) => {
        let left = Math.max(1, n || 1);
        const tick = () => { if (--left <= 0) resolve(true); else realFrame(tick); };
        realFrame(tick);
      }),
      // whether a rendering frame could dispatch events or move the hover (see the module's doc)
      framePending: framePending,
      // how many real mouse releases (pointerups) this document has seen; a promise of the end of
      // the n-th one's task
      // (false when timeoutMs of real time pass first)
      ups: () => ups,
      afterUps: afterUps,
      // a promise of the end of the task of a real mouse event at (x, y) (false after timeoutMs)
      afterPointerAt: afterPointerAt,
      // a promise of every <img> of the document (but lazy ones) being loaded or failed (false when
      // timeoutMs of real time pass first)
      imagesLoaded: imagesLoaded,
      reset: () => { now = EPOCH; timers.clear(); seq = 0; },
    }),
    enumerable: false,
  });
})();
""".replace("__EPOCH__", str(EPOCH_MS))
