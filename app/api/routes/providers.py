"""``GET /providers``: which model providers this server has, for a client's provider picker.

May import FastAPI, schemas and deps. Read-only; names no key, endpoint or other secret.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from app.api.deps import CallerDep

router = APIRouter(tags=["providers"])


class ProviderOut(BaseModel):
    name: str = Field(description="What a conversation's `config.provider` may name.")
    default_model: str = Field(description="The model used when the config names none.")


class ProvidersOut(BaseModel):
    default_provider: str = Field(description="Used when a conversation names no provider.")
    providers: list[ProviderOut]


@router.get("/providers", response_model=ProvidersOut)
async def list_providers(caller: CallerDep) -> ProvidersOut:
    """The providers this server can run, each with its default model, and the default
    provider. `offline` (a local echo model, no network) is always there."""
    selector = caller.services.configs.selector
    default_adapter, _ = selector.select_model(None, None)
    providers = []
    for name in selector.available:
        model = selector.select_model(name, None)[1]
        providers.append(ProviderOut(name=name, default_model=model))
    return ProvidersOut(default_provider=default_adapter.name, providers=providers)
