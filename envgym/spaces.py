"""Text spaces that accept what LLM environments really emit.

Gymnasium's :class:`gymnasium.spaces.Text` only contains strings made of its charset, which is
alphanumeric by default: a Sokoban board (``#``, ``@``, newlines) or a French goal string would
not be "in" the observation space. :class:`Text` here keeps Gymnasium's class (so
``isinstance(space, gymnasium.spaces.Text)`` and every Gymnasium utility keep working) but
contains any ``str`` within the length bounds. Sampling draws from a printable charset with
spaces and newlines, capped at ``sample_max_length`` so fuzzing stays fast.
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["MAX_TEXT_LENGTH", "SAMPLE_CHARSET", "Text"]

#: What :meth:`Text.sample` draws from: letters, digits, punctuation, space and newline.
SAMPLE_CHARSET = string.ascii_letters + string.digits + string.punctuation + " \n"
#: Upper bound used by envgym's text spaces: 1 MiB characters.
MAX_TEXT_LENGTH = 1 << 20


class Text(spaces.Text):
    """A text space containing any Python string whose length is within bounds.

    Args:
        max_length: longest string contained, in characters.
        min_length: shortest string contained (0 allows the empty string).
        sample_max_length: longest string :meth:`sample` returns.
        seed: seed of the sampling generator.
    """

    def __init__(
        self,
        max_length: int = MAX_TEXT_LENGTH,
        *,
        min_length: int = 0,
        sample_max_length: int = 64,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        super().__init__(max_length, min_length=min_length, charset=SAMPLE_CHARSET, seed=seed)
        self.sample_max_length = int(min(max(sample_max_length, min_length), max_length))

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        if mask is not None or probability is not None:
            return super().sample(mask=mask, probability=probability)
        length = int(self.np_random.integers(self.min_length, self.sample_max_length + 1))
        chars = self.np_random.choice(len(SAMPLE_CHARSET), size=length)
        return "".join(SAMPLE_CHARSET[i] for i in chars)

    def __repr__(self) -> str:
        return f"envgym.spaces.Text(min_length={self.min_length}, max_length={self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Text) and self.min_length == other.min_length and self.max_length == other.max_length

    __hash__ = spaces.Text.__hash__
