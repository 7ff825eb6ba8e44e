"""LangGraph checkpointer: DjangoCheckpointSaver against PostgresSaver.

The same LangGraph workload through both savers, interleaved on the same PostgreSQL: per step,
`put` of a checkpoint whose `messages` channel holds 20 chat messages of ~500 characters (a new
channel version every step, so one blob row + one checkpoint row) and `put_writes` of the
step's tool message. Ours writes through Django's connection into the checkpoints app's tables;
PostgresSaver through its own autocommit psycopg connection (what `from_conn_string` opens)
into its tables in the reference schema.

Expected run time (quiet 2-CPU machine): smoke ~5 s; full ~30 s.
"""

from __future__ import annotations

from typing import Any

from bench.common import (
    figure,
    profile_top,
    reference_conninfo,
    reference_schema_reset,
    sample_interleaved,
    stats,
)
from bench.durable_write import SaverDriver, agent_state

TITLE = "LangGraph checkpointer: DjangoCheckpointSaver vs PostgresSaver"
TARGET = 1.2
SIZES = {
    "smoke": {"n": 3, "warmup": 1, "profile": 2},
    "full": {"n": 500, "warmup": 50, "profile": 300},
}


def run(size: str) -> dict[str, Any]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    from checkpoints.langgraph import DjangoCheckpointSaver

    params = SIZES[size]
    reference_schema_reset()
    conn = psycopg.connect(
        reference_conninfo(), autocommit=True, prepare_threshold=0, row_factory=dict_row
    )
    reference_saver = PostgresSaver(conn)
    reference_saver.setup()
    ours = SaverDriver(DjangoCheckpointSaver(), agent_state())
    theirs = SaverDriver(reference_saver, agent_state())
    try:
        # put_writes is timed against the checkpoint the previous put stored, as in a run.
        samples = sample_interleaved(
            {
                "ours_put": ours.put,
                "theirs_put": theirs.put,
                "ours_put_writes": ours.put_writes,
                "theirs_put_writes": theirs.put_writes,
            },
            n=params["n"],
            warmup=params["warmup"],
        )
        profile = profile_top(ours.step, repeat=params["profile"])
        stored = ours.saver.get_tuple(ours.config)
        assert stored is not None and stored.checkpoint["channel_values"]["messages"]
    finally:
        ours.saver.delete_thread(ours.config["configurable"]["thread_id"])
        ours.saver.close()
        conn.close()
        reference_schema_reset(drop_only=True)
    ms = {name: stats(values, scale=1000) for name, values in samples.items()}
    steps = {
        who: stats(
            [
                a + b
                for a, b in zip(samples[f"{who}_put"], samples[f"{who}_put_writes"], strict=True)
            ],
            scale=1000,
        )
        for who in ("ours", "theirs")
    }
    rows = [
        ("put", ms["ours_put"], ms["theirs_put"]),
        ("put_writes", ms["ours_put_writes"], ms["theirs_put_writes"]),
        ("put + put_writes (one step)", steps["ours"], steps["theirs"]),
    ]
    return {
        "title": TITLE,
        "figures": [
            figure(
                figure=f"LangGraph {label}",
                unit="ms",
                ours=mine,
                reference=reference,
                reference_label=f"PostgresSaver {label}",
                target=f"≤ {TARGET}× PostgresSaver",
                met=mine["median"] / reference["median"] <= TARGET,
            )
            for label, mine, reference in rows
        ],
        "profiles": {"ours: put + put_writes": profile},
        "notes": (
            "Same workload through both savers, interleaved round-robin on one PostgreSQL: "
            "`put` of a checkpoint whose `messages` channel (20 chat messages of ~500 "
            "characters) has a new version each step, then `put_writes` of the step's tool "
            "message against it. Ours = `checkpoints.langgraph.DjangoCheckpointSaver` on "
            "Django's connection; reference = `PostgresSaver` on an autocommit psycopg "
            "connection (pipeline mode), tables in the reference schema."
        ),
    }
