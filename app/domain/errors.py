"""The domain's exceptions. Imports only the standard library.

ConversationError
 ├── MessageListDeserializationError   bad serialized data (names index and field)
 │    └── ProviderFormatError           a bad provider-format document (``loc`` names it)
 ├── MessageListSerializationError     a message that cannot be serialized (names it)
 ├── DeltaApplicationError              a delta that cannot be applied (nothing applied)
 ├── ConversationConfigurationError     a config or conversation that cannot run
 │    └── ContextWindowError            the token budget leaves out the latest message
 ├── ConversationFileError              save/load could not read or write the file
 ├── ToolRoundLimitError                the model kept calling tools past max_tool_rounds
 └── ProviderError                      a model provider failed (stable ``code``)
"""

from __future__ import annotations


class ConversationError(Exception):
    """Base class of every error the domain raises."""


class MessageListDeserializationError(ConversationError, ValueError):
    """Serialized MessageList data is invalid; the message says where."""


class ProviderFormatError(MessageListDeserializationError):
    """An OpenAI or Anthropic document that cannot be imported; ``loc`` names the bad item."""

    def __init__(self, loc: tuple[str | int, ...], problem: str) -> None:
        self.loc = loc
        self.problem = problem
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")
        super().__init__(f"{where}: {problem}")


class MessageListSerializationError(ConversationError, ValueError):
    """A message cannot be serialized; the message says which one."""


class DeltaApplicationError(ConversationError, ValueError):
    """A builder delta cannot be applied; nothing of it was applied."""


class ConversationConfigurationError(ConversationError, ValueError):
    """The conversation's configuration (or the conversation itself) cannot be used."""


class ContextWindowError(ConversationConfigurationError):
    """The token budget leaves no room for the latest message."""


class ConversationFileError(ConversationError, OSError):
    """A conversation file or stream could not be read or written."""


class ToolRoundLimitError(ConversationError):
    """The model asked for more tool rounds than ``max_tool_rounds`` allows."""

    def __init__(self, max_tool_rounds: int) -> None:
        super().__init__(
            f"the model asked for tools more than max_tool_rounds={max_tool_rounds} times; "
            "the tool results so far are kept, raise max_tool_rounds to let it go on"
        )
        self.max_tool_rounds = max_tool_rounds


class ProviderError(ConversationError):
    """A model provider failed. ``code`` is stable and meant for clients.

    Codes: ``rate_limited``, ``authentication``, ``upstream_unavailable``,
    ``context_too_long``, ``timeout``, ``bad_response``, ``invalid_request``.
    """

    def __init__(
        self,
        code: str,
        detail: str,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.retryable = retryable
        self.retry_after = retry_after
