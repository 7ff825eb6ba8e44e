"""Run langgraph-checkpoint-conformance against DjangoCheckpointSaver on the configured
database and print the report as JSON. Imported by the tests (PostgreSQL, in process) and run
as a script on a fresh SQLite file:

    DATABASE_URL=sqlite:////tmp/x.sqlite3 python -m tests.checkpoints.langgraph_conformance
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

ALL_CAPABILITIES = {
    "put",
    "put_writes",
    "get_tuple",
    "list",
    "delete_thread",
    "delete_for_runs",
    "copy_thread",
    "prune",
}


def conformance_report() -> Any:
    """The CapabilityReport of every base and extended capability."""
    from langgraph.checkpoint.conformance import checkpointer_test, validate

    from checkpoints.langgraph import DjangoCheckpointSaver

    @checkpointer_test(name="DjangoCheckpointSaver")
    async def django_saver():
        saver = DjangoCheckpointSaver()
        try:
            yield saver
        finally:
            saver.close()

    return asyncio.run(validate(django_saver, capabilities=ALL_CAPABILITIES))


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness_site.settings")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    report = conformance_report()
    json.dump(
        {"passed_all_base": report.passed_all_base(), **report.to_dict()}, sys.stdout, indent=2
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
