"""Provider settings from the environment, which adapters a server has, and token counting."""

from __future__ import annotations

import pytest

from app.domain import ConversationConfigurationError
from app.providers import (
    OfflineAdapter,
    build_adapters,
    build_selector,
    close_selector,
    open_selector,
    token_counter_for,
)
from app.providers.anthropic_messages import AnthropicAdapter
from app.providers.openai_chat import OpenAIAdapter
from app.providers.openai_responses import OpenAIResponsesAdapter
from app.providers.tokens import encoding_for_model, openai_token_counter
from app.settings import Settings

_PROVIDER_ENV = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "PARLEY_OPENAI_API_KEY",
    "PARLEY_OPENAI_BASE_URL",
    "PARLEY_ANTHROPIC_API_KEY",
    "PARLEY_ANTHROPIC_BASE_URL",
    "PARLEY_DEFAULT_PROVIDER",
    "PARLEY_OPENAI_API",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)


def test_defaults_offline_only() -> None:
    settings = Settings()
    assert settings.openai_api_key is None and settings.anthropic_api_key is None
    assert settings.provider_max_retry_wait_seconds == 20
    selector = build_selector(settings)
    assert selector.available == ["offline"]
    adapter, model = selector.select_model(None, None)
    assert isinstance(adapter, OfflineAdapter) and model == "echo"


def test_sdk_variables_are_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    monkeypatch.setenv("PARLEY_OPENAI_DEFAULT_MODEL", "llama3.1:8b")
    monkeypatch.setenv("PARLEY_PROVIDER_MAX_RETRIES", "5")
    settings = Settings()
    assert settings.openai_api_key is not None
    assert settings.openai_api_key.get_secret_value() == "sk-env"
    assert "sk-env" not in repr(settings) and "sk-ant-env" not in repr(settings)
    adapters = build_adapters(settings)
    assert [a.name for a in adapters] == ["openai", "anthropic", "offline"]
    openai_adapter = adapters[0]
    assert isinstance(openai_adapter, OpenAIResponsesAdapter)  # PARLEY_OPENAI_API=responses
    assert openai_adapter.config.base_url == "http://127.0.0.1:11434/v1"
    assert openai_adapter.default_model == "llama3.1:8b"
    assert openai_adapter.config.retry.max_retries == 5
    assert "sk-env" not in repr(openai_adapter.config)
    assert isinstance(adapters[1], AnthropicAdapter)


def test_openai_api_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PARLEY_OPENAI_API", "chat")
    (chat, _) = build_adapters(Settings(openai_api_key="o"))
    assert isinstance(chat, OpenAIAdapter) and chat.name == "openai"
    assert chat._endpoint == "/chat/completions"
    (responses, _) = build_adapters(Settings(openai_api_key="o", openai_api="responses"))
    assert isinstance(responses, OpenAIResponsesAdapter) and responses.name == "openai"
    assert responses._endpoint == "/responses"
    monkeypatch.setenv("PARLEY_OPENAI_API", "completions")
    with pytest.raises(ValueError, match="openai_api"):
        Settings()


def test_prefixed_key_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sdk")
    monkeypatch.setenv("PARLEY_ANTHROPIC_API_KEY", "parley")
    key = Settings().anthropic_api_key
    assert key is not None and key.get_secret_value() == "parley"


def test_blank_key_means_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "  ")
    assert build_selector(Settings()).available == ["offline"]


def test_base_url_must_be_http() -> None:
    with pytest.raises(ValueError, match="http"):
        Settings(openai_base_url="file:///etc/passwd")


@pytest.mark.parametrize(
    "url", ["http://", "https:///v1", "http://exa mple.com/v1", "http://[::1/v1", "http://h:99999"]
)
def test_base_url_must_name_a_host(url: str) -> None:
    # each was taken, and failed at the first request (or at start, with a traceback)
    with pytest.raises(ValueError, match="must name a host"):
        Settings(openai_base_url=url)
    with pytest.raises(ValueError, match="must name a host"):
        Settings(anthropic_base_url=url)


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:11434/v1", "https://[::1]:8443", "http://llm.internal/openai/v1"]
)
def test_base_url_with_a_host_is_kept(url: str) -> None:
    assert Settings(openai_base_url=f" {url} ").openai_base_url == url


