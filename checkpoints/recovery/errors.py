"""The errors of the recovery operations, as the API and the pages report them."""

from __future__ import annotations


class RecoveryConflict(Exception):
    """The task is not in a state this operation can start from (HTTP 409)."""


class RecoveryInvalid(ValueError):
    """Bad input: no reason, an unknown or corrupted checkpoint (HTTP 422)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
