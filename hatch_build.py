"""Build hook: ``environments/`` and ``agents/`` install as ``envgym.environments`` / ``envgym.agents``.

The checkout keeps them as top-level folders (the layout shows the architecture), but they import
under one name only. Wheels map them with hatchling's ``force-include`` (pyproject.toml). Editable
installs cannot: hatchling maps editable packages by top-level name only. For those this hook adds
a small import finder (``_envgym_subpackages.py``, started by ``_envgym_subpackages.pth``) that
resolves exactly the two package names to the checkout's folders; their submodules then load
through the packages' ``__path__`` as usual. Nothing else of the checkout lands on ``sys.path``.

Wheels also get the benchmark suites (``benchmarks/*.yaml``) as ``envgym/benchmarks/``; the
performance scripts under ``benchmarks/perf/`` stay out.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

#: package name -> folder of the checkout, relative to the project root
SUBPACKAGES = {"envgym.environments": "environments", "envgym.agents": "agents"}

FINDER = '''"""Editable install of envgym (written by the project's hatch_build.py): resolves
{names} to the checkout's top-level folders."""

import importlib.util
import sys

MAPPING = {mapping!r}


class EnvgymSubpackageFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        folder = MAPPING.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, folder + "/__init__.py", submodule_search_locations=[folder]
        )


if not any(getattr(f, "__name__", "") == "EnvgymSubpackageFinder" for f in sys.meta_path):
    sys.meta_path.append(EnvgymSubpackageFinder)
'''


class EnvgymBuildHook(BuildHookInterface):
    PLUGIN_NAME = "envgym-subpackages"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        if version != "editable":
            suites = os.path.join(self.root, "benchmarks")
            for name in sorted(os.listdir(suites)):
                if name.endswith(".yaml"):
                    build_data["force_include"][os.path.join(suites, name)] = f"envgym/benchmarks/{name}"
            return
        mapping = {name: os.path.join(self.root, folder) for name, folder in SUBPACKAGES.items()}
        tmp = tempfile.mkdtemp(prefix="envgym-editable-")
        finder = os.path.join(tmp, "_envgym_subpackages.py")
        with open(finder, "w", encoding="utf-8") as handle:
            handle.write(FINDER.format(names=" and ".join(SUBPACKAGES), mapping=mapping))
        pth = os.path.join(tmp, "_envgym_subpackages.pth")
        with open(pth, "w", encoding="utf-8") as handle:
            handle.write("import _envgym_subpackages\n")
        # This map replaces the config's force-include-editable, so it names envgym.pth again.
        build_data["force_include_editable"] = {
            finder: "_envgym_subpackages.py",
            pth: "_envgym_subpackages.pth",
            os.path.join(self.root, "envgym.pth"): "envgym.pth",
        }