async def test_default_provider_is_the_first_real_one() -> None:
    selector = build_selector(Settings(anthropic_api_key="a"))
    try:
        assert selector.available == ["anthropic", "offline"]
        adapter, model = selector.select_model(None, None)
        assert adapter.name == "anthropic" and model == "claude-sonnet-4-6"
        with pytest.raises(ConversationConfigurationError, match="available: anthropic, offline"):
            selector.select_model("openai", None)
    finally:
        await close_selector(selector)


async def test_default_provider_setting() -> None:
    selector = build_selector(Settings(openai_api_key="o", default_provider="offline"))
    try:
        assert selector.select_model(None, None)[0].name == "offline"
    finally:
        await close_selector(selector)
    with pytest.raises(ValueError, match="'anthropic' is not available"):
        build_selector(Settings(default_provider="anthropic"))


async def test_open_selector_makes_the_sdk_clients_and_close_selector_closes_them() -> None:
    selector = build_selector(Settings(openai_api_key="o", anthropic_api_key="a"))
    adapters = [selector.adapter(name) for name in ("openai", "anthropic")]
    assert all(a._client is None for a in adapters)  # type: ignore[union-attr]
    open_selector(selector)  # what Services.start does: no client is made on a first request
    clients = [a._client for a in adapters]  # type: ignore[union-attr]
    assert [type(c).__name__ for c in clients] == ["AsyncOpenAI", "AsyncAnthropic"]
    open_selector(selector)
    assert [a._client for a in adapters] == clients  # type: ignore[union-attr]
    await close_selector(selector)
    assert all(a._client is None for a in adapters)  # type: ignore[union-attr]
    assert all(c.is_closed() for c in clients)


def test_encodings() -> None:
    assert encoding_for_model("gpt-4o-mini") == "o200k_base"
    assert encoding_for_model("gpt-5.4-mini") == "o200k_base"
    assert encoding_for_model("o3-mini") == "o200k_base"
    assert encoding_for_model("gpt-4-turbo") == "cl100k_base"
    assert encoding_for_model("gpt-3.5-turbo") == "cl100k_base"
    assert encoding_for_model("llama3.1:8b") is None
    assert encoding_for_model("claude-sonnet-4-6") is None


@pytest.mark.parametrize(
    ("text", "o200k", "cl100k"),
    [  # counted with tiktoken 0.14 over its hash-checked vocabularies
        ("Why is the sky blue?", 6, 6),
        ("def f(x):\n    return x ** 2  # square\n", 14, 14),
        ('{"city": "Paris", "units": "metric"}', 12, 12),
        ("日本語のテキストも数えます。", 11, 13),
        ("héllo wörld 🙂🚀", 8, 10),
        ("", 0, 0),
    ],
)
def test_exact_counts(text: str, o200k: int, cl100k: int) -> None:
    gpt4o, gpt4 = openai_token_counter("gpt-4o"), openai_token_counter("gpt-4")
    assert gpt4o is not None and gpt4 is not None
    assert (gpt4o(text), gpt4(text)) == (o200k, cl100k)


def test_token_counter_for() -> None:
    adapters = build_adapters(Settings(openai_api_key="o", anthropic_api_key="a"))
    by_name = {a.name: a for a in adapters}
    counter, exact = token_counter_for(by_name["openai"], "gpt-4o")
    assert exact and counter("Why is the sky blue?") == 6
    for name, model in (
        ("openai", "mistral-7b"),
        ("anthropic", "claude-sonnet-4-6"),
        ("offline", "echo"),
    ):
        counter, exact = token_counter_for(by_name[name], model)
        assert not exact and counter("12345678") == 2
