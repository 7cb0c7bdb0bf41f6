"""Token authentication for a Ray cluster the engine starts (`[executor] address = "local"`).

Every server such a cluster opens (the GCS, the raylets, the workers, the dashboard agent
with its job API, the runtime-env agent) answers only requests that carry the cluster's
token. The token is made afresh for each cluster and written, readable by the user alone,
in the campaign's folder (`.autoresearch/<name>/`), which lies inside the user's checkout
and so is hidden from every sandbox; it is named to Ray by its path
(`RAY_AUTH_TOKEN_PATH`), never by value, so no environment holds it. Ray reads these
settings from the process environment only (the cluster's processes inherit it when they
start): they are set for as long as the cluster runs and put back when it stops.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from autoresearch.isolation.owned import remove

TOKEN_FILE = "ray-auth-token"
# The names Ray reads its authentication settings from.
AUTH_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


class ClusterToken:
    """The token of one cluster: `enable` before `ray.init`, `disable` after `ray.shutdown`."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / TOKEN_FILE
        self.before: dict[str, str | None] | None = None

    def enable(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        remove(self.path)  # a link planted here is removed, never written through
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(secrets.token_hex(32))  # 256 bits, as Ray's own generator makes
        self.before = {name: os.environ.get(name) for name in AUTH_ENV}
        # A token the user keeps in the environment would win over the file: the cluster
        # is the engine's, so is its token.
        os.environ.pop("RAY_AUTH_TOKEN", None)
        os.environ["RAY_AUTH_MODE"] = "token"
        os.environ["RAY_AUTH_TOKEN_PATH"] = str(self.path)
        _reload()

    def disable(self) -> None:
        if self.before is None:
            return
        for name, value in self.before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self.before = None
        _reload()
        remove(self.path)


def _reload() -> None:
    """Make this process's Ray read the settings again: its configuration first, then the
    token (the order Ray's own tests keep, so that no thread reloads a token while the
    configuration still names the old mode)."""
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()
