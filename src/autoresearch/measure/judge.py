"""An LLM judge: scores files against a rubric, for goals without a number.

Isolation by construction: a request holds the rubric and the files, nothing else — never
the goal, the proposer's description, the history or the ledger. Each of `rounds` requests
is independent; the median score is the measurement. A reply without a valid score makes
the measurement fail (a `crash`), it is never guessed.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from autoresearch.config import Campaign, JudgeConfig
from autoresearch.isolation.owned import write_text
from autoresearch.llm import ChatClient, LLMError, api_key
from autoresearch.scope import PathMatcher

# What the judge reads of one file: a request holding more would fail at any model's limit.
JUDGED_BYTES = 4 << 20

SYSTEM = """\
You are a strict, consistent judge. Score the material below against the rubric, from 0
(worst) to 100 (best). Judge only what is in the material.

Reply with one JSON object and nothing else: {{"score": <number 0-100>, "reason": "<one sentence>"}}

# Rubric

{rubric}
"""


@dataclass
class Verdict:
    score: float | None
    reason: str
    seconds: float
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0


def parse_score(text: str) -> tuple[float, str]:
    """The score and reason of a judge reply; ValueError when there is no valid score."""
    candidates = [text.strip()]
    candidates += re.findall(r"\{[^{}]*\}", text, re.DOTALL)
    for raw in candidates:
        cleaned = re.sub(r"^```(?:json)?|```$", "", raw.strip()).strip()
        try:
            data = json.loads(cleaned)
        except json.JSONDecodeError:
            continue
        if not isinstance(data, dict) or "score" not in data:
            continue
        score = data["score"]
        if isinstance(score, bool) or not isinstance(score, int | float | str):
            raise ValueError(f"the score {score!r} is not a number")
        try:
            value = float(score)
        except ValueError:
            raise ValueError(f"the score {score!r} is not a number") from None
        if not 0 <= value <= 100:
            raise ValueError(f"the score {value:g} is outside 0-100")
        return value, str(data.get("reason") or "")
    raise ValueError("the reply holds no JSON object with a 'score'")


class Judge:
    def __init__(self, config: JudgeConfig, campaign: Campaign) -> None:
        self.config = config
        self.client = ChatClient(config, api_key(config, campaign.display_path(), "judge"))
        self.files = PathMatcher(config.files)

    def _material(self, workspace: Path) -> str:
        names = _files_under(workspace)
        parts = []
        for name in names:
            if not self.files.matches(name):
                continue
            try:
                with open(workspace / name, "rb") as handle:
                    data = handle.read(JUDGED_BYTES + 1)
            except OSError:
                continue
            text = data[:JUDGED_BYTES].decode("utf-8", errors="replace")
            if len(data) > JUDGED_BYTES:  # a candidate's file is never held whole
                text += f"\n[... cut: the file is larger than {JUDGED_BYTES} bytes ...]\n"
            parts.append(f"## {name}\n\n{text}")
        return "\n\n".join(parts) if parts else "(the files to judge do not exist)"

    def score(self, workspace: Path, log_stem: Path) -> Verdict:
        started = time.monotonic()
        rubric = (workspace / self.config.rubric).read_text(encoding="utf-8", errors="replace")
        messages = [
            {"role": "system", "content": SYSTEM.format(rubric=rubric.strip())},
            {"role": "user", "content": self._material(workspace)},
        ]
        verdict = Verdict(score=None, reason="", seconds=0.0)
        scores: list[float] = []
        replies: list[str] = []
        try:
            for _ in range(self.config.rounds):
                reply = self.client.complete(messages)
                verdict.tokens_in += reply.tokens_in
                verdict.tokens_out += reply.tokens_out
                verdict.cost_usd += reply.cost_usd
                replies.append(reply.text)
                value, reason = parse_score(reply.text)
                scores.append(value)
                verdict.reason = reason
        except (LLMError, ValueError) as exc:
            verdict.reason = f"judge: {exc}"
            scores = []
        finally:
            log_stem.parent.mkdir(parents=True, exist_ok=True)
            write_text(log_stem.with_suffix(".out"), "\n\n---\n\n".join(replies))
            verdict.seconds = time.monotonic() - started
        if scores:
            verdict.score = statistics.median(scores)
        return verdict


def _files_under(folder: Path) -> list[str]:
    """Every file below `folder` as a relative path, sorted; `.git` and links to folders are
    not entered. The judge reads what the measured commit holds, which need not be a git
    work tree."""
    found = []
    for top, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        base = Path(top).relative_to(folder)
        found += [(base / name).as_posix() for name in files]
    return sorted(found)
