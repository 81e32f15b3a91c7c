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
have run before the page is read. The init script also stops real-time sources the page does not
own: scroll restoration after a reload, native spin buttons' auto-repeat. CSS animations and transitions are not
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
      reset: () => { now = EPOCH; timers.clear(); seq = 0; },
    }),
    enumerable: false,
  });
})();
""".replace("__EPOCH__", str(EPOCH_MS))
