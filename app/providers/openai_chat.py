"""The ``openai`` adapter: chat completions through ``openai.AsyncOpenAI``, streamed.

May import the domain, the provider helpers and the ``openai`` SDK. Three translations: our
messages to a chat-completions request (``_request``), the chunk stream to our StreamChunks
(``_ChunkReader``, over the shared SSE parser: no SDK object per chunk), the SDK's exceptions
to ProviderError (``errors.openai_error``). The SDK client sends the request
(``SSEAdapter._send``).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import openai

from app.domain import (
    ContentBlockDelta,
    ContentBlockStart,
    ContentBlockStop,
    Message,
    MessageStop,
    ProviderError,
    ReasoningDone,
    ReasoningMessage,
    RequestOptions,
    StreamChunk,
    TextMessage,
    ToolSpec,
    ToolUse,
    Usage,
    to_openai_format,
)
from app.domain.attachment_blocks import Files
from app.domain.context import TokenCounter
from app.domain.messages import Role
from app.providers.base import ProviderConfig, SSEAdapter, event_json
from app.providers.errors import bad_response, openai_error, stream_error
from app.providers.sse import SSEEvent
from app.providers.tokens import openai_token_counter

DEFAULT_OPENAI_MODEL = "gpt-5.4-mini"

TrailingAssistant = Literal["reject", "send", "continue_final_message"]

_STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}


@dataclass(frozen=True)
class OpenAIConfig(ProviderConfig):
    """``ProviderConfig`` plus what to do with a conversation ending in an assistant message.

    Chat completions has no prefill: ``reject`` raises ``invalid_request`` before any request;
    ``send`` sends it as history (servers such as llama.cpp continue it, OpenAI answers anew);
    ``continue_final_message`` asks a vLLM server to continue it.
    """

    default_model: str = DEFAULT_OPENAI_MODEL
    trailing_assistant: TrailingAssistant = "reject"
    prompt_caching: bool = True
    """Send ``prompt_cache_key`` (from the conversation) so its requests share a cache."""


class OpenAIClientAdapter(SSEAdapter):
    """What the two ``openai`` adapters share (chat completions, and the Responses API in
    ``openai_responses``): the SDK client, its errors, the token counter, the config."""

    name = "openai"
    _sdk_errors = (openai.OpenAIError,)
    _stream_class = openai.AsyncStream

    config: OpenAIConfig
    _client: openai.AsyncOpenAI | None

    def __init__(self, config: OpenAIConfig, client: openai.AsyncOpenAI | None = None) -> None:
        self.config = config
        self.default_model = config.default_model
        self._client = client

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client, made on first use; its own retries are off (we retry, see base)."""
        if self._client is None:
            aiohttp = self.config.http_client == "aiohttp"
            self._client = openai.AsyncOpenAI(
                api_key=self.config.api_key,
                base_url=self.config.base_url or "https://api.openai.com/v1",
                timeout=self.config.timeout(),
                max_retries=0,
                http_client=openai.DefaultAioHttpClient(timeout=self.config.timeout())
                if aiohttp
                else None,
            )
        return self._client

    def token_counter(self, model: str) -> TokenCounter | None:
        """Exact counts for OpenAI-family models (offline tokenizer); None for other models."""
        return openai_token_counter(model)

    @staticmethod
    def _ends_with_assistant(messages: Sequence[Message]) -> bool:
        last = messages[-1] if messages else None
        return isinstance(last, TextMessage) and last.role is Role.ASSISTANT

    def _refuse_trailing_assistant(self, api: str) -> ProviderError:
        return ProviderError(
            "invalid_request",
            f"openai: the conversation ends with an assistant message, and {api} cannot "
            "continue (prefill) it; add a user message, or run it on 'anthropic', which takes "
            "it as a prefill (PARLEY_OPENAI_TRAILING_ASSISTANT changes this)",
        )

    def _error(self, exc: BaseException) -> ProviderError:
        return openai_error(exc)

    def _cache_options(self, options: RequestOptions) -> dict[str, Any]:
        """``prompt_cache_key`` for the conversation (both APIs take it), or nothing."""
        if not self.config.prompt_caching or options.cache_key is None:
            return {}
        return {"prompt_cache_key": prompt_cache_key(options.cache_key)}


