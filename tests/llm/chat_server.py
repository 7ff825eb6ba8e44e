"""A loopback HTTP server speaking the OpenAI chat-completions wire format.

Tests queue the replies it gives, in order, and read back every request it received. Replies
are shaped exactly like real ones (`chat.completion` objects with `tool_calls` whose
`arguments` are JSON strings, `finish_reason`, `usage`; errors as `{"error": {...}}`). A
request with `"stream": true` gets its reply as server-sent `chat.completion.chunk` events, as
a real endpoint streams it (the OpenAI Agents SDK adapter streams its model turns)."""

from __future__ import annotations

import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.nodelay import NoDelayHTTPServer

SERVED_MODEL = "gpt-4o-mini-2024-07-18"


@dataclass
class Reply:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float  # time.monotonic()


class ChatServer:
    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Received] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        # False: a `"stream": true` request is answered with plain JSON, as some endpoints do.
        self.streams = True
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                reply = server._take(
                    Received(
                        path=self.path, headers=dict(self.headers), body=body, at=time.monotonic()
                    )
                )
                streamed = server.streams and bool(body.get("stream")) and reply.status == 200
                data = sse_chunks(reply.body) if streamed else json.dumps(reply.body).encode()
                self.send_response(reply.status)
                self.send_header(
                    "Content-Type", "text/event-stream" if streamed else "application/json"
                )
                self.send_header("Content-Length", str(len(data)))
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = NoDelayHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def start(self) -> ChatServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def _take(self, received: Received) -> Reply:
        with self._lock:
            self.requests.append(received)
            if received.path != "/v1/chat/completions":
                return error_reply(404, f"unknown path {received.path}")
            if not self.replies:
                return error_reply(400, "the test server has no reply queued for this request")
            return self.replies.pop(0)

    # -- queueing replies ----------------------------------------------------------------

    def _completion(
        self,
        message: dict[str, Any],
        finish_reason: str,
        prompt_tokens: int,
        completion_tokens: int,
    ) -> dict[str, Any]:
        n = next(self._ids)
        return {
            "id": f"chatcmpl-test{n:06d}",
            "object": "chat.completion",
            "created": 1_700_000_000 + n,
            "model": SERVED_MODEL,
            "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
            "system_fingerprint": "fp_test",
        }

    def tool_calls(
        self,
        *calls: tuple[str, dict[str, Any] | str],
        content: str | None = None,
        prompt_tokens: int = 100,
        completion_tokens: int = 20,
    ) -> None:
        """One turn calling tools; a str instead of a dict is sent as the raw arguments."""
        message = {
            "role": "assistant",
            "content": content,
            "refusal": None,
            "tool_calls": [
                {
                    "id": f"call_{next(self._ids):08x}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for name, args in calls
            ],
        }
        self.replies.append(
            Reply(200, self._completion(message, "tool_calls", prompt_tokens, completion_tokens))
        )

    def answer(self, text: str, *, prompt_tokens: int = 100, completion_tokens: int = 20) -> None:
        message = {"role": "assistant", "content": text, "refusal": None}
        self.replies.append(
            Reply(200, self._completion(message, "stop", prompt_tokens, completion_tokens))
        )

    def error(self, status: int, message: str, *, headers: dict[str, str] | None = None) -> None:
        reply = error_reply(status, message)
        reply.headers.update(headers or {})
        self.replies.append(reply)

    def chat_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests]


def error_reply(status: int, message: str) -> Reply:
    kind = (
        "rate_limit_error"
        if status == 429
        else ("server_error" if status >= 500 else "invalid_request_error")
    )
    return Reply(status, {"error": {"message": message, "type": kind, "param": None, "code": None}})


def sse_chunks(completion: dict[str, Any]) -> bytes:
    """A `chat.completion` as the event stream a real endpoint sends for it: the message in one
    delta, the finish reason, the usage, then [DONE]."""
    choice = completion["choices"][0]
    message = choice["message"]
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if message.get("tool_calls"):
        delta["tool_calls"] = [
            {"index": index, **call} for index, call in enumerate(message["tool_calls"])
        ]
    head = {key: completion[key] for key in ("id", "created", "model")}
    chunks = [
        {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        {"choices": [], "usage": completion["usage"]},
    ]
    events = [
        f"data: {json.dumps({**head, 'object': 'chat.completion.chunk', **chunk})}\n\n"
        for chunk in chunks
    ]
    return ("".join(events) + "data: [DONE]\n\n").encode()
