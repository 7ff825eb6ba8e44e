"""`python -m harness_site.cli`: what `./harness` runs."""

from __future__ import annotations

import sys

from harness_site.cli import main

sys.exit(main())
