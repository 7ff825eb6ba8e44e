"""Uploaded files are kept only up to UPLOAD_FILE_MAX_BYTES each (settings.FILE_UPLOAD_HANDLERS
puts this handler first). Past the bound the rest of the file is read from the request and
dropped, not kept in memory or on disk, and the file arrives as an empty upload with its full
`size`, so the page can refuse it by name while every other field is still parsed: a huge
file costs neither the server's disk nor what the person typed in the form."""

from __future__ import annotations

import io
from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler

# A workspace file (dashboard/new_task_files.py), and every upload the site takes.
UPLOAD_FILE_MAX_BYTES = 1024 * 1024


class OversizeUpload(UploadedFile):
    """An upload over the bound: its name and size, no content."""

    def __init__(self, *, name: str, size: int) -> None:
        super().__init__(io.BytesIO(b""), name, "application/octet-stream", size)


class CappedUploadHandler(FileUploadHandler):
    def new_file(self, *args: Any, **kwargs: Any) -> None:
        super().new_file(*args, **kwargs)
        self.received = 0

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self.received += len(raw_data)
        # None: the handlers after this one (memory, temporary file) never see the chunk.
        return raw_data if self.received <= UPLOAD_FILE_MAX_BYTES else None

    def file_complete(self, file_size: int) -> UploadedFile | None:
        if file_size > UPLOAD_FILE_MAX_BYTES:
            return OversizeUpload(name=self.file_name or "", size=file_size)
        return None  # the next handler's file
