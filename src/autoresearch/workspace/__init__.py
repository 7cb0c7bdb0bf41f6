"""The proposer's workspace and the engine's git bookkeeping of it, by concept: the folder
and its git directory (`folder.Workspace`), what a candidate is (`candidate`), the user's
checkout (`checkout`), the proposer's own `.git` (`private_git`), submodules
(`submodules`) and the git settings (`settings`)."""

from autoresearch.workspace.candidate import Candidate, Change, Scan, outermost, under
from autoresearch.workspace.checkout import (
    checkout_changes,
    checkout_state,
    ensure_state_dir,
    head_of,
)
from autoresearch.workspace.folder import Workspace
from autoresearch.workspace.private_git import link_shares
from autoresearch.workspace.settings import ENGINE_FOLDERS, GIT_CONFIG, NO_PRELOAD, TOOL_CACHES

__all__ = [
    "ENGINE_FOLDERS",
    "GIT_CONFIG",
    "NO_PRELOAD",
    "TOOL_CACHES",
    "Candidate",
    "Change",
    "Scan",
    "Workspace",
    "checkout_changes",
    "checkout_state",
    "ensure_state_dir",
    "head_of",
    "link_shares",
    "outermost",
    "under",
]
