"""The chaos suite (`./harness chaos`, `python -m bench chaos`): faults injected into real
processes, and what the harness's promises look like afterwards.

Everything runs on a stack of its own, so that faults which restart a service never touch the
system's: a private PostgreSQL (initdb in a temporary directory, its own port), a private Redis,
`rqworker` processes and `manage.py harness_sweep --loop`, all on fast clocks. Tasks are
scripted (the test tools, HARNESS_ENABLE_TEST_TOOLS=1): their side effects go through
`ledger_append`, which records every execution outside the workspaces, so effects executed
twice can be counted. Tasks are created and reviews decided over the REST API (Django's test
client against the real views); an operator answers the reviews a lost outcome opens by looking
at the ledger, as a person would look at the external system.

Each fault states its bound on recovery (the time from the fault to the task making progress
again: a new lease, a new checkpoint, a pause for a person, or the effect the approval was
for). The invariants, over every fault: no effect executed twice, no approval lost, asked twice
or consumed without a run, no task lost (every task ends `succeeded`), every recovery within
its bound. The table goes to bench/chaos.md; the exit status is non-zero when an invariant
or a bound is broken.

`--short` runs a few injections of each fault (CI: tests/durable/test_chaos_short.py).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.chaos.catalog import FAULTS
from bench.chaos.clocks import CHAOS_MD, ChaosError, say
from bench.chaos.figures import INVARIANTS, fault_run, summary_row, violations
from bench.chaos.report import git_state, render
from bench.chaos.results import Fault, FaultResult, hosts_unavailable
from bench.chaos.suite import Chaos


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="harness chaos",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--short", action="store_true", help="a few of each fault (CI)")
    parser.add_argument("--only", action="append", metavar="FAULT", help="run only this fault")
    parser.add_argument("--workers", type=int, default=8, help="local rqworkers (default 8)")
    parser.add_argument(
        "--output",
        type=Path,
        default=None,
        help="where the table goes (default bench/chaos.md; with --short or --only: nowhere, "
        "so a partial run never replaces the committed table)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the run's directory and logs")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = parser.parse_args(argv)
    faults = [f for f in FAULTS if not args.only or f.name in args.only]
    if args.only and len(faults) != len(set(args.only)):
        known = ", ".join(f.name for f in FAULTS)
        print(f"error: unknown fault in {args.only}; known: {known}", file=sys.stderr)
        return 2
    commit, dirty = git_state()
    meta = {
        "short": args.short,
        "commit": commit,
        "dirty": dirty,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "load": round(os.getloadavg()[0], 2),
    }
    started = time.monotonic()
    results: list[FaultResult] = []
    tmp = tempfile.mkdtemp(prefix="harness-chaos-")
    os.chmod(tmp, 0o755)  # the private PostgreSQL runs as the postgres user
    try:
        chaos = Chaos(root=Path(tmp))
        chaos.pool_size = args.workers
        try:
            chaos.start()
            chaos.fleet.start_sweeper()
            chaos.fleet.spawn_workers(args.workers)
            for fault in faults:
                reason = hosts_unavailable() if fault.hosts else ""
                if reason:
                    say(f"{fault.name}: skipped ({reason})")
                    meta.setdefault("skipped", {})[fault.name] = reason
                    continue
                count = fault.short if args.short else fault.full
                results.append(fault_run(chaos, fault, count=count))
        except ChaosError as exc:
            say(f"error: {exc}")
            _dump_logs(chaos)
            meta["error"] = str(exc)
        finally:
            if any(violations(r) for r in results):
                _dump_logs(chaos)
            chaos.stop()
    finally:
        if args.keep:
            say(f"kept {tmp} (logs in {tmp}/logs)")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    meta["seconds"] = time.monotonic() - started
    meta["note"] = (f"**The run stopped early: {meta['error']}.** " if "error" in meta else "") + (
        "".join(f"Skipped {name}: {why}. " for name, why in meta.get("skipped", {}).items())
    )
    table = render(results, meta=meta)
    print(table)
    output = args.output or (None if args.short or args.only else CHAOS_MD)
    if output is not None:
        output.write_text(table)
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {"meta": meta, "faults": [summary_row(r) for r in results]}, indent=2, default=str
            )
        )
    if "error" in meta:
        return 2
    return 1 if any(violations(r) for r in results) else 0


def _dump_logs(chaos: Chaos) -> None:
    for path in sorted(chaos.log_dir.glob("*.log"))[-12:]:
        text = path.read_text(errors="replace")
        if "Traceback" in text or "Error" in text:
            say(f"--- {path.name}\n{text[-3000:]}")


__all__ = [
    "Chaos",
    "FAULTS",
    "Fault",
    "FaultResult",
    "INVARIANTS",
    "main",
]
