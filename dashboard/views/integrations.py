"""Endpoints other services call. Each authenticates its caller itself (no session, so no
CSRF token): Slack's interactivity requests carry Slack's signature (review.slack)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.request import RawPostDataException
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from review.slack import slack_action_handle


@csrf_exempt
@require_POST
def slack_actions(request: HttpRequest) -> HttpResponse:
    try:
        body = request.body
    except RawPostDataException:
        # A multipart body was parsed (by the input guard) before the view: Slack never sends
        # one, and without the raw bytes no signature can verify.
        body = b""
    reply = slack_action_handle(body=body, headers=request.headers)
    return JsonResponse(
        {"response_type": "ephemeral", "replace_original": False, "text": reply.text},
        status=reply.status,
    )
