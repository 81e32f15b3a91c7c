"""GUI: MiniWoB++ web tasks in a real Chromium (and GUI grounding tasks), for LLM and vision agents.

Only specs live here (string entry points): registering the family imports no browser code.
``envgym/MiniWoB-<task>-v0`` is one task of the ``miniwob`` package (MIT, Farama) for every
task page it ships, loaded from its HTML files and driven through Playwright in Debian's Chromium
(needs ``pip install 'envgym[gui]'`` and ``/usr/bin/chromium``). The default observation is
text (``Task: <utterance>`` and an accessibility tree with element ids); ``obs="dict"`` gives
goal, tree, screenshot (and DOM). See :class:`envgym.environments.gui.miniwob.env.MiniWoBEnv`.

Not registered (see :data:`EXCLUDED`): the FlightWoB pages of the package (``html/flight/``:
real airline sites frozen in an iframe wrapper, served over HTTP, one of them following an
external link; they are not MiniWoB task pages and their observations depend on asynchronous
page loading).
"""

from __future__ import annotations

from envgym.environments.gui.grounding.specs import GROUNDING_SPECS
from envgym.environments.gui.miniwob.specs import EXCLUDED, MINIWOB_SPECS, MINIWOB_TASKS

from envgym.registration import EnvSpec

FAMILY = "gui"
#: The family contract's data (envgym.families): its suite, perf script and waivers.
CONTRACT = {"suite": "gui-v1", "perf": "benchmarks/perf/gui.py"}

#: Every id of the family: the MiniWoB++ task pages, then the grounding ids.
SPECS: list[EnvSpec] = [*MINIWOB_SPECS, *GROUNDING_SPECS]

__all__ = ["CONTRACT", "EXCLUDED", "FAMILY", "MINIWOB_TASKS", "SPECS"]
