"""What a fix starts from: a stored explanation (SciTX and the other validated methods) turned into the fix's
settings. An image intervention gives the edit that removes the cause (applied to training images of the
predicted class) and the classes concerned; a zero-shot prompt intervention gives the true class's new prompt
(adopt it with prompts.measure_prompts)."""
from __future__ import annotations

from typing import Any, Mapping

from ...base.errors import ConfigError


def finding_from_explanation(payload: Mapping[str, Any]) -> dict[str, Any]:
    """{"instruction", "affected_classes", "predicted_classes"} or {"prompt": {class: text}} from a stored
    explanation's payload (its selected, validated candidate)."""
    from ...base.records import ExplanationResult

    try:
        result = ExplanationResult.from_dict(dict(payload))
    except (KeyError, TypeError) as exc:
        raise ConfigError("That stored result is not an explanation of a misclassified image.",
                          hint="Give the key of a SciTX (or other validated method's) result.", detail=repr(exc)) \
            from exc
    if result.selected_index is None or not result.candidates:
        raise ConfigError("The explanation has no selected hypothesis to fix from.")
    cand = result.candidates[result.selected_index]
    if not cand.intervention or cand.cei is None or cand.cei <= 0:
        raise ConfigError("The selected hypothesis was not validated (its intervention did not raise P(true)).",
                          hint="A fix needs a validated explanation: one whose edit raised the true class's "
                               "probability.", detail=f"CEI {cand.cei}")
    s = result.sample
    if cand.intervention_kind == "prompt":
        return {"prompt": {s.true_name: cand.intervention}, "hypothesis": cand.hypothesis, "cei": cand.cei}
    return {"instruction": cand.intervention, "affected_classes": s.true_name, "predicted_classes": s.pred_name,
            "hypothesis": cand.hypothesis, "cei": cand.cei}
