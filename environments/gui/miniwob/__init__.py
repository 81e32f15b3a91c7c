"""MiniWoB++ task pages in Chromium: :mod:`.env` (the env and its card), :mod:`.specs` (the ids)."""