def prompt_cache_key(conversation: str) -> str:
    """The ``prompt_cache_key`` of a conversation: a digest of its id (stable, at most 64
    characters, and no id of ours sent upstream)."""
    return "parley-" + hashlib.sha256(conversation.encode()).hexdigest()[:32]


class OpenAIAdapter(OpenAIClientAdapter):
    """A ModelAdapter over an OpenAI (or OpenAI-compatible) chat-completions endpoint."""

    _endpoint = "/chat/completions"

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        options: RequestOptions,
        files: Files | None = None,
    ) -> dict[str, Any]:
        """The request's JSON body; raises before any request."""
        request: dict[str, Any] = {
            "model": options.model or self.default_model,
            "messages": self._messages(messages, files),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            request["tools"] = [openai_tool(t) for t in tools]
        if options.temperature is not None:
            request["temperature"] = options.temperature
        if options.max_output_tokens is not None:
            request["max_completion_tokens"] = options.max_output_tokens
        if options.reasoning is not None and options.reasoning.effort is not None:
            request["reasoning_effort"] = options.reasoning.effort
        if self._ends_with_assistant(messages) and (
            self.config.trailing_assistant == "continue_final_message"
        ):
            request |= {"continue_final_message": True, "add_generation_prompt": False}
        return request | self._cache_options(options)

    def _messages(
        self, messages: Sequence[Message], files: Files | None = None
    ) -> list[dict[str, Any]]:
        if self._ends_with_assistant(messages) and self.config.trailing_assistant == "reject":
            raise self._refuse_trailing_assistant("chat completions")
        # Chat completions takes no reasoning back (neither a Responses item nor a server's
        # reasoning_content): it is left out, before the turns are gathered, so it cannot
        # split the calls of one reply into two assistant messages.
        sent = [m for m in messages if not isinstance(m, ReasoningMessage)]
        return to_openai_format(sent, include_pending=False, files=files)

    def _translator(self) -> _ChunkReader:
        return _ChunkReader()


def openai_tool(tool: ToolSpec) -> dict[str, Any]:
    """A tool as chat completions declares it."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


@dataclass
class _CallBuffer:
    """One tool call whose arguments arrive in fragments."""

    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def tool_use(self) -> ToolUse:
        raw = "".join(self.arguments).strip()
        try:
            params = json.loads(raw) if raw else {}
        except (ValueError, RecursionError):  # not JSON; nested past what Python decodes
            params = None
        if not isinstance(params, dict):
            raise bad_response(
                "openai", f"the arguments of tool call {self.name!r} are not a JSON object"
            )
        return ToolUse(self.name, params, self.id or f"call_{uuid.uuid4().hex[:24]}")


REASONING_CONTENT_PAYLOAD = {"type": "reasoning_content"}
"""The payload of reasoning a chat-completions server streamed (``reasoning_content``): there
is nothing to hand back, and chat completions takes no reasoning back anyway."""


def chat_usage(usage: dict[str, Any]) -> Usage:
    """A chat-completions ``usage`` object as our Usage, split by kind where it says."""
    prompt = usage.get("prompt_tokens_details") or {}
    completion = usage.get("completion_tokens_details") or {}
    return Usage(
        usage.get("prompt_tokens"),
        usage.get("completion_tokens"),
        reasoning_tokens=completion.get("reasoning_tokens"),
        cache_read_tokens=prompt.get("cached_tokens"),
        cache_write_tokens=prompt.get("cache_write_tokens"),
    )


@dataclass
class _ChunkReader:
    """Turns chat-completion chunks (SSE ``data:`` JSON) into StreamChunks (choice 0 only).

    A server's ``reasoning_content`` (or ``reasoning``) deltas are a reasoning block, ended
    (``ReasoningDone``) when the text or a tool call starts or the choice finishes; each block
    takes the next index, so a reply that reasons has its reasoning at 0 and its text at 1.
    """

    text_index: int | None = None
    reasoning_index: int | None = None
    reasoning: list[str] = field(default_factory=list)
    next_index: int = 0
    calls: dict[int, _CallBuffer] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    done: bool = False

    def feed(self, event: SSEEvent) -> list[StreamChunk]:
        if self.done:
            return []
        if event.data.startswith("[DONE]"):
            self.done = True
            return []
        chunk = event_json(event.data)
        if not isinstance(chunk, dict):
            raise bad_response("openai", "a stream chunk is not a JSON object")
        if chunk.get("error"):
            raise stream_error("openai", chunk["error"])
        usage = chunk.get("usage")
        if usage:
            self.usage = chat_usage(usage)
        out: list[StreamChunk] = []
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) == 0:
                self._choice(choice, out)
        return out

    def _choice(self, choice: dict[str, Any], out: list[StreamChunk]) -> None:
        delta = choice.get("delta") or {}
        thought = delta.get("reasoning_content") or delta.get("reasoning")
        if thought and isinstance(thought, str) and self.text_index is None:
            self._think(thought, out)
        text = (delta.get("content") or "") + (delta.get("refusal") or "")
        if text:
            if self.text_index is None:
                self._end_reasoning(out)
                self.text_index = self._new_index()
                out.append(ContentBlockStart(self.text_index))
            out.append(ContentBlockDelta(text, self.text_index))
        fragments = delta.get("tool_calls") or ()
        if fragments:
            self._end_reasoning(out)
        for fragment in fragments:
            self._add_fragment(fragment)
        finish_reason = choice.get("finish_reason")
        if finish_reason is not None and self.finish_reason is None:
            self.finish_reason = finish_reason
            out.extend(self._close())

    def _new_index(self) -> int:
        self.next_index += 1
        return self.next_index - 1

    def _think(self, thought: str, out: list[StreamChunk]) -> None:
        if self.reasoning_index is None:
            self.reasoning_index = self._new_index()
            out.append(ContentBlockStart(self.reasoning_index, "reasoning"))
        self.reasoning.append(thought)
        out.append(ContentBlockDelta(thought, self.reasoning_index))

    def _end_reasoning(self, out: list[StreamChunk]) -> None:
        index = self.reasoning_index
        if index is None:
            return
        text = "".join(self.reasoning)
        out.append(ContentBlockStop(index))
        out.append(ReasoningDone(text, dict(REASONING_CONTENT_PAYLOAD), index))
        self.reasoning_index = None
        self.reasoning = []

    def _add_fragment(self, fragment: dict[str, Any]) -> None:
        buffer = self.calls.setdefault(fragment.get("index", 0), _CallBuffer())
        buffer.id = fragment.get("id") or buffer.id
        function = fragment.get("function")
        if not function:
            return
        name = function.get("name")
        if name and name != buffer.name:
            buffer.name += name
        if function.get("arguments"):
            buffer.arguments.append(function["arguments"])

    def _close(self) -> list[StreamChunk]:
        out: list[StreamChunk] = []
        self._end_reasoning(out)
        if self.text_index is not None:
            out.append(ContentBlockStop(self.text_index))
        self.text_index = None
        out.extend(self.calls[i].tool_use() for i in sorted(self.calls))
        return out

    def finish(self) -> MessageStop:
        """The closing MessageStop, once the stream has ended; raises if it never finished."""
        if self.finish_reason is None:
            raise bad_response("openai", "the stream ended before its finish_reason")
        reason = "tool_use" if self.calls else _STOP_REASONS.get(self.finish_reason)
        return MessageStop(reason or self.finish_reason, self.usage)
