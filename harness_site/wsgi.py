from __future__ import annotations

import gc
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "harness_site.settings")
application = get_wsgi_application()
# What start-up loaded (the apps, their modules, the URL and template caches) lives as long as
# the process: move it out of the collector's generations, so a full collection scans only what
# requests made. Without it, one full collection over the ~120,000 start-up objects stalls a
# request for ~100 ms (bench/dashboard/'s p95 figures showed it).
gc.freeze()
