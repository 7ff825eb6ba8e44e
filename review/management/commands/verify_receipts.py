from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError

from review.receipts import receipts_verify


class Command(BaseCommand):
    help = (
        "Verify the chain of decision receipts: exit 0 when every receipt matches its hash and "
        "the one before it, else exit 1 naming the first receipt that does not verify."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        checked, problem = receipts_verify()
        if problem is not None:
            raise CommandError(f"{problem} ({checked} receipts before it verified)")
        self.stdout.write(f"{checked} receipts verified; the chain is intact")
