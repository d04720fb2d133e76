"""Server settings from the environment (prefix ``PARLEY_``), passed to ``create_app``.

Imports pydantic-settings only. Provider credentials are settings, never request data.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/parley.db"


def _sdk_env(name: str) -> AliasChoices:
    """``PARLEY_<name>``, then the SDKs' own ``<name>``, then the field name (for keywords)."""
    return AliasChoices(f"PARLEY_{name}", name, name.lower())


class Settings(BaseSettings):
    """Everything an operator can set; each field is documented in the README."""

    model_config = SettingsConfigDict(env_prefix="PARLEY_", extra="ignore")

    database_url: str = Field(DEFAULT_DATABASE_URL, description="SQLAlchemy async URL.")
    offline_delay_ms: float = Field(0, ge=0, description="Offline adapter delay per word.")
    default_provider: str | None = Field(
        None, description="Provider for conversations that name none (default: first available)."
    )

    # --- the HTTP API and runs ---
    api_keys: str = Field(
        "",
        description="Comma-separated bearer tokens accepted; empty: any token (or none) works, "
        "and each distinct token sees only its own conversations.",
    )
    max_body_bytes: int = Field(1_048_576, ge=1024, description="Largest request body.")
    max_text_chars: int = Field(100_000, ge=1, description="Longest text of one message.")
    max_bundle_messages: int = Field(100, ge=1, description="Most messages in one delta bundle.")
    max_import_messages: int = Field(10_000, ge=1, description="Most messages in one import.")
    page_size: int = Field(20, ge=1, description="Conversations per page by default.")
    max_page_size: int = Field(100, ge=1, description="Most conversations per page.")
    run_lease_seconds: float = Field(15, gt=0, description="A run's lease; renewed at a third.")
    sse_ping_seconds: float = Field(15, ge=0, description="Keep-alive ping interval (0: none).")
    tool_timeout_seconds: float = Field(30, gt=0, description="Longest a server tool may run.")

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
    provider_connect_timeout_seconds: float = Field(10, gt=0, description="Connect timeout.")
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

    @field_validator("openai_api_key", "anthropic_api_key", mode="after")
    @classmethod
    def _blank_key_is_none(cls, value: SecretStr | None) -> SecretStr | None:
        return value if value is not None and value.get_secret_value().strip() else None

    @field_validator("openai_base_url", "anthropic_base_url", mode="after")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if not value.strip().lower().startswith(("http://", "https://")):
            raise ValueError("must be an http:// or https:// URL")
        return value.strip()
