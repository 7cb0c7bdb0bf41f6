"""Proposer kinds, each one module behind the `Proposer` protocol, registered by name."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from autoresearch.config import Campaign, ProposerConfig, format_validation_error
from autoresearch.errors import ConfigError
from autoresearch.isolation.confinement import Confinement, confinement_for
from autoresearch.isolation.process import ChildRecord
from autoresearch.proposers.agents import PRESETS, AgentOptions, AgentProposer
from autoresearch.proposers.base import Proposer, ProposerSetup
from autoresearch.proposers.command import CommandOptions, CommandProposer
from autoresearch.proposers.openai_chat import ChatProposer, OpenAIOptions
from autoresearch.proposers.optuna_params import OptunaOptions, OptunaProposer


@dataclass(frozen=True)
class ProposerKind:
    options: type[BaseModel]
    create: Callable[[Any, ProposerSetup], Proposer]


REGISTRY: dict[str, ProposerKind] = {
    "command": ProposerKind(CommandOptions, CommandProposer),
    "optuna": ProposerKind(OptunaOptions, OptunaProposer),
    "openai": ProposerKind(OpenAIOptions, ChatProposer),
}


def _agent(kind: str) -> ProposerKind:
    return ProposerKind(AgentOptions, lambda opts, setup: AgentProposer(kind, opts, setup))


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
    proposer.validate(workspace)


CHILD_RECORD = "child.pgid"


def proposer_confinement(campaign: Campaign, objects: Path | None) -> Confinement:
    """The sandbox `[sandbox]` asks for around the proposer's commands; `objects` is the
    user's object store, which the workspace's git borrows."""
    sandbox = campaign.config.sandbox
    return confinement_for(
        sandbox.isolation,
        campaign.display_path(),
        state_dir=campaign.state_dir,
        root=campaign.root,
        objects=objects,
        share=campaign.config.share,
        deny_read=sandbox.deny_read,
        home_readable=sandbox.home_readable,
        writable=sandbox.writable,
        devices=sandbox.devices,
    )


def proposer_setup(
    campaign: Campaign,
    child: ChildRecord | None = None,
    confinement: Confinement | None = None,
) -> ProposerSetup:
    """The campaign as a proposer sees it. The commands a proposer runs write their
    process group to `child`, by default the campaign's `child.pgid`, and run inside
    `confinement` (by default, the environment allowlist only)."""
    cfg = campaign.config
    return ProposerSetup(
        name=campaign.name,
        source=campaign.display_path(),
        state_dir=campaign.state_dir,
        scope=tuple(cfg.scope),
        harness=tuple(cfg.harness),
        hidden=(cfg.judge.rubric,) if cfg.judge is not None else (),
        direction=cfg.metric.direction or "minimize",
        options=cfg.proposer.options(),
        child=child if child is not None else ChildRecord(campaign.state_dir / CHILD_RECORD),
        confinement=confinement or Confinement(state_dir=campaign.state_dir, root=campaign.root),
    )


def create_proposer(
    campaign: Campaign,
    child: ChildRecord | None = None,
    confinement: Confinement | None = None,
) -> Proposer:
    chain = campaign.config.proposers
    if len(chain) > 1:
        from autoresearch.proposers.chain import ProposerChain

        members = []
        for entry in chain:
            one = replace(
                campaign,
                config=campaign.config.model_copy(update={"proposer": entry, "proposers": []}),
            )
            members.append(create_proposer(one, child, confinement))
        return ProposerChain(members, [entry.kind for entry in chain])
    config = campaign.config.proposer
    options = parse_options(config, campaign.display_path())
    return REGISTRY[config.kind].create(options, proposer_setup(campaign, child, confinement))
