"""Static files as the site serves them: `collectstatic` writes each file under a content-hashed
name (Django's manifest storage) with gzip and brotli siblings (WhiteNoise), which WhiteNoise
serves with a year's max-age, `immutable`, in the encoding the browser accepts.

Brotli at its best ratio costs seconds per megabyte, so each hashed file is compressed once:
its name names its content, so siblings that exist are already right. They are written under a
temporary name and renamed, so a `collectstatic` cut short never leaves a truncated one behind
to be trusted by the next run and cached by browsers for a year. The unhashed copies are
served (briefly cached) but never linked, so they are not compressed; nor are source maps,
which only a browser's developer tools fetch."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from whitenoise.compress import Compressor
from whitenoise.storage import CompressedManifestStaticFilesStorage

ENCODINGS = (".br", ".gz")


class AtomicCompressor(Compressor):
    SKIP_COMPRESS_EXTENSIONS = (*Compressor.SKIP_COMPRESS_EXTENSIONS, "map")

    def write_data(self, path: str, data: bytes, suffix: str, stat_result: os.stat_result) -> str:
        filename = path + suffix
        partial = f"{filename}.{os.getpid()}.partial"
        with open(partial, "wb") as handle:
            handle.write(data)
        os.utime(partial, (stat_result.st_atime, stat_result.st_mtime))
        os.replace(partial, filename)
        return filename


class StaticFilesStorage(CompressedManifestStaticFilesStorage):
    def create_compressor(self, **kwargs) -> Compressor:
        return AtomicCompressor(**kwargs)

    def compress_files(self, paths: Iterable[str]) -> Iterator[tuple[str, str]]:
        hashed = set(self.hashed_files.values())
        todo = [
            path
            for path in paths
            if path in hashed and not any(self.exists(path + suffix) for suffix in ENCODINGS)
        ]
        yield from super().compress_files(todo)
