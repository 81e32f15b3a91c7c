"""Games: Sokoban, FrozenLake, Wordle, Minesweeper, Countdown, TicTacToe, ConnectFour.

Only specs live here (string entry points): registering the family imports no game code.
"""

from envgym.registration import EnvSpec

SPECS: list[EnvSpec] = []
