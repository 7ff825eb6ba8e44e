"""Plotly's JavaScript, served locally from the installed `plotly` package (no CDN: operators
run this offline too). The finder exposes the package's own plotly.min.js as
`vendor/plotly.min.js`, so the file always matches the installed version and collectstatic
picks it up like any other static file."""

from __future__ import annotations

from pathlib import Path

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.checks import Error
from django.core.files.storage import FileSystemStorage

PLOTLY_DIR = Path(plotly.__file__).resolve().parent / "package_data"
FILENAME = "plotly.min.js"
PREFIX = "vendor"


class PlotlyFinder(BaseFinder):
    def check(self, **kwargs):
        if not (PLOTLY_DIR / FILENAME).is_file():
            return [
                Error(
                    f"{PLOTLY_DIR / FILENAME} is missing; reinstall the plotly package",
                    id="dashboard.E001",
                )
            ]
        return []

    def find(self, path, find_all=False, **kwargs):
        find_all = find_all or kwargs.get("all", False)
        if path != f"{PREFIX}/{FILENAME}":
            return []
        found = str(PLOTLY_DIR / FILENAME)
        return [found] if find_all else found

    def list(self, ignore_patterns):
        storage = FileSystemStorage(location=str(PLOTLY_DIR))
        storage.prefix = PREFIX
        yield FILENAME, storage
