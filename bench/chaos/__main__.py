"""`python -m bench.chaos`: the chaos suite (as `python -m bench chaos`)."""

import sys

from bench.chaos import main

sys.exit(main())
