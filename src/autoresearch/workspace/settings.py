"""The git settings of the engine's own git directories, and the folders it makes."""

# Caches that tools write as a side effect; never a proposer's change.
TOOL_CACHES = (
    "__pycache__/",
    "*.py[cod]",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".hypothesis/",
    ".ipynb_checkpoints/",
)
# Folders of the campaign that the engine makes; a link planted at one is removed at start.
ENGINE_FOLDERS = ("logs", "prompts", "measure", "measure.git", "modules")
GIT_CONFIG = (
    "core.autocrlf=false",
    "core.safecrlf=false",
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=true",
    "gc.auto=0",
    "advice.detachedHead=false",
)

# For a command on a few named paths: threads that stat the whole index ahead of it cost
# more than they save.
NO_PRELOAD = {
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "core.preloadIndex",
    "GIT_CONFIG_VALUE_0": "false",
}
