"""GUI grounding: :mod:`.env` (the env and its card), :mod:`.forms` (generated web forms),
:mod:`.miniwob` (MiniWoB++ pages as scenes), :mod:`.render` (the browser page) and :mod:`.specs` (the ids)."""
