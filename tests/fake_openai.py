"""The loopback OpenAI-compatible server now ships in the package."""

from autoresearch.testing.fake_openai import FakeOpenAI, Prepared, serve

__all__ = ["FakeOpenAI", "Prepared", "serve"]
