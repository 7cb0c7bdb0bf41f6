"""Errors a user can cause, each carrying one sentence and the exit code the CLI uses."""

from __future__ import annotations


class AutoresearchError(Exception):
    """A failure the user can act on; the CLI prints the message without a traceback."""

    exit_code = 1


class ConfigError(AutoresearchError):
    """The configuration or the command line is wrong (exit 2)."""

    exit_code = 2


class GitError(AutoresearchError):
    """A git command failed or the repository is not usable for a campaign."""

    exit_code = 1


class CampaignLocked(AutoresearchError):
    """Another engine already runs this campaign."""

    exit_code = 1


class WorkspaceHijacked(AutoresearchError):
    """A folder the engine owns under `.autoresearch/` is not the one it made (a symbolic
    link, or another folder in its place): the engine halts without touching it (exit 3,
    as for a tampered judge)."""

    exit_code = 3
