"""The New task page's workspace files: uploaded and pasted, each read as UTF-8 text, bounded,
named by a workspace path and checked before the spec sees them, so that a refusal names the
file and nothing else the person gave is lost: accepted uploads come back as pasted rows
(a browser cannot refill a file input), refused ones are named in the error."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.files.uploadedfile import UploadedFile

from tasks.paths import PathEscapeError, PathTooLong, check_path_bounds, validate_relative_path
from tasks.spec import MAX_WORKSPACE_FILES
from tasks.web.uploads import UPLOAD_FILE_MAX_BYTES

FIELD = "workspace.files"
# Files one form sends at once: below Django's DATA_UPLOAD_MAX_NUMBER_FILES (100), which
# refuses a whole request (everything typed in it lost); static/new-task.js checks before
# sending, this check holds without it.
UPLOAD_MAX_FILES = 50
# One file: tasks.web.uploads.UPLOAD_FILE_MAX_BYTES (an upload past it is dropped as it
# arrives). All files of one task: the API's bodies stop at 2.5 MB
# (DATA_UPLOAD_MAX_MEMORY_SIZE), so a task started here could also be started there.
FILES_MAX_BYTES = 2 * 1024 * 1024


@dataclass
class FileRow:
    path: str
    content: str


def _error(message: str) -> dict[str, str]:
    return {"field": FIELD, "message": message}


def _path_problem(path: str) -> str | None:
    try:
        check_path_bounds(path)
        validate_relative_path(path)
    except (PathEscapeError, PathTooLong) as exc:
        return str(exc)
    return None


def _upload_text(upload: UploadedFile) -> tuple[str | None, str | None]:
    """(text, None) or (None, why not). The size is read from the upload before its bytes, so
    a huge file is refused without reading it."""
    name = upload.name or "(unnamed)"
    if upload.size is not None and upload.size > UPLOAD_FILE_MAX_BYTES:
        return None, (
            f"{name} is {upload.size:,} bytes; a workspace file may be at most "
            f"{UPLOAD_FILE_MAX_BYTES:,} bytes"
        )
    data = upload.read(UPLOAD_FILE_MAX_BYTES + 1)
    if len(data) > UPLOAD_FILE_MAX_BYTES:
        return None, f"{name} is over {UPLOAD_FILE_MAX_BYTES:,} bytes"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, f"{name} is binary (not UTF-8 text); workspace files are text"
    if "\x00" in text:
        return None, f"{name} is binary (it holds NUL bytes); workspace files are text"
    return text, None


def _joined(folder: str, name: str) -> str:
    folder = folder.strip().strip("/")
    return f"{folder}/{name}" if folder else name


def files_read(
    *,
    uploads: list[UploadedFile],
    folder: str,
    paths: list[str],
    contents: list[str],
) -> tuple[list[FileRow], list[dict[str, str]]]:
    """The pasted rows (path, content) and the uploads (named `folder/<file name>`) as rows to
    show again, and the errors: one per refused file, naming it. Empty pasted rows are
    dropped."""
    rows: list[FileRow] = []
    errors: list[dict[str, str]] = []
    for path, content in zip(paths, contents, strict=False):
        if path.strip() or content:
            # A browser sends a text area's line breaks as CRLF, whatever was typed or pasted.
            rows.append(FileRow(path=path.strip(), content=content.replace("\r\n", "\n")))
    if len(uploads) > UPLOAD_MAX_FILES:
        errors.append(
            _error(f"{len(uploads)} files uploaded at once; at most {UPLOAD_MAX_FILES} a time")
        )
        uploads = []
    for upload in uploads:
        text, problem = _upload_text(upload)
        if problem:
            errors.append(_error(problem))
        else:
            rows.append(FileRow(path=_joined(folder, upload.name or ""), content=text or ""))
    errors.extend(_rows_check(rows))
    return rows, errors


def _rows_check(rows: list[FileRow]) -> list[dict[str, str]]:
    errors: list[dict[str, str]] = []
    seen: set[str] = set()
    total = 0
    for row in rows:
        if not row.path:
            errors.append(_error("a pasted file needs a path"))
            continue
        problem = _path_problem(row.path)
        if problem:
            errors.append(_error(problem))
        elif row.path in seen:
            errors.append(_error(f"{row.path} is given twice"))
        seen.add(row.path)
        size = len(row.content.encode("utf-8", "replace"))
        total += size
        if size > UPLOAD_FILE_MAX_BYTES:
            errors.append(
                _error(f"{row.path} is {size:,} bytes; at most {UPLOAD_FILE_MAX_BYTES:,}")
            )
    if total > FILES_MAX_BYTES:
        errors.append(_error(f"the files hold {total:,} bytes; at most {FILES_MAX_BYTES:,} in all"))
    if len(rows) > MAX_WORKSPACE_FILES:
        errors.append(_error(f"{len(rows)} files; at most {MAX_WORKSPACE_FILES}"))
    return errors


def files_as_spec(rows: list[FileRow]) -> dict[str, str]:
    return {row.path: row.content for row in rows if row.path}
