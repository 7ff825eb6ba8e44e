"""Review fixtures on top of the shared cast (tests/conftest.py; `second_operator` and
`decider` for four-eyes rules and `paused_review` live there)."""

from __future__ import annotations

import pytest

from review.models import ReviewRule
from tests.factories import ReviewRuleFactory


@pytest.fixture(autouse=True)
def _harness_settings(harness_dirs) -> None:
    pass


def four_eyes_on_deletes(*, forbid_creator: bool = True) -> ReviewRule:
    """`delete_file` calls need two approvals (by default never the task's creator's)."""
    return ReviewRuleFactory(
        name="two-person-delete",
        tool="delete_file",
        approvals_required=2,
        forbid_creator=forbid_creator,
    )
