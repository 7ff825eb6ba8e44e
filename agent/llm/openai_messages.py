"""An AgentState in the chat-completions wire format (agent.llm.openai): its messages, every tool
result answering its call by our call_id, images as user content parts after their run of
results, the context note in the (first) system message; and a tool's function schema."""

from __future__ import annotations

import json
from typing import Any

from tasks.agent_state import AgentState, Message, context_note
from tasks.tools.registry import ToolSpec


def tool_schema(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.json_schema(),
        },
    }


def _wire_message(message: Message) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.call_id, "content": message.content}
    if message.role == "assistant" and message.calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.call_id,
                    "type": "function",
                    "function": {"name": call.tool, "arguments": json.dumps(call.args)},
                }
                for call in message.calls
            ],
        }
    return {"role": message.role, "content": message.content}


def _images_message(messages: list[Message]) -> dict[str, Any]:
    """The images of a run of tool results, as one user message of content parts: the chat
    format takes images in user messages only, and a tool result must follow its call."""
    parts: list[dict[str, Any]] = []
    for message in messages:
        parts.append(
            {
                "type": "text",
                "text": f"The image(s) {message.name} returned (call {message.call_id}):",
            }
        )
        parts += [
            {
                "type": "image_url",
                "image_url": {"url": f"data:{media.mime_type};base64,{media.data}"},
            }
            for media in message.media or []
        ]
    return {"role": "user", "content": parts}


def wire_messages(state: AgentState, *, images: bool = False) -> list[dict[str, Any]]:
    """AgentState as chat messages: our call_ids are the tool-call ids, so every tool result
    answers its call; the rolling summary and hard facts join the (first) system message.
    `images`: the images tools returned follow their run of results (image_url data URIs);
    without it the results' text describes them."""
    out: list[dict[str, Any]] = []
    with_images: list[Message] = []
    for message in state.messages:
        if message.role != "tool" and with_images:
            out.append(_images_message(with_images))
            with_images = []
        out.append(_wire_message(message))
        if images and message.role == "tool" and message.media:
            with_images.append(message)
    if with_images:
        out.append(_images_message(with_images))
    note = context_note(state)
    if note:
        if out and out[0]["role"] == "system":
            out[0] = {"role": "system", "content": f"{out[0]['content']}\n\n{note}"}
        else:
            out.insert(0, {"role": "system", "content": note})
    return out
