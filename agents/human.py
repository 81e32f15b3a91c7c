"""A person plays in the terminal: the observation is shown, one line typed per turn is the action.

Commands typed instead of an action: ``:help`` lists the admissible actions and the commands and
asks again; ``:quit`` (or end of input, Ctrl-D) stops with :class:`HumanQuit`. A blank line asks
again. Writing to the output stream is this agent's whole user interface, so it writes there
directly rather than logging.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import IO

from envgym.errors import StopRun
from envgym.rollout import Agent, AgentInput, AgentOutput

__all__ = ["HumanAgent", "HumanQuit"]

#: Admissible action lists at most this long are shown every turn; longer ones on ``:help``.
SHORT_ACTION_LIST = 12

_HELP = "Commands: ':help' shows this and the admissible actions, ':quit' stops (so does Ctrl-D)."


class HumanQuit(StopRun):
    """The person at the terminal asked to stop (``:quit``) or closed the input (end of file).

    Runners and the CLI should end the run cleanly on it, not record an agent error and retry.
    """


class HumanAgent(Agent):
    """Reads each action from ``input_stream`` after writing the observation to ``output_stream``.

    A batch is played one input at a time, in order; when it holds more than one episode each
    prompt is labelled with its episode id.

    Args:
        input_stream: where typed lines come from (``sys.stdin`` by default).
        output_stream: where observations and prompts go (``sys.stdout`` by default).
        show_actions_up_to: show the admissible actions each turn when there are at most this many.
    """

    name = "human"
    chat = False

    def __init__(
        self,
        input_stream: IO[str] | None = None,
        output_stream: IO[str] | None = None,
        *,
        show_actions_up_to: int = SHORT_ACTION_LIST,
    ) -> None:
        # Resolved at call time rather than as defaults, so pytest's capture (which swaps sys.stdin
        # and sys.stdout) and redirections made after import are honoured.
        self._in = input_stream
        self._out = output_stream
        self.show_actions_up_to = show_actions_up_to

    @property
    def input_stream(self) -> IO[str]:
        return self._in if self._in is not None else sys.stdin

    @property
    def output_stream(self) -> IO[str]:
        return self._out if self._out is not None else sys.stdout

    def _write(self, text: str) -> None:
        self.output_stream.write(text)
        self.output_stream.flush()

    def act(self, batch: Sequence[AgentInput]) -> list[AgentOutput]:
        """Ask for one action per input, in order.

        Raises:
            HumanQuit: ``:quit`` was typed or the input ended.
        """
        return [AgentOutput(self._ask(item, label=len(batch) > 1)) for item in batch]

    def _ask(self, item: AgentInput, *, label: bool) -> str:
        actions = [str(a) for a in (item.info.get("admissible_actions") or [])]
        header = f"--- turn {item.turn + 1}" + (f" · episode {item.episode_id}" if label else "") + " ---"
        self._write(f"\n{header}\n{item.observation.rstrip()}\n")
        if actions and len(actions) <= self.show_actions_up_to:
            self._write(f"Actions: {', '.join(actions)}\n")
        prompt = f"[{item.episode_id}] > " if label else "> "
        while True:
            self._write(prompt)
            line = self.input_stream.readline()
            if line == "":  # end of input: nobody is left to play
                self._write("\n")
                raise HumanQuit(
                    f"the input ended while waiting for an action in episode {item.episode_id!r}; "
                    "type an action per turn, or ':quit' to stop."
                )
            text = line.strip()
            if text.lower() == ":quit":
                raise HumanQuit(f"the player typed ':quit' in episode {item.episode_id!r}.")
            if text.lower() == ":help":
                if actions:
                    self._write(f"Admissible actions ({len(actions)}): {', '.join(actions)}\n")
                else:
                    self._write("This environment takes free text; see the observation for the expected form.\n")
                self._write(_HELP + "\n")
                continue
            if not text:
                self._write("Type an action (':help' for the choices, ':quit' to stop).\n")
                continue
            return text
