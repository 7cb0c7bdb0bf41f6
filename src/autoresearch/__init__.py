"""autoresearch: keep a change only if the number really got better.

The package's folders are its floors (docs/architecture.md). Modules that lived at the
package's root before it had folders are still importable under their old names, as the
same module objects, with a DeprecationWarning: code written against
`autoresearch.decide` or `from autoresearch import ledger` keeps working.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

__version__ = "0.1.0"

MOVED: dict[str, str] = {
    "ablation": "checks.ablation",
    "agent_mode": "agent.mode",
    "agent_setup": "agent.setup",
    "approval": "checks.approval",
    "auto_rule": "stats.auto_rule",
    "calibration": "stats.calibration",
    "cli_agent": "agent.commands",
    "cli_confirm": "cli.confirm",
    "confinement": "isolation.confinement",
    "confirm": "measure.confirm",
    "criteria": "config.criteria",
    "dashboard": "views.dashboard",
    "decide": "stats.decide",
    "demo": "cli.demo",
    "edits": "proposers.edits",
    "escalation": "learning.escalation",
    "escalation_config": "config.escalation",
    "evaluation": "measure.evaluation",
    "expression": "measure.expression",
    "guidance": "learning.guidance",
    "holdout": "checks.holdout",
    "housekeeping": "cli.housekeeping",
    "ideas": "learning.ideas",
    "importing": "agent.importing",
    "init_template": "config.template",
    "integrity": "measure.integrity",
    "judge": "measure.judge",
    "landlock": "isolation.landlock",
    "ledger": "store.ledger",
    "lifecycle": "engine.lifecycle",
    "live": "views.live",
    "liveness": "store.liveness",
    "machine": "isolation.machine",
    "materialise": "measure.materialise",
    "mcp_server": "agent.mcp_server",
    "measure_tree": "measure.tree",
    "memory": "learning.memory",
    "metrics": "measure.metrics",
    "owned": "isolation.owned",
    "paired": "stats.paired",
    "params": "proposers.params",
    "preflight": "cli.preflight",
    "process": "isolation.process",
    "prompt": "learning.prompt",
    "proposing": "engine.proposing",
    "readout": "measure.readout",
    "recording": "engine.recording",
    "render": "views.render",
    "repeats": "measure.repeats",
    "replay": "checks.replay",
    "report": "views.report",
    "results": "store.results",
    "review": "checks.review",
    "rework": "checks.rework",
    "robust": "stats.robust",
    "sample_book": "stats.sample_book",
    "sandbox": "isolation.sandbox",
    "screening": "engine.screening",
    "session": "agent.session",
    "simplicity": "checks.simplicity",
    "startup": "engine.startup",
    "status": "views.status",
    "stopping": "engine.stopping",
    "summary": "store.summary",
    "tracking": "views.tracking",
    "verify": "checks.verify",
    "watch": "isolation.watch",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an old module name with the module that now holds it."""

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        old = fullname.removeprefix(f"{__name__}.")
        if old == fullname or old not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        old = spec.name.removeprefix(f"{__name__}.")
        new = f"{__name__}.{MOVED[old]}"
        warnings.warn(f"{spec.name} is now {new}", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module: ModuleType) -> None:
        return None  # the module that now holds it ran already


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())


def __getattr__(name: str) -> ModuleType:
    if name in MOVED:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
