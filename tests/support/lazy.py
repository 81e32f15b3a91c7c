"""Skip marks that do not import the library they are about.

Every xdist worker collects every test file, but a module whose tests share a module-scoped
fixture runs in one worker (tests/conftest.py): a library such as ``openenv`` or ``verifiers``
(8 s of CPU each to import, most of it gradio) imported at collection, by ``importorskip`` or a
module-level import, is paid by the workers that never run those tests. Such a module skips with
:func:`installed` and imports the library in a fixture or in its tests.
"""

from __future__ import annotations

import importlib.util


def installed(name: str) -> bool:
    """Whether the top-level package ``name`` can be imported (without importing it)."""
    return importlib.util.find_spec(name.partition(".")[0]) is not None
