"""Static files as the site serves them: `collectstatic` writes each file under a content-hashed
name (Django's manifest storage) with gzip and brotli siblings (WhiteNoise), which WhiteNoise
serves with a year's max-age, `immutable`, in the encoding the browser accepts.

Brotli at its best ratio costs seconds per megabyte, so each hashed file is compressed once:
its name names its content, so siblings that exist are already right. They are written under a
temporary name and renamed, so a `collectstatic` cut short never leaves a truncated one behind
to be trusted by the next run and cached by browsers for a year. The unhashed copies are
served (briefly cached) but never linked, so they are not compressed; nor are source maps,
which only a browser's developer tools fetch.

A `collectstatic` rewrites the hashed files it processes, and the manifest, in place (written
aside and renamed over): Django's own storage deletes each one and then writes it again, so a
web process starting or serving beside a `collectstatic` into the same folder (another web
process on the host deploying, `harness up` beside a running site) found a file it had just
listed missing — a web process that failed to start, or an error instead of the file.

The other side of the same race: WhiteNoise lists the folder when a web process starts and then
reads each entry's size and times. A file written aside (`….partial`) and renamed between the
two, or one Django's unhashed copy deletes and writes again, is gone by the time it is read,
and stock WhiteNoise fails the process's start on it. WhiteNoiseMiddleware here passes over an
entry gone by then, and never serves a file written aside."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from whitenoise.compress import Compressor
from whitenoise.middleware import WhiteNoiseMiddleware as StockWhiteNoiseMiddleware
from whitenoise.storage import CompressedManifestStaticFilesStorage

ENCODINGS = (".br", ".gz")
# The end of a file's name while it is written aside (`_replace`).
PARTIAL = ".partial"


def _replace(
    path: str, chunks: Iterable[bytes | str], finish: Callable[[str], None] | None = None
) -> None:
    """`chunks` written to `path` whole or not at all: aside, `finish(aside)` (times,
    permissions), then renamed over it."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = f"{path}.{os.getpid()}{PARTIAL}"
    with open(partial, "wb") as handle:
        for chunk in chunks:
            handle.write(chunk.encode() if isinstance(chunk, str) else chunk)
    if finish is not None:
        finish(partial)
    os.replace(partial, path)


class AtomicCompressor(Compressor):
    SKIP_COMPRESS_EXTENSIONS = (*Compressor.SKIP_COMPRESS_EXTENSIONS, "map")

    def write_data(self, path: str, data: bytes, suffix: str, stat_result: os.stat_result) -> str:
        filename = path + suffix
        times = (stat_result.st_atime, stat_result.st_mtime)
        _replace(filename, [data], lambda partial: os.utime(partial, times))
        return filename


def _chmod(mode: int) -> Callable[[str], None]:
    return lambda path: os.chmod(path, mode)


class StaticFilesStorage(CompressedManifestStaticFilesStorage):
    # True while collectstatic post-processes: the files it writes then replace those there.
    replacing = False

    def create_compressor(self, **kwargs) -> Compressor:
        return AtomicCompressor(**kwargs)

    def post_process(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        self.replacing = True
        try:
            yield from super().post_process(*args, **kwargs)
        finally:
            self.replacing = False

    def delete(self, name: str) -> None:
        # While post-processing, Django deletes a hashed file (or the manifest) only to write it
        # again under the same name: `_save` replaces it instead, so it is never missing.
        if not self.replacing:
            super().delete(name)

    def _save(self, name: str, content: Any) -> str:
        if not self.replacing:
            return str(super()._save(name, content))
        mode = self.file_permissions_mode
        _replace(self.path(name), content.chunks(), None if mode is None else _chmod(mode))
        return name

    def compress_files(self, paths: Iterable[str]) -> Iterator[tuple[str, str]]:
        hashed = set(self.hashed_files.values())
        todo = [
            path
            for path in paths
            if path in hashed and not any(self.exists(path + suffix) for suffix in ENCODINGS)
        ]
        yield from super().compress_files(todo)


def _listed(root: str) -> Iterator[tuple[str, os.stat_result]]:
    """(path, its stat) of every file under `root`, as whitenoise.base.scantree lists them, but
    passing over a file written aside and one gone between the listing and its stat."""
    for entry in os.scandir(root):
        try:
            if entry.is_dir():
                yield from _listed(entry.path)
            elif not entry.name.endswith(PARTIAL):
                yield entry.path, entry.stat()
        except FileNotFoundError:
            continue


class WhiteNoiseMiddleware(StockWhiteNoiseMiddleware):
    """WhiteNoise's middleware, starting beside a `collectstatic` into the same folder."""

    def update_files_dictionary(self, root: str, prefix: str) -> None:
        stat_cache = dict(_listed(root))
        for path in stat_cache:
            url = prefix + path[len(root) :].replace("\\", "/")
            self.add_file_to_dictionary(url, path, stat_cache=stat_cache)
