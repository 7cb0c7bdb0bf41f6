"""Talking to an OpenAI-compatible chat API (OpenAI, Ollama, vLLM, llama.cpp) with the openai SDK.

The API key is read from the environment variable the config names; it is passed to the
SDK and never written anywhere: not in the ledger, the logs, the prompt files or errors.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field

from autoresearch.errors import AutoresearchError, ConfigError

DEFAULT_BASE_URL = "https://api.openai.com/v1"


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    input: float = Field(default=0.0, ge=0)
    output: float = Field(default=0.0, ge=0)


class ChatSettings(BaseModel):
    """Keys shared by the chat proposer and the judge."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    base_url: str = DEFAULT_BASE_URL
    model: str = Field(min_length=1)
    api_key_env: str = "OPENAI_API_KEY"
    price_per_mtok: Price = Field(default_factory=Price)
    request_timeout: float = Field(default=600, gt=0)
    max_retries: int = Field(default=4, ge=0, le=20)
    temperature: float | None = Field(default=None, ge=0, le=2)


class LLMError(AutoresearchError):
    """The chat API could not be reached or refused the request."""


@dataclass(frozen=True)
class Reply:
    text: str
    tokens_in: int
    tokens_out: int
    cost_usd: float
    seconds: float


def _is_local(url: str) -> bool:
    host = (urlparse(url).hostname or "").lower()
    return host in ("localhost", "127.0.0.1", "::1") or host.startswith("127.")


def api_key(
    settings: ChatSettings, source: str, section: str, environ: Mapping[str, str] | None = None
) -> str:
    key = (os.environ if environ is None else environ).get(settings.api_key_env, "")
    if key:
        return key
    if _is_local(settings.base_url):
        return "unused"  # local servers (Ollama, vLLM) accept any key
    raise ConfigError(
        f"{source}: key '{section}.api_key_env': the environment variable "
        f"{settings.api_key_env} is not set; export it (the key is never stored)."
    )


class ChatClient:
    def __init__(self, settings: ChatSettings, key: str) -> None:
        try:
            from openai import OpenAI
        except ImportError:
            raise ConfigError(
                "the openai package is not installed; install it with "
                "`pip install 'autoresearch[openai]'`."
            ) from None

        self.settings = settings
        self._client = OpenAI(
            api_key=key,
            base_url=settings.base_url,
            timeout=settings.request_timeout,
            max_retries=settings.max_retries,
        )

    def complete(self, messages: list[dict[str, str]]) -> Reply:
        """One chat completion. The SDK retries 429 and 5xx answers with backoff."""
        import openai

        started = time.monotonic()
        kwargs: dict[str, object] = {}
        if self.settings.temperature is not None:
            kwargs["temperature"] = self.settings.temperature
        try:
            response = self._client.chat.completions.create(  # type: ignore[call-overload]
                model=self.settings.model, messages=messages, **kwargs
            )
        except openai.APITimeoutError:
            raise LLMError(
                f"the chat API at {self.settings.base_url} did not answer within "
                f"{self.settings.request_timeout:g} s"
            ) from None
        except openai.APIConnectionError:
            raise LLMError(f"cannot reach the chat API at {self.settings.base_url}") from None
        except openai.APIStatusError as exc:
            raise LLMError(
                f"the chat API at {self.settings.base_url} answered HTTP {exc.status_code}"
                f" for model {self.settings.model!r}"
            ) from None
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content or "") if choice is not None else ""
        usage = response.usage
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        price = self.settings.price_per_mtok
        cost = (tokens_in * price.input + tokens_out * price.output) / 1_000_000
        return Reply(text, tokens_in, tokens_out, cost, time.monotonic() - started)
