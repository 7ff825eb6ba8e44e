"""The errors a review service raises; each carries the HTTP status the API answers with."""

from __future__ import annotations


class ReviewError(Exception):
    """A decision that cannot be made; `status` is the HTTP status the API answers with."""

    status = 400

    def __init__(
        self,
        message: str,
        *,
        errors: list[dict[str, str]] | None = None,
        reason: str = "",
        review_id: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors or []
        # A machine-readable cause (`target_changed`) and the review it points to.
        self.reason = reason
        self.review_id = review_id


class ReviewForbidden(ReviewError):
    status = 403


class ReviewConflict(ReviewError):
    status = 409


class ReviewInvalid(ReviewError):
    status = 422
