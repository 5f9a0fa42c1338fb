""""Try a fix…" from the workbench: the shown explanation's validated finding (its edit, the true and the predicted
class) fills the `fix` analysis' page in the Analyses pane, where the user adds the data folder, checks the plan
and runs it (progress, Cancel, the before/after report and the guard's verdict come with that page). The finding is
read in the core (core/analyses/fix/finding.py); this only reaches the other pane through the main window."""
from __future__ import annotations

from typing import Any, Sequence


def fix_settings(result: Any) -> dict | None:
    """The fix page's settings from an explanation, or None when it holds no validated image intervention."""
    from nemo_desktop.core.analyses.fix.finding import finding_from_explanation
    from nemo_desktop.core.base.errors import ConfigError

    try:
        finding = finding_from_explanation(result.to_dict())
    except ConfigError:
        return None
    if "instruction" not in finding:
        return None  # a zero-shot prompt: adopted with `nemo fix --prompt` (no training page)
    return {"data": "edit", "instruction": finding["instruction"], "affected_classes": finding["affected_classes"],
            "predicted_classes": finding["predicted_classes"],
            "failure_modes": "", "failure_mode": 0}  # clears a failure mode a page shown before was filled with


def try_fix(host: Any, results: Sequence[Any]) -> bool:
    """Open the fix page with the first shown result's finding; False (and a status line) when there is none."""
    settings = fix_settings(results[0]) if results else None
    if settings is None:
        host.show_status("A fix starts from a validated explanation: one whose edit raised the true class's "
                         "probability. Open or run one first.")
        return False
    host.show_pane("analyses").open_with("fix", None, settings)
    return True
