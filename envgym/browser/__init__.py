"""The browser layer of envgym: Debian's Chromium driven by Playwright, for web and GUI environments.

* :mod:`envgym.browser.pool`: one Chromium per worker (per thread: Playwright's sync API allows
  one driver per thread), shared by reference count, relaunched when it died, stopped by the
  last user, at exit, and by Playwright's driver when the process is killed;
* :class:`Tab`: an environment's own context and page on that browser, scripts in one DevTools
  round trip (a click and a script sent together), screenshots as ``uint8`` arrays;
* :data:`VIRTUAL_CLOCK_JS`: pages whose time moves only when the environment advances it
  (deterministic animations and timers, fast resets);
* :data:`AXTREE_JS`: accessibility-tree text with stable element ids;
* :func:`parse_action` and :class:`PageActor`: the text action grammar (``click(12)``,
  ``fill(7, "text")``, ``press("Enter")``, ``click_xy(40, 85)``, ...) parsed strictly and run.

Playwright is imported only when a browser is launched; a missing Playwright or Chromium raises
an error naming the install line (:func:`require_browser`). Playwright never downloads a browser.
"""

from __future__ import annotations

from envgym.browser.actions import (
    ACTION_HELP,
    Action,
    ActionError,
    ActionSyntaxError,
    PageActor,
    parse_action,
)
from envgym.browser.axtree import AXTREE_JS
from envgym.browser.clock import EPOCH_MS, VIRTUAL_CLOCK_JS
from envgym.browser.pool import (
    CHROMIUM,
    LAUNCH_ARGS,
    acquire_browser,
    live_browsers,
    release_browser,
    require_browser,
    shutdown_browsers,
)
from envgym.browser.tab import PageScriptError, Tab, png_to_array

__all__ = [
    "ACTION_HELP",
    "AXTREE_JS",
    "CHROMIUM",
    "EPOCH_MS",
    "LAUNCH_ARGS",
    "VIRTUAL_CLOCK_JS",
    "Action",
    "ActionError",
    "ActionSyntaxError",
    "PageActor",
    "PageScriptError",
    "Tab",
    "acquire_browser",
    "live_browsers",
    "parse_action",
    "png_to_array",
    "release_browser",
    "require_browser",
    "shutdown_browsers",
]
