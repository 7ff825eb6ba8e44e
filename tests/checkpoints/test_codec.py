"""Checkpoint payloads: canonical, checksummed, verified on every load."""

from __future__ import annotations

import zlib

import pytest

from checkpoints.models import Checkpoint
from checkpoints.services import CheckpointCorrupted, checkpoint_build, checkpoint_decode
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
