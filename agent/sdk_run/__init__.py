"""The base every foreign runner shares (agent.graph_runner, agent.openai_agents_runner,
agent.pydantic_ai_runner), from the bottom: `base` (RunBase: the lease's job, the code
loaded, clocks, events, usage, the checks between steps; harness_cause), `ending` (ForeignRun:
the stop and error ladder, the last transitions), `state` (SdkRun: the SDK runners'
AgentState, head checkpoint and ledger), and beside them `drift` (drift at pick-up),
`rechecks` (approvals checked again), `inline` (the SDK's event loop in the job's thread, the
bookkeeping called from it with no thread hop), `workspace` (the checkpoints' snapshots, from
the workspace's watch), `unknown` (a call its worker died in: the native unknown-outcome
review, its answer the tool's output). Each runner keeps only its SDK's translation."""

from __future__ import annotations

from agent.sdk_run.base import HARNESS_EXCEPTIONS, harness_cause
from agent.sdk_run.ending import ForeignRun
from agent.sdk_run.state import SdkRun

__all__ = ["HARNESS_EXCEPTIONS", "ForeignRun", "SdkRun", "harness_cause"]
