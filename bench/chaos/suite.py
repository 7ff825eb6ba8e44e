"""The chaos suite's driver: its stack, its operator and what it watches, in one object."""

from __future__ import annotations

from bench.chaos.observe import ChaosWatch
from bench.chaos.operator import ChaosOperator
from bench.chaos.stack import ChaosStack


class Chaos(ChaosWatch, ChaosOperator, ChaosStack):
    """The suite's stack and the operator who drives it."""
