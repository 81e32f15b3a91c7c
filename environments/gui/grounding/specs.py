"""The GUI grounding ids, part of the gui family's ``SPECS`` (data only:
string entry points, no env code imported)."""

from __future__ import annotations

from envgym.registration import EnvSpec

_ENTRY = "envgym.environments.gui.grounding.env:GUIGroundingEnv"
_BASE = "envgym/GUIGrounding-v0"

GROUNDING_SPECS: list[EnvSpec] = [
    EnvSpec(
        id=_BASE,
        entry_point=_ENTRY,
        family="gui",
        summary="GUI grounding on generated web forms in Chromium: screenshot + instruction -> click(x, y) or box",
        kwargs={"render_mode": "rgb_array"},
    ),
    EnvSpec(
        id="envgym/GUIGrounding-Text-v0",
        entry_point=_ENTRY,
        family="gui",
        summary="GUI grounding, text view for LLMs: instruction + element list with boxes -> click(x, y)",
        kwargs={"obs": "text", "render_mode": "rgb_array"},
        variant_of=_BASE,
    ),
    EnvSpec(
        id="envgym/GUIGrounding-MiniWoB-v0",
        entry_point=_ENTRY,
        family="gui",
        summary="GUI grounding on MiniWoB++ task pages (screenshot 320x420 + instruction -> click or box)",
        kwargs={"source": "miniwob", "render_mode": "rgb_array"},
        variant_of=_BASE,
    ),
    EnvSpec(
        id="envgym/GUIGrounding-MiniWoB-Text-v0",
        entry_point=_ENTRY,
        family="gui",
        summary="GUI grounding on MiniWoB++ task pages, text view for LLMs (element list with boxes)",
        kwargs={"source": "miniwob", "obs": "text", "render_mode": "rgb_array"},
        variant_of=_BASE,
    ),
]
