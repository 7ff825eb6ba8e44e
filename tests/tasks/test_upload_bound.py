"""An upload past the bound is dropped as it arrives (tasks.web.uploads): the page gets its
name and size and no content, and the fields after it are still parsed."""

from __future__ import annotations

from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import RequestFactory
from django.test.client import MULTIPART_CONTENT

from tasks.web.uploads import UPLOAD_FILE_MAX_BYTES


def test_a_huge_upload_arrives_empty_with_its_size_and_later_fields_survive():
    huge = SimpleUploadedFile("huge.log", b"x" * (5 * UPLOAD_FILE_MAX_BYTES))
    small = SimpleUploadedFile("small.txt", b"kept\n")
    request = RequestFactory().post(
        "/tasks/new/",
        {"upload": [huge, small], "goal": "still here"},
        content_type=MULTIPART_CONTENT,
    )
    uploads = {f.name: f for f in request.FILES.getlist("upload")}
    assert uploads["huge.log"].size == 5 * UPLOAD_FILE_MAX_BYTES
    assert uploads["huge.log"].read() == b""
    assert uploads["small.txt"].read() == b"kept\n"
    assert request.POST["goal"] == "still here"
