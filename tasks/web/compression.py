"""HTML pages sent gzip-compressed (static files are compressed by whitenoise already), with
the defences against compression side channels (BREACH) a page carrying a secret needs.

Why this is safe for the pages we compress. BREACH reads a secret out of a compressed page by
reflecting guesses into the same response and watching its length. The secret on every page
is the CSRF token, and Django masks it afresh for each response (`get_token` XORs the secret
with a new random mask: the form field never repeats byte for byte, so a guess that matches
it compresses no better than one that does not). Django's GZipMiddleware also pads each
response with up to 100 random bytes in the gzip header (Heal The Breach), blurring any length
difference that is left. A page that shows a secret *unmasked* beside input a third party can
influence (the one-time invite link beside the invited name) is sent uncompressed: its view is
marked `@uncompressed`. Only text/html is compressed here: JSON (API tokens are created there)
and streamed responses (server-sent events, downloads) are left as they are."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.middleware.gzip import GZipMiddleware

# The mark `uncompressed` leaves on a response.
_UNCOMPRESSED = "uncompressed"


class HtmlGZipMiddleware(GZipMiddleware):
    def process_response(
        self, request: HttpRequest, response: HttpResponseBase
    ) -> HttpResponseBase:
        if getattr(response, _UNCOMPRESSED, False) or response.streaming:
            return response
        if not response.get("Content-Type", "").startswith("text/html"):
            return response
        return super().process_response(request, response)


def uncompressed(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Send this view's responses uncompressed: it shows a secret unmasked (see above)."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        setattr(response, _UNCOMPRESSED, True)
        return response

    return wrapper
