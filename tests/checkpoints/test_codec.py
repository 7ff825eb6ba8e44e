"""Checkpoint payloads: canonical, checksummed, verified on every load."""

from __future__ import annotations

import hashlib
import zlib

import pytest

from checkpoints import payload
from checkpoints.blobstore import blob_store
from checkpoints.models import Blob, Checkpoint
from checkpoints.payload import CheckpointCodec, checkpoint_base_key
from checkpoints.services import (
    CheckpointCorrupted,
    checkpoint_build,
    checkpoint_decode,
)
from tasks.agent_state import AgentState, Message


def _state() -> AgentState:
    return AgentState(
        messages=[Message(role="user", content="pay 120.50 EUR by 2026-12-01")],
        turn_index=3,
        step_index=2,
    )


def test_roundtrip_preserves_state_and_verifies():
    cp = checkpoint_build(task_id=None, seq=1, state=_state(), level="step", trigger="after_step")
    loaded = checkpoint_decode(cp)
    assert loaded.state == _state()
    assert cp.step_index == 2


def test_same_state_gives_same_checksum():
    a = checkpoint_build(task_id=None, seq=1, state=_state(), level="step", trigger="after_step")
    b = checkpoint_build(task_id=None, seq=2, state=_state(), level="tool", trigger="before_tool")
    assert a.checksum == b.checksum


def test_altered_payload_is_detected():
    cp = checkpoint_build(task_id=None, seq=1, state=_state(), level="step", trigger="after_step")
    raw = zlib.decompress(cp.payload).replace(b"120.50", b"999.99")
    cp.payload = zlib.compress(raw)
    with pytest.raises(CheckpointCorrupted, match="checksum mismatch"):
        checkpoint_decode(cp)


def test_unreadable_payload_is_detected():
    cp = Checkpoint(seq=1, payload=b"garbage", checksum="0" * 64)
    with pytest.raises(CheckpointCorrupted, match="unreadable"):
        checkpoint_decode(cp)


# --- payloads compressed against a base (CheckpointCodec) -------------------------------------


def _conversation(turns: int) -> AgentState:
    messages = [Message(role="user", content="write the release notes")]
    for turn in range(turns):
        # Hex digits: text that compresses about as little as a model's prose does against
        # everything but an earlier checkpoint holding it.
        text = "".join(hashlib.sha256(f"{turn}.{i}".encode()).hexdigest() for i in range(8))
        messages.append(Message(role="assistant", content=text))
    return AgentState(messages=messages, turn_index=turns, step_index=turns)


def _store_bases(codec: CheckpointCodec) -> None:
    blob_store().put_many(codec.take_bases())


@pytest.mark.django_db
def test_a_runs_checkpoints_compressed_against_a_base_decode_and_store_a_fraction():
    codec = CheckpointCodec()
    built = []
    for turn in range(1, 8):
        cp = checkpoint_build(
            task_id=None,
            seq=turn,
            state=_conversation(turn),
            level="step",
            trigger="after_step",
            codec=codec,
        )
        _store_bases(codec)
        built.append(cp)
    plain = checkpoint_build(
        task_id=None, seq=9, state=_conversation(7), level="step", trigger="after_step"
    )
    assert checkpoint_base_key(built[-1].payload) is not None
    assert len(built[-1].payload) * 3 < len(plain.payload)
    payload._bases.clear()  # read back from the blob store, as another process would
    for turn, cp in enumerate(built, start=1):
        assert checkpoint_decode(cp).state == _conversation(turn)


@pytest.mark.django_db
def test_checkpoints_written_before_bases_still_load_next_to_new_ones():
    """The stored format is additive: a plain zlib payload (every checkpoint written before
    bases) decodes as it did, and a checkpoint against a base says which blob it needs."""
    old = Checkpoint(seq=1, payload=zlib.compress(b'{"snapshot":null,"state":{}}'))
    old.checksum = hashlib.sha256(b'{"snapshot":null,"state":{}}').hexdigest()
    assert checkpoint_base_key(old.payload) is None
    assert checkpoint_decode(old).state == AgentState()
    codec = CheckpointCodec()
    new = checkpoint_build(
        task_id=None, seq=2, state=_state(), level="step", trigger="after_step", codec=codec
    )
    (key,) = codec.take_bases()
    assert checkpoint_base_key(new.payload) == key


@pytest.mark.django_db
def test_a_checkpoint_whose_base_is_missing_or_altered_is_corrupted_never_loaded_wrong():
    codec = CheckpointCodec()
    cp = checkpoint_build(
        task_id=None, seq=1, state=_state(), level="step", trigger="after_step", codec=codec
    )
    ((key, raw),) = codec.take_bases().items()
    payload._bases.clear()
    with pytest.raises(CheckpointCorrupted, match="unreadable"):
        checkpoint_decode(cp)  # not stored
    # Stored bytes that are not the base's: the blob store refuses them, never inflates.
    Blob.objects.create(sha256=key, size=len(raw), data=zlib.compress(raw.replace(b"120", b"999")))
    with pytest.raises(CheckpointCorrupted, match="unreadable"):
        checkpoint_decode(cp)
    Blob.objects.filter(sha256=key).update(data=zlib.compress(raw))
    assert checkpoint_decode(cp).state == _state()
