"""Server settings from the environment (prefix ``PARLEY_``), passed to ``create_app``.

Imports pydantic-settings only. Provider credentials are settings, never request data.
``load_settings`` is how a process reads them: a bad value ends it with status 2 and one line
naming the variable. docs/settings.md and .env.example are generated from this class
(``make settings-doc``), so each field's ``description`` is its documentation.
"""

from __future__ import annotations

import sys
from typing import Any, Literal, NoReturn, Self

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.settings.caching import CachingSettings
from app.settings.checks import is_host_pattern, is_origin, names_a_host
from app.settings.files import FileSettings
from app.settings.spend import SpendSettings
from app.settings.streams import StreamSettings
from app.settings.titles import TitleSettings
from app.settings.webhooks import WebhookSettings

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/parley.db"
CONFIG_ERROR_EXIT = 2
MAX_DURATION_SECONDS = 315_360_000
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")  # PARLEY_ALLOWED_HOSTS when unset
"""Ten years: the most a duration that dates are computed from (a lease, a TTL, a retention)
may be; beyond some such bound the date arithmetic overflows and every request fails."""
_DRIVERS = {
    "sqlite+aiosqlite": "sqlite+aiosqlite",
    "postgresql+asyncpg": "postgresql+asyncpg",
    "postgresql": "postgresql+asyncpg",
    "postgres": "postgresql+asyncpg",
}


def _sdk_env(name: str) -> AliasChoices:
    """``PARLEY_<name>``, then the SDKs' own ``<name>``, then the field name (for keywords)."""
    return AliasChoices(f"PARLEY_{name}", name, name.lower())


