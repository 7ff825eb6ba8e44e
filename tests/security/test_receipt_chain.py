"""Attacks on the decision receipts (review.receipts): someone with write access to the
database edits, deletes or reorders receipts to change the record of who approved what.
`manage.py verify_receipts` exits non-zero naming the first receipt that
does not verify; concurrent decisions never fork or break the chain."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from review.models import DecisionReceipt, ReceiptChainHead
from review.receipts import receipt_document
from tasks.canonical import canonical_hash
from tests.conftest import approve, manage_py, run_in_threads
from tests.factories import ReviewRequestFactory, TaskFactory, ToolCallFactory, scripted_spec

pytestmark = pytest.mark.django_db(transaction=True)


def pending_review(operator):
    task = TaskFactory(
        spec=scripted_spec([], ["write_file"]), status="waiting_review", created_by=operator
    )
    call = ToolCallFactory(
        task=task,
        tool="write_file",
        arguments={"path": "a.conf", "content": "x"},
        risk="write",
        status="awaiting_review",
    )
    return ReviewRequestFactory(tool_call=call)


@pytest.fixture
def chain(operator) -> list[DecisionReceipt]:
    """Four approvals: receipts 1..4."""
    for _ in range(4):
        approve(pending_review(operator), operator)
    return list(DecisionReceipt.objects.order_by("seq"))


def assert_fails_naming(seq: int) -> str:
    """verify_receipts in this process (the command; the exit code is checked below)."""
    with pytest.raises(CommandError) as failed:
        call_command("verify_receipts", stdout=StringIO())
    assert str(failed.value).startswith(f"receipt {seq}:"), failed.value
    return str(failed.value)


def test_verify_receipts_exits_0_on_an_intact_chain_else_names_the_receipt(chain):
    code, stdout, stderr = manage_py("verify_receipts")
    assert code == 0, stderr
    assert "4 receipts verified" in stdout
    DecisionReceipt.objects.filter(seq=3).update(decision="reject")
    code, stdout, stderr = manage_py("verify_receipts")
    assert code == 1
    assert "receipt 3: its content does not match its hash" in stderr


def test_an_edited_approver_is_detected(chain, second_operator):
    DecisionReceipt.objects.filter(seq=2).update(
        actor=second_operator.username, actor_user_id=second_operator.pk
    )
    assert "content does not match its hash" in assert_fails_naming(2)


def test_an_edited_decision_inside_the_subject_is_detected(chain):
    forged = {**chain[2].subject, "arguments_hash": canonical_hash({"path": "evil.conf"})}
    DecisionReceipt.objects.filter(seq=3).update(subject=forged)
    assert_fails_naming(3)


def test_an_edit_with_a_recomputed_hash_breaks_the_next_link(chain):
    receipt = DecisionReceipt.objects.get(seq=2)
    receipt.decision = "reject"
    document = receipt_document(receipt)
    del document["hash"]
    DecisionReceipt.objects.filter(seq=2).update(decision="reject", hash=canonical_hash(document))
    assert "prev_hash does not match receipt 2" in assert_fails_naming(3)


def test_a_deleted_receipt_is_detected(chain):
    DecisionReceipt.objects.filter(seq=2).delete()
    assert "missing" in assert_fails_naming(2)


def test_a_deleted_newest_receipt_is_detected(chain):
    DecisionReceipt.objects.filter(seq=4).delete()
    assert "head says 4" in assert_fails_naming(4)


def test_a_deleted_oldest_receipt_is_detected(chain):
    DecisionReceipt.objects.filter(seq=1).delete()
    assert_fails_naming(1)


def test_swapped_receipts_are_detected(chain):
    # Reorder two receipts by swapping their sequence numbers (through a free value: seq is
    # unique).
    with connection.cursor() as cursor:
        table = DecisionReceipt._meta.db_table
        cursor.execute(f"UPDATE {table} SET seq = 1000 WHERE seq = 2")  # noqa: S608
        cursor.execute(f"UPDATE {table} SET seq = 2 WHERE seq = 3")  # noqa: S608
        cursor.execute(f"UPDATE {table} SET seq = 3 WHERE seq = 1000")  # noqa: S608
    assert_fails_naming(2)


def test_a_renumbered_chain_is_detected(chain):
    # Renumber receipts 3 and 4 down and cut the head back, as if receipt 2 never existed.
    DecisionReceipt.objects.filter(seq=2).delete()
    for seq in (3, 4):
        DecisionReceipt.objects.filter(seq=seq).update(seq=seq - 1)
    ReceiptChainHead.objects.update(seq=3)
    assert_fails_naming(2)


def test_concurrent_decisions_keep_the_chain_intact(operator):
    reviews = [pending_review(operator) for _ in range(6)]
    decided = []

    def decide(review):
        def run() -> None:
            approve(review, operator)
            decided.append(review.id)

        return run

    run_in_threads(*(decide(review) for review in reviews))
    assert sorted(decided) == sorted(r.id for r in reviews)
    assert list(DecisionReceipt.objects.order_by("seq").values_list("seq", flat=True)) == [
        1,
        2,
        3,
        4,
        5,
        6,
    ]
    call_command("verify_receipts", stdout=StringIO())
