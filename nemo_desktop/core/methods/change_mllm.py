"""ChangeMLLM (NEMO paper §4.1.3, appendix A.2): change captioning between the misclassified image and a
correctly classified reference, with the A.2 two-image prompt (JSON `visual_differences`, `cause_of_error`).

    pipe = ChangeMLLMPipeline(classifier, mllm, store=store, reference=index, config=ChangeMLLMConfig())
    result = pipe(image, true_label, ctx)   # evidence["Reference image"] = "reference"

The reference is the correctly classified image of the TRUE class nearest to the query in the classifier's
feature space (the reference index and the exact retrieval of SciTX's survey, Set A with k = 1; the query's
own file is excluded). The paper allows a reference "from either the ground-truth or predicted class"; we
use the true class, and fall back to the nearest correct reference of the predicted class only when the
index has none of the true class (noted in the result). The MLLM gets the misclassified image first, the
reference second, then the prompt. `change-mllm-validated` draws M replies for the same pair and keeps the
one with the largest CEI (validation.py); the `visual_differences` of every candidate are kept in
`manifest["details"]["visual_differences"]`.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from PIL import Image

from ..base.errors import ConfigError, NemoError
from ..base.job_context import JobContext
from ..models.protocols import ChatMessage
from .intervention import UnitCache, sha_text, unit_key
from .reference import embed_query, load_reference_image, reference_part
from ..registry import Inputs
from ..registry.methods import method_entry
from ..base.records import Observation
from .validation import VALIDATED_SUFFIX, BaselineConfig, BaselinePipeline, Proposal, draw_hypotheses

VERSION = "1"  # bump when this method's results change for the same inputs (part of every key)
METHOD = "change-mllm"
REFERENCE = "reference"


@dataclass
class ChangeMLLMConfig(BaselineConfig):
    hypothesis_max_new_tokens: int = 512
    reference_max_side: int = 768  # the stored copy of the reference (evidence); the MLLM gets the full image


@method_entry(METHOD, config=ChangeMLLMConfig, version=VERSION,
                 inputs=Inputs(mllm="required", editor="optional", reference="required"),
                 description="ChangeMLLM: an MLLM compares the image with a correct reference of the true class "
                             "(paper baseline, A.2).")
class ChangeMLLMPipeline(BaselinePipeline):
    """ChangeMLLM with its components injected; one `__call__` explains one image."""

    METHOD = METHOD
    CONFIG = ChangeMLLMConfig
    PROMPT = "change_mllm"

    def _identity(self) -> dict[str, Any]:
        return {"reference": reference_part(self.reference)}

    def uses_query_embedding(self) -> bool:
        return self.reference is not None

    def _propose(self, ctx: JobContext, units: UnitCache, img: Image.Image, image_sha: str, file_sha: str | None,
                 clf: dict, sample: Any, n: int) -> Proposal:
        cfg: ChangeMLLMConfig = self.config  # type: ignore[assignment]
        if self.reference is None:
            raise ConfigError("ChangeMLLM compares the image with a correctly classified reference image, but no "
                              "reference index was given.",
                              hint="Give a reference dataset or index (--reference), indexed with this classifier.")
        obs, notes = self._find_reference(ctx, units, img, image_sha, file_sha, clf, sample)
        ref_img = load_reference_image(self.reference, obs)
        prompt = self.prompt.render(true_cls_name=sample.true_name, prediction_cls_name=sample.pred_name,
                                    src_cls_name=obs.label_name)
        candidates, outcomes, transient = draw_hypotheses(
            ctx, units, self.mllm, [ChatMessage.user(img, ref_img, prompt)], m=n,
            key_parts={"image_sha256": image_sha, "reference_sha256": obs.image_sha256,
                       "prompt_sha256": sha_text(prompt)},
            prompt=self.prompt, repair=self.repair, seed=cfg.seed, sampling=cfg.sampling,
            max_extra_draws=cfg.max_extra_draws, max_new_tokens=cfg.hypothesis_max_new_tokens)
        differences = [(o.get("parsed") or {}).get("visual_differences") for o in outcomes]
        stored = ref_img.copy()
        stored.thumbnail((cfg.reference_max_side, cfg.reference_max_side))
        obs.thumbnail_artifact = REFERENCE
        return Proposal(candidates=candidates, transient=transient, observations=[obs],
                        evidence={"Reference image": REFERENCE}, artifacts={REFERENCE: stored}, notes=notes,
                        details={"reference": asdict(obs), "visual_differences": differences})

    def _find_reference(self, ctx: JobContext, units: UnitCache, img: Image.Image, image_sha: str,
                        file_sha: str | None, clf: dict, sample: Any) -> tuple[Observation, list[str]]:
        key = unit_key("change-reference", image_sha256=image_sha, exclude_sha256=file_sha, classifier=clf,
                       reference=reference_part(self.reference), true_index=sample.true_index,
                       pred_index=sample.pred_index)
        hit = units.get(key)
        if hit is not None:
            return Observation(**hit.payload["observation"]), list(hit.payload["notes"])
        from ..data.retrieval import retrieve_observations

        ctx.check_cancelled()
        ctx.progress("Finding the reference image", 0, 1)
        query = embed_query(units, self.classifier, img, image_sha, clf)  # shared with SciTX's survey
        notes: list[str] = []
        common = dict(k_random=0, query_sha256=file_sha or image_sha)
        found = retrieve_observations(self.reference, query, sample.true_index, sample.pred_index, k_true=1,
                                      k_pred=0, **common).by_set("A")
        if not found:
            found = retrieve_observations(self.reference, query, sample.true_index, sample.pred_index, k_true=0,
                                          k_pred=1, **common).by_set("B")
            if not found:
                raise NemoError(f"The reference index has no correctly classified image of the true class "
                                f"'{sample.true_name}' or of the predicted class '{sample.pred_name}'.",
                                hint="ChangeMLLM needs one: add images of these classes to the reference dataset.")
            notes.append(f"No correctly classified reference of the true class '{sample.true_name}': the "
                         f"reference is of the predicted class '{sample.pred_name}'.")
        obs = found[0]
        units.put(key, "change-reference", {"observation": asdict(obs), "notes": notes})
        ctx.progress("Finding the reference image", 1, 1)
        return obs, notes


@method_entry(METHOD + VALIDATED_SUFFIX, config=ChangeMLLMConfig, version=VERSION,
                 inputs=Inputs(mllm="required", editor="interventions", reference="required"),
                 description="ChangeMLLM with validation: M replies, the one with the largest CEI (Table 2).")
class ChangeMLLMValidatedPipeline(ChangeMLLMPipeline):
    VALIDATED = True


# The module's registry entries, named by its entry point (pyproject.toml, nemo_desktop.analyses).
ANALYSES = (ChangeMLLMPipeline.ENTRY, ChangeMLLMValidatedPipeline.ENTRY)
