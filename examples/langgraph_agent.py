"""A LangChain `create_agent` graph whose tool call waits for a human: HumanInTheLoopMiddleware
gates `send_announcement`, so the harness opens a review of the call (approve, edit, reject
or respond) and resumes the agent with the decision. Registered in harness.yaml as
`announcer`.

The chat model is scripted (no network, no key) so the example runs anywhere: it asks for one
`send_announcement` call with the arguments from the user's message, then answers with what
the tool returned. Swap in any LangChain chat model for a real agent.
"""

from __future__ import annotations

import json
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool


@tool
def send_announcement(channel: str, text: str) -> str:
    """Post an announcement to a channel."""
    return f"posted to {channel}: {text}"


class ScriptedChatModel(BaseChatModel):
    """Turn 1: call send_announcement with the JSON arguments in the user's message. After
    the tool answered: a final message quoting the result."""

    @property
    def _llm_type(self) -> str:
        return "scripted-example"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kwargs: Any) -> ChatResult:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            reply = AIMessage(content=f"done: {last.content}")
        else:
            args = json.loads(str(last.content))
            reply = AIMessage(
                content="",
                tool_calls=[{"name": "send_announcement", "args": args, "id": "call-1"}],
            )
        # What a real chat model reports of the call (the harness traces it as a `chat` span).
        tokens_in = sum(len(str(m.content)) for m in messages) // 4
        tokens_out = len(str(reply.content) or json.dumps(reply.tool_calls)) // 4
        reply.response_metadata = {"model_name": "scripted-example"}
        reply.usage_metadata = {
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        }
        return ChatResult(generations=[ChatGeneration(message=reply)])


graph = create_agent(
    ScriptedChatModel(),
    tools=[send_announcement],
    middleware=[HumanInTheLoopMiddleware(interrupt_on={"send_announcement": True})],
)
