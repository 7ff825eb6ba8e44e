"""The OpenAI-compatible adapter: chat completions with tool calling, over plain HTTP (httpx).

Works with any server speaking that wire format (hosted APIs, vLLM, Ollama, LM Studio, a
proxy): `POST {base_url}/chat/completions`. The endpoint and model come from the task's model
spec or from settings (OPENAI_BASE_URL, HARNESS_MODEL); the key from the environment variable
the operator bound to that endpoint (`model_endpoints`). Errors are classified for the loop:
408, 429 (with `Retry-After`), 5xx, connection errors and timeouts are transient; other 4xx
are permanent and keep the server's message. The request's messages and tool schemas are
built by agent.llm.openai_messages.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

import httpx

from agent.http_headers import retry_after_seconds
from agent.llm.base import ModelAdapter, ModelCall, ModelDecision, ModelError
from agent.llm.openai_messages import tool_schema, wire_messages
from tasks.agent_state import AgentState
from tasks.spec import ModelEndpoint, ModelEndpointError, OpenAIModelSpec, model_endpoint
from tasks.tools.registry import ToolSpec

MAX_RESPONSE_BYTES = 8 * 1024 * 1024
ERROR_MESSAGE_CHARS = 1000


def endpoint_for(spec: OpenAIModelSpec) -> ModelEndpoint:
    """The endpoint a spec resolves to; a permanent ModelError when the spec cannot run."""
    try:
        return model_endpoint(spec)
    except ModelEndpointError as exc:
        raise ModelError(str(exc), error_class="permanent") from None


def _parse_call(raw: Any) -> ModelCall:
    function = (raw or {}).get("function") or {}
    name = str(function.get("name") or "")
    arguments = function.get("arguments")
    if isinstance(arguments, dict):  # some servers send an object instead of a JSON string
        return ModelCall(tool=name, args=arguments)
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return ModelCall(tool=name, args={})
    try:
        args = json.loads(arguments)
    except (TypeError, json.JSONDecodeError) as exc:
        detail = (
            f"{exc.msg} at position {exc.pos}"
            if isinstance(exc, json.JSONDecodeError)
            else str(exc)
        )
        return ModelCall(
            tool=name, raw_error=f"arguments are not valid JSON ({detail}): {str(arguments)[:200]}"
        )
    if not isinstance(args, dict):
        return ModelCall(
            tool=name, raw_error=f"arguments must be a JSON object, got {type(args).__name__}"
        )
    return ModelCall(tool=name, args=args)


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def _server_message(body: bytes) -> str:
    text = body.decode("utf-8", errors="replace")
    try:
        data = json.loads(text)
    except ValueError:
        return text.strip()[:ERROR_MESSAGE_CHARS] or "(empty body)"
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])[:ERROR_MESSAGE_CHARS]
    if isinstance(error, str):
        return error[:ERROR_MESSAGE_CHARS]
    return text.strip()[:ERROR_MESSAGE_CHARS]


class OpenAIChatModel(ModelAdapter):
    name = "openai"
    can_complete = True

    def __init__(self, spec: OpenAIModelSpec) -> None:
        self.spec = spec
        self.endpoint = endpoint_for(spec)

    def decide(
        self, *, state: AgentState, tools: list[ToolSpec], timeout_s: float
    ) -> ModelDecision:
        body: dict[str, Any] = {
            "model": self.endpoint.model,
            "messages": wire_messages(state, images=self.spec.vision),
        }
        if tools:
            body["tools"] = [tool_schema(t) for t in tools]
        data = self._post(body, timeout_s=timeout_s)
        message = self._message(data)
        calls = [_parse_call(c) for c in message.get("tool_calls") or []]
        text = _text(message.get("content"))
        usage = self._usage(data)
        if calls:
            return ModelDecision(calls=calls, text=text, **usage)
        if not text.strip():
            finish = (data.get("choices") or [{}])[0].get("finish_reason")
            raise ModelError(
                f"the model returned neither tool calls nor text (finish_reason={finish})",
                error_class="permanent",
            )
        return ModelDecision(final=text, text=text, **usage)

    def complete(self, *, system: str, prompt: str, timeout_s: float) -> ModelDecision:
        data = self._post(
            {
                "model": self.endpoint.model,
                "messages": [
                    {"role": "system", "content": system},
                    {"role": "user", "content": prompt},
                ],
            },
            timeout_s=timeout_s,
        )
        return ModelDecision(text=_text(self._message(data).get("content")), **self._usage(data))

    # -- the wire --------------------------------------------------------------------------

    def _post(self, body: dict[str, Any], *, timeout_s: float) -> dict[str, Any]:
        if self.spec.temperature is not None:
            body["temperature"] = self.spec.temperature
        if self.spec.max_output_tokens is not None:
            body["max_tokens"] = self.spec.max_output_tokens
        headers = {"Accept": "application/json"}
        key = os.environ.get(self.endpoint.api_key_env) if self.endpoint.api_key_env else None
        if key:
            headers["Authorization"] = f"Bearer {key}"
        url = self.endpoint.url
        deadline = time.monotonic() + timeout_s
        try:
            with httpx.Client(timeout=timeout_s) as client:
                with client.stream("POST", url, json=body, headers=headers) as response:
                    raw = self._read(response, deadline=deadline, timeout_s=timeout_s)
        except httpx.TimeoutException:
            raise ModelError(
                f"POST {url}: no answer within {timeout_s:g}s (layer: turn)",
                error_class="transient",
            ) from None
        except httpx.TransportError as exc:
            raise ModelError(
                f"POST {url}: connection failed: {exc}", error_class="transient"
            ) from None
        status = response.status_code
        if status >= 400:
            transient = status in (408, 429) or status >= 500
            raise ModelError(
                f"HTTP {status} from {url}: {_server_message(raw)}",
                error_class="transient" if transient else "permanent",
                status=status,
                retry_after_s=retry_after_seconds(response.headers.get("retry-after")),
            )
        try:
            data = json.loads(raw)
        except ValueError:
            raise ModelError(
                f"{url} answered {status} with a body that is not JSON: {raw[:200]!r}",
                error_class="permanent",
                status=status,
            ) from None
        if not isinstance(data, dict):
            raise ModelError(
                f"{url} answered with JSON that is not an object",
                error_class="permanent",
                status=status,
            )
        return data

    @staticmethod
    def _read(response: httpx.Response, *, deadline: float, timeout_s: float) -> bytes:
        """The whole body, within the turn deadline (httpx's timeouts are per read)."""
        data = bytearray()
        for chunk in response.iter_bytes():
            if time.monotonic() > deadline:
                raise ModelError(
                    f"POST {response.request.url}: the answer took longer than "
                    f"{timeout_s:g}s (layer: turn)",
                    error_class="transient",
                )
            data += chunk
            if len(data) > MAX_RESPONSE_BYTES:
                raise ModelError(
                    f"POST {response.request.url}: answer larger than {MAX_RESPONSE_BYTES} bytes",
                    error_class="permanent",
                )
        return bytes(data)

    @staticmethod
    def _message(data: dict[str, Any]) -> dict[str, Any]:
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise ModelError(
                f"unexpected answer without choices[0].message: {json.dumps(data)[:300]}",
                error_class="permanent",
            ) from None
        if not isinstance(message, dict):
            raise ModelError(
                "unexpected answer: choices[0].message is not an object", error_class="permanent"
            )
        return message

    def _usage(self, data: dict[str, Any]) -> dict[str, Any]:
        given = data.get("usage")
        usage: dict[str, Any] = given if isinstance(given, dict) else {}

        def count(key: str) -> int:
            value = usage.get(key)
            return value if isinstance(value, int) and value >= 0 else 0

        return {
            "prompt_tokens": count("prompt_tokens"),
            "completion_tokens": count("completion_tokens"),
            "model": str(data.get("model") or self.endpoint.model),
        }
