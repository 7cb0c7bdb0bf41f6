"""The token of a cluster the engine starts: readable by the user alone, never written
through a link planted at its path, never held in the environment by value, and the
engine's environment as it was once the cluster stops."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

pytest.importorskip("ray")

from autoresearch.executors.ray_token import AUTH_ENV, ClusterToken


def test_the_token_is_the_users_alone_and_the_environment_comes_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_AUTH_TOKEN", "the-users-own")
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    before = {name: os.environ.get(name) for name in AUTH_ENV}
    target = tmp_path / "elsewhere"
    target.write_text("not the engine's")
    state = tmp_path / "state"
    state.mkdir()
    (state / "ray-auth-token").symlink_to(target)

    token = ClusterToken(state)
    token.enable()
    try:
        assert target.read_text() == "not the engine's", "the token was written through a link"
        written = token.path.read_text()
        assert len(written) == 64 and int(written, 16) >= 0
        assert stat.S_IMODE(os.lstat(token.path).st_mode) == 0o600
        assert os.environ["RAY_AUTH_TOKEN_PATH"] == str(token.path)
        assert os.environ["RAY_AUTH_MODE"] == "token"
        assert written not in "".join(os.environ.values()), "the token is in the environment"
    finally:
        token.disable()
    assert {name: os.environ.get(name) for name in AUTH_ENV} == before
    assert not os.path.lexists(token.path)
    token.disable()  # twice is harmless
