"""Exact token counts for OpenAI-family models, offline; and which counter a context uses.

May import the domain and ``toktok`` (toktok-rs: tiktoken's cl100k/o200k encodings compiled in,
so nothing is downloaded at run time). Models of other families get None: the domain then
uses its approximation, and the context route reports ``exact: false``.
"""

from __future__ import annotations

import re
from functools import cache

import toktok  # type: ignore[import-untyped]  # no type hints shipped

from app.domain import ModelAdapter, approximate_tokens
from app.domain.context import TokenCounter

# Which encoding a model name uses, first match wins (after tiktoken's own model table). Names
# this does not know (gpt-6*, local models behind OPENAI_BASE_URL…) get no exact counter.
_O200K = r"^(ft:)?(gpt-4o|gpt-4\.1|gpt-4\.5|gpt-5|chatgpt-4o|o1|o3|o4)([-.:]|$)"
_CL100K = r"^(ft:)?(gpt-4|gpt-3\.5|gpt-35)([-.:]|$)|^text-embedding-(3|ada-002)"
_ENCODINGS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^(ft:)?gpt-oss"), "o200k_harmony"),
    (re.compile(_O200K), "o200k_base"),
    (re.compile(_CL100K), "cl100k_base"),
)


def encoding_for_model(model: str) -> str | None:
    """The tiktoken encoding ``model`` uses, or None when it is not known to be an OpenAI one."""
    name = model.strip().lower()
    return next((enc for pattern, enc in _ENCODINGS if pattern.match(name)), None)


@cache
def encoding_counter(encoding: str) -> TokenCounter:
    """Counts tokens with ``encoding``; special-token text counts as plain text, as sent."""

    def count(text: str) -> int:
        return int(toktok.batch_count([text], encoding, threads=1)[0]) if text else 0

    count("warm up")  # the vocabulary loads here (~0.4 s and ~60 MB, once): on first use
    setattr(count, "image_rule", "openai")  # noqa: B010  # images count by OpenAI's tiles
    return count


def openai_token_counter(model: str) -> TokenCounter | None:
    """The exact counter for an OpenAI-family ``model``, or None."""
    encoding = encoding_for_model(model)
    return encoding_counter(encoding) if encoding is not None else None


def token_counter_for(adapter: ModelAdapter, model: str) -> tuple[TokenCounter, bool]:
    """The counter a context for ``adapter``/``model`` uses, and whether its counts are exact.

    An adapter may offer ``token_counter(model) -> TokenCounter | None``; None (or no such
    method) means the domain's approximation, reported as not exact.
    """
    factory = getattr(adapter, "token_counter", None)
    counter = factory(model) if callable(factory) else None
    if callable(counter):
        return counter, True
    return approximate_tokens, False
