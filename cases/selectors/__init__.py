"""Reads of cases and replays: a task's recording (what a case keeps), the replay setup the
runtime's tool oracle loads, a replay's verdict against the case's criteria and the step-by-step
comparison of the recorded run with a replay (issue #31). One module per family, each importing
only the modules listed below it:

    compare    a replay's report beside its recording (case_run_report), two tasks side by
               side (tasks_compare), a task's family of forks (task_siblings)
    verdict    a replay's verdict against the case's criteria (replay_verdict)
    replay     what the runtime's tool oracle answers from (replay_setup)
    recording  a task's recording (task_recording), the files a replay starts from, why a
               task's kind of run cannot be saved (case_unsavable_reason)
    graph      a LangGraph task's calls, resumes and workspace snapshots (its recording)
    access     who may read a case or a replay; the lists of cases and of a case's replays

This package re-exports the public names, so `from cases.selectors import case_run_report`
keeps working; code inside the package imports the module that holds a name."""

from __future__ import annotations

from cases.selectors.access import access_case, access_case_run, case_runs, cases_list
from cases.selectors.compare import case_run_report, task_siblings, tasks_compare
from cases.selectors.recording import (
    CaseUnsavable,
    case_unsavable_reason,
    first_checkpoint_files,
    task_recording,
)
from cases.selectors.replay import ReplaySetup, replay_setup
from cases.selectors.verdict import replay_verdict

__all__ = [
    "CaseUnsavable",
    "ReplaySetup",
    "access_case",
    "access_case_run",
    "case_run_report",
    "case_unsavable_reason",
    "case_runs",
    "cases_list",
    "first_checkpoint_files",
    "replay_setup",
    "replay_verdict",
    "task_recording",
    "task_siblings",
    "tasks_compare",
]
