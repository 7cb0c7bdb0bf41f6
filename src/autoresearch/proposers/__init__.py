"""Proposer kinds, each one module behind the `Proposer` protocol, registered by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from autoresearch.config import Campaign, ProposerConfig, format_validation_error
from autoresearch.errors import ConfigError
from autoresearch.proposers.agents import PRESETS, AgentOptions, AgentProposer
from autoresearch.proposers.base import Proposer
from autoresearch.proposers.command import CommandOptions, CommandProposer
from autoresearch.proposers.openai_chat import ChatProposer, OpenAIOptions
from autoresearch.proposers.optuna_params import OptunaOptions, OptunaProposer


@dataclass(frozen=True)
class ProposerKind:
    options: type[BaseModel]
    create: Callable[[Any, Campaign], Proposer]


REGISTRY: dict[str, ProposerKind] = {
    "command": ProposerKind(CommandOptions, lambda opts, campaign: CommandProposer(opts)),
    "optuna": ProposerKind(
        OptunaOptions,
        lambda opts, campaign: OptunaProposer(opts, campaign, campaign.config.proposer.options()),
    ),
    "openai": ProposerKind(OpenAIOptions, lambda opts, campaign: ChatProposer(opts, campaign)),
}


def _agent(kind: str) -> ProposerKind:
    return ProposerKind(AgentOptions, lambda opts, campaign: AgentProposer(kind, opts, campaign))


REGISTRY.update({kind: _agent(kind) for kind in PRESETS})


def parse_options(config: ProposerConfig, source: str) -> BaseModel:
    kind = REGISTRY.get(config.kind)
    if kind is None:
        known = ", ".join(sorted(REGISTRY))
        raise ConfigError(
            f"{source}: key 'proposer.kind': unknown proposer kind {config.kind!r}; "
            f"use one of: {known}."
        )
    try:
        return kind.options.model_validate(config.options())
    except ValidationError as exc:
        message = format_validation_error(source, exc)
        raise ConfigError(message.replace("key '", "key 'proposer.", 1)) from None


def validate_proposer(proposer: Proposer, workspace: Path) -> None:
    """Let a proposer check its settings against the files it will edit."""
    validate = getattr(proposer, "validate", None)
    if callable(validate):
        validate(workspace)


def create_proposer(campaign: Campaign) -> Proposer:
    config = campaign.config.proposer
    options = parse_options(config, campaign.display_path())
    return REGISTRY[config.kind].create(options, campaign)