class Settings(
    CachingSettings,
    FileSettings,
    SpendSettings,
    StreamSettings,
    TitleSettings,
    WebhookSettings,
    BaseSettings,
):
    """Everything an operator can set; each field is documented in docs/settings.md.

    A topic's settings may live in their own module of this package, as a ``BaseSettings``
    mixin without a ``model_config`` of its own, listed among this class's bases. Its
    validators' names must be its own: pydantic keeps one validator per name, the first base's.
    """

    # allow_inf_nan: `inf` is a float pydantic accepts, but no timeout or delay can be infinite.
    model_config = SettingsConfigDict(env_prefix="PARLEY_", extra="ignore", allow_inf_nan=False)

    database_url: str = Field(
        DEFAULT_DATABASE_URL,
        description="SQLAlchemy URL: `sqlite+aiosqlite:///path` or "
        "`postgresql+asyncpg://user:pass@host/db` (`postgresql://` means the same).",
    )
    offline_delay_ms: float = Field(
        0, ge=0, description="Milliseconds the offline model waits before each word."
    )
    default_provider: str | None = Field(
        None, description="Provider for conversations that name none (default: first available)."
    )

    # --- the HTTP API and runs ---
    api_keys: SecretStr = Field(
        SecretStr(""),
        description="Comma-separated bearer tokens accepted; empty: any token (or none) works, "
        "and each distinct token sees only its own conversations. Never shown in a repr or log.",
    )
    cors_origins: str = Field(
        "",
        description="Comma-separated origins (`https://app.example.com`) whose pages may call "
        "Parley from a browser; empty: only Parley's own. Any other `Origin` gets 403.",
    )
    allowed_hosts: str = Field(
        "",
        description="Comma-separated host names (`parley.example.com`, `10.0.0.5`, "
        "`*.example.com`) requests may be made to, any port; empty: the loopback names "
        "`localhost`, `127.0.0.1` and `::1`. A request for another `Host` gets 400, so a page "
        "whose name resolves to Parley (DNS rebinding) cannot use it. `*`: any host (unsafe but "
        "behind a proxy that checks it). `/healthz` and `/readyz` answer any host.",
    )
    max_body_bytes: int = Field(
        1_048_576,
        ge=1024,
        description="Largest request body in bytes (413 beyond), but for the routes that load "
        "a whole conversation (`max_import_bytes`).",
    )
    max_import_bytes: int = Field(
        33_554_432,
        ge=1024,
        description="Largest body of `POST /conversations`, `POST /conversations/import` and "
        "`POST /ai-sdk/chat`, which carry a whole conversation: the default (32 MiB) fits "
        "`max_import_messages` (10,000) messages of 3,000 characters each.",
    )
    max_text_chars: int = Field(100_000, ge=1, description="Longest text of one message.")
    max_bundle_messages: int = Field(100, ge=1, description="Most messages in one delta bundle.")
    max_import_messages: int = Field(10_000, ge=1, description="Most messages in one import.")
    idempotency_ttl_seconds: float = Field(
        86_400,
        gt=0,
        le=MAX_DURATION_SECONDS,
        description="How long an `Idempotency-Key` is remembered: a retry within it gets the "
        "first result; after it the key is free again.",
    )
    page_size: int = Field(20, ge=1, description="Conversations per page by default.")
    max_page_size: int = Field(100, ge=1, description="Most conversations per page.")
    run_lease_seconds: float = Field(
        6,
        gt=0,
        le=MAX_DURATION_SECONDS,
        description="A run's hold on its conversation, renewed at a third; when its process "
        "dies, the conversation is free again after at most this long.",
    )
    event_flush_seconds: float = Field(
        0.1,
        gt=0,
        le=1,
        description="Longest a run's event waits before the process's writer stores it (one "
        "transaction per flush for all runs); finished messages are stored at once.",
    )
    run_event_log: bool = Field(
        True,
        description="Store every event of a run (resume from any process, text kept after a "
        "crash). Off, only messages and endings are stored: for measuring the log's cost.",
    )
    cancel_poll_seconds: float = Field(
        0.25,
        gt=0,
        le=1,
        description="How often a process looks for cancels of its runs asked elsewhere "
        "(PostgreSQL also tells it at once through NOTIFY).",
    )
    follow_poll_seconds: float = Field(
        0.25,
        gt=0,
        le=5,
        description="How often a reader of a run on another process looks for new events "
        "(PostgreSQL also tells it at once through NOTIFY).",
    )
    run_event_retention_seconds: float = Field(
        86_400,
        gt=0,
        le=MAX_DURATION_SECONDS,
        description="How long the events of a finished run are kept for resuming; its messages "
        "stay for good.",
    )
    prune_interval_seconds: float = Field(600, gt=0, description="How often old events are pruned.")
    sse_ping_seconds: float = Field(
        15,
        ge=0,
        description="Seconds between keep-alive comments on a stream (0: none).",
    )
    sse_send_timeout_seconds: float = Field(
        30,
        gt=0,
        description="A client that reads nothing for this long counts as disconnected.",
    )
    shutdown_drain_seconds: float = Field(
        5,
        gt=0,
        description="On SIGTERM, how long open runs get to store their partial replies and "
        "send `done` (keep uvicorn's --timeout-graceful-shutdown above it).",
    )
    tool_timeout_seconds: float = Field(30, gt=0, description="Seconds a server-side tool may run.")

    # --- operating it (docs/deploy.md) ---
    log_format: Literal["text", "json"] = Field(
        "text",
        description="`json`: one JSON object a line (time, level, logger, message, request_id, "
        "conversation_id, run_id); `text`: one readable line.",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = Field(
        "INFO",
        description="Least severe level logged, uvicorn's lines included (its access log is INFO).",
    )
    migrate_on_start: bool = Field(
        False,
        description="Migrate the database to the latest schema before serving (under a "
        "PostgreSQL advisory lock, so replicas may start together).",
    )

    # --- model providers (app/providers; docs/providers.md) ---
    # Keys and base URLs also answer to the SDKs' own unprefixed variables; a PARLEY_ one wins.
    openai_api_key: SecretStr | None = Field(
        None,
        validation_alias=_sdk_env("OPENAI_API_KEY"),
        description="OpenAI key; setting it makes the `openai` provider available.",
    )
    openai_base_url: str | None = Field(
        None,
        validation_alias=_sdk_env("OPENAI_BASE_URL"),
        description="OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp…); default OpenAI's.",
    )
    openai_default_model: str = Field("gpt-5.4-mini", min_length=1, description="OpenAI model.")
    openai_api: Literal["responses", "chat"] = Field(
        "responses",
        description="The API the `openai` provider speaks: `responses` (OpenAI's Responses API, "
        "stateless, reasoning handed back) or `chat` (chat completions: for OpenAI-compatible "
        "servers such as vLLM, Ollama, llama.cpp).",
    )
    openai_trailing_assistant: Literal["reject", "send", "continue_final_message"] = Field(
        "reject",
        description="A conversation ending in an assistant message on `openai`: reject it before "
        "any request, send it as it is, or ask a vLLM server to continue it.",
    )
    anthropic_api_key: SecretStr | None = Field(
        None,
        validation_alias=_sdk_env("ANTHROPIC_API_KEY"),
        description="Anthropic key; setting it makes the `anthropic` provider available.",
    )
    anthropic_base_url: str | None = Field(
        None, validation_alias=_sdk_env("ANTHROPIC_BASE_URL"), description="Anthropic endpoint."
    )
    anthropic_default_model: str = Field(
        "claude-sonnet-4-6", min_length=1, description="Anthropic model."
    )
    anthropic_max_tokens: int = Field(
        4096, ge=1, description="Anthropic max_tokens when a conversation sets no limit."
    )
    provider_connect_timeout_seconds: float = Field(
        10, gt=0, description="Seconds to connect to a provider."
    )
    provider_read_timeout_seconds: float = Field(
        120, gt=0, description="Longest wait for the next bytes of a model's reply."
    )
    provider_max_retries: int = Field(
        2, ge=0, le=10, description="Retries of a failed model request, before its first token."
    )
    provider_max_retry_wait_seconds: float = Field(
        20, ge=0, description="Longest wait before a retry; a longer retry-after fails at once."
    )
    provider_retry_backoff_seconds: float = Field(
        0.5, ge=0, description="First retry's wait when the provider names none; doubles after."
    )
    provider_http_client: Literal["httpx", "aiohttp"] = Field(
        "aiohttp",
        description="The SDKs' HTTP transport: httpx (their default) or aiohttp.",
    )

    @field_validator("database_url", mode="after")
    @classmethod
    def _known_driver(cls, value: str) -> str:
        scheme, sep, rest = value.strip().partition("://")
        if not sep or scheme.lower() not in _DRIVERS:
            raise ValueError(
                "must start with sqlite+aiosqlite:// or postgresql+asyncpg:// "
                f"(got {scheme + sep if sep else 'no scheme'!r})"
            )
        return f"{_DRIVERS[scheme.lower()]}://{rest}"

    @model_validator(mode="after")
    def _default_provider_available(self) -> Self:
        keys = {"openai": self.openai_api_key, "anthropic": self.anthropic_api_key}
        name = self.default_provider
        if name is None or name == "offline" or (name in keys and keys[name] is not None):
            return self
        if name in keys:
            raise ValueError(
                f"default_provider: {name!r} is not available without {name.upper()}_API_KEY"
            )
        raise ValueError(f"default_provider: {name!r} is not one of offline, openai, anthropic")

    def accepted_api_keys(self) -> list[str]:
        """The bearer tokens ``api_keys`` lists (empty: any token works)."""
        return [k.strip() for k in self.api_keys.get_secret_value().split(",") if k.strip()]

    @field_validator("api_keys", mode="after")
    @classmethod
    def _some_key_if_set(cls, value: SecretStr) -> SecretStr:
        raw = value.get_secret_value()
        if raw.strip() and not [k for k in raw.split(",") if k.strip()]:
            # ", ," would otherwise leave the server open to any token, the opposite of intended
            raise ValueError("lists no key (leave it empty to accept any token)")
        return value

    @field_validator("openai_api_key", "anthropic_api_key", mode="after")
    @classmethod
    def _blank_key_is_none(cls, value: SecretStr | None) -> SecretStr | None:
        return value if value is not None and value.get_secret_value().strip() else None

    @field_validator("default_provider", mode="after")
    @classmethod
    def _blank_provider_is_none(cls, value: str | None) -> str | None:
        # `PARLEY_DEFAULT_PROVIDER=` (.env.example's line uncommented) means unset, as for a key
        return (value or "").strip() or None

    @field_validator("openai_base_url", "anthropic_base_url", mode="after")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        url = value.strip()
        if not url.lower().startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        if not names_a_host(url):
            raise ValueError(
                "must name a host, and a port from 0 to 65535 if any, without spaces: "
                "http://host[:port][/path]"
            )
        return url

    @field_validator("cors_origins", mode="after")
    @classmethod
    def _origins(cls, value: str) -> str:
        for origin in (o.strip() for o in value.split(",")):
            if origin == "*":
                raise ValueError("'*' is not supported: list the origins that may call Parley")
            if origin and not is_origin(origin.rstrip("/")):
                raise ValueError(
                    f"{origin!r} is not an origin: scheme, host and port only, "
                    "such as https://app.example.com"
                )
        return value

    @field_validator("allowed_hosts", mode="after")
    @classmethod
    def _hosts(cls, value: str) -> str:
        for host in (h.strip() for h in value.split(",")):
            if host and not is_host_pattern(host):
                raise ValueError(
                    f"{host!r} is not a host name: a name or address without scheme or port, "
                    "such as parley.example.com, 10.0.0.5, *.example.com or *"
                )
        return value

    def allowed_host_list(self) -> list[str]:
        """The host names of ``allowed_hosts`` in lower case (IPv6 without brackets); the
        loopback names when it is empty."""
        hosts = [h.strip().lower() for h in self.allowed_hosts.split(",") if h.strip()]
        hosts = [h[1:-1] if h.startswith("[") and h.endswith("]") else h for h in hosts]
        return hosts or list(LOOPBACK_HOSTS)

    def cors_origin_list(self) -> list[str]:
        """The allowed origins of ``cors_origins``, without blanks or trailing slashes."""
        return [o.strip().rstrip("/") for o in self.cors_origins.split(",") if o.strip()]


def env_names(name: str) -> list[str]:
    """The environment variables that set field ``name``, the preferred one first."""
    alias = Settings.model_fields[name].validation_alias
    if isinstance(alias, AliasChoices):
        return [str(c) for c in alias.choices if str(c).isupper()]
    return [f"PARLEY_{name.upper()}"]


def describe_errors(error: ValidationError) -> str:
    """The errors as one line, each naming its variable; never the value (it may be a key)."""
    parts = []
    for item in error.errors(include_input=False, include_url=False):
        loc = item.get("loc") or ()
        field = str(loc[0]) if loc else ""
        message = str(item.get("msg", "invalid")).removeprefix("Value error, ")
        if not field and ":" in message:  # a model-level check names its field first
            field, _, message = message.partition(":")
        field = field.lower()
        if field.startswith("parley_"):
            field = field.removeprefix("parley_")
        name = " or ".join(env_names(field)) if field in Settings.model_fields else field.upper()
        parts.append(f"{name}: {message.strip()}")
    return "; ".join(parts)


def load_settings(**overrides: Any) -> Settings:
    """The settings from the environment; a bad value exits with status 2 and one line."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        config_error_exit(describe_errors(exc))


def config_error_exit(problem: str) -> NoReturn:
    """End the process: ``parley: configuration error: <problem>`` on stderr, status 2."""
    print(f"parley: configuration error: {problem}", file=sys.stderr, flush=True)
    raise SystemExit(CONFIG_ERROR_EXIT)
