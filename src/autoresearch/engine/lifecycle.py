"""What surrounds one `run`: the campaign lock, the executor's lifecycle, the signals.

Kept apart from the loop so that the loop reads as the attempt's steps only.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType, TracebackType
from typing import Any

from filelock import FileLock

from autoresearch.config import Campaign
from autoresearch.engine.startup import lock_campaign
from autoresearch.executors import Executor
from autoresearch.executors.base import executor_setup
from autoresearch.isolation.owned import refuse_links
from autoresearch.workspace import ensure_state_dir

SignalHandler = Callable[[int, FrameType | None], Any]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_TAMPERED = 3
EXIT_INTERRUPTED = 130


class Interrupted(BaseException):
    """Ctrl-C or SIGTERM: roll back the attempt in flight and stop."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signum)
        self.signum = signum


@dataclass
class RunResult:
    stop_reason: str
    exit_code: int
    summary: dict[str, Any]
    message: str = ""


def raise_interrupted(signum: int, frame: object) -> None:
    raise Interrupted(signum)


class Lifecycle:
    """Hold the lock, start the executor and route SIGINT/SIGTERM to `on_signal` while
    the engine runs; undo all of it on the way out, whatever happens."""

    def __init__(
        self,
        campaign: Campaign,
        executor: Executor,
        warn: Callable[[str], None],
        on_signal: SignalHandler,
    ) -> None:
        self.campaign = campaign
        self.executor = executor
        self.warn = warn
        self.on_signal = on_signal
        self.lock: FileLock | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> Lifecycle:
        ensure_state_dir(self.campaign.root)
        # Before anything is written there: a campaign folder swapped for a link is refused.
        refuse_links(self.campaign.root, self.campaign.state_dir)
        self.campaign.state_dir.mkdir(parents=True, exist_ok=True)
        self.lock = lock_campaign(self.campaign)
        try:
            self._signals()
            for warning in self.executor.start(executor_setup(self.campaign)):
                self.warn(warning)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _signals(self) -> None:
        try:
            for signum in (signal.SIGINT, signal.SIGTERM):
                self.previous[signum] = signal.signal(signum, self.on_signal)
        except ValueError:  # not the main thread: signals stay with the caller
            pass

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}
        self.executor.close()
        if self.lock is not None:
            self.lock.release()
            self.lock = None
