"""One filled-in example of every stored result type (nested parts, optional fields set and unset), built by
constructors only: tests/data/results_v0/*.json hold what the code before the shared result base (issue 41) wrote
for these examples, and test_result_base.py checks that they still load to the same objects."""
from __future__ import annotations

from nemo_desktop.core.analyses.competency.results import (CompetencyBenchResult, CompetencyCounterfactualResult,
                                                           CompetencyScore, CounterfactualOutput,
                                                           EstimatorFitResult, GeneratorMetrics)
from nemo_desktop.core.analyses.competency.score_set import CompetencyScoreSet, ScoredImage
from nemo_desktop.core.analyses.failure_modes.result import (EasyCluster, FailureModesResult, GroupResult,
                                                             HardCluster)
from nemo_desktop.core.analyses.fix.result import FixResult
from nemo_desktop.core.analyses.global_explanation import (GlobalAnalysisResult, GlobalExplanation, GlobalScore,
                                                           SampleScore)
from nemo_desktop.core.analyses.model_diff.attribution import Attribution
from nemo_desktop.core.analyses.model_diff.conditions import Condition
from nemo_desktop.core.analyses.model_diff.differences import ConditionMeasurement
from nemo_desktop.core.analyses.model_diff.result import (CandidateRecord, Evidence, EvidenceImage,
                                                          ExplanationScore, ExploredCondition, IterationRecord,
                                                          MethodExplanation, ModelDiffResult)
from nemo_desktop.core.base.records import Candidate, ClassScore, ExplanationResult, Observation, SampleInfo


def _score(c: float = 0.42) -> CompetencyScore:
    return CompetencyScore(c, 0.7, 0.6, 0.031, 1.5, 3, "cat")


def explanation() -> ExplanationResult:
    top = [ClassScore(3, "cat", 0.6), ClassScore(5, "dog", 0.3)]
    sample = SampleInfo("/x/cat.png", "ab" * 32, 3, "cat", 5, "dog", 0.3, 0.6, top5=top, image_artifact="input")
    cands = [Candidate("the ears are hidden", "image", "show the ears", "edit_0", 0.3, 0.7, 40.0, top, top[::-1],
                       edit_distance=0.12, edit_distance_metric="lpips-alex", edit_structure=0.9,
                       edit_verdict="local", edit_structure_reading="removal", edit_verdict_reason="kept"),
             Candidate("blurry", error="the editor failed", raw_reply="...")]
    obs = [Observation("A", "/ref/a.png", "cd" * 32, 3, "cat", similarity=0.8, thumbnail_artifact="obs_0"),
           Observation("C", "/ref/c.png", "ef" * 32, 1, "car")]
    return ExplanationResult("scitx", sample, "the ears are hidden", 0, 40.0, cands, obs, {"gradcam": "cam"},
                             {"survey": 1.5}, {"models": {"mllm": {"id": "m"}}, "seed": 0}, ["a note"], "k" * 64)


def estimator_fit() -> EstimatorFitResult:
    return EstimatorFitResult({"format": "f", "training": {"epochs": 2}}, {"mean": [0.1], "std": [0.2]},
                              {"z": 1.5}, ["few images"], result_key="e" * 64)


def competency_cf() -> CompetencyCounterfactualResult:
    outs = [CounterfactualOutput("latent", "cf_latent", "diff_latent", 0.4, 0.95, _score(0.95), True, 12, 0.1,
                                 0.9, 0.8, 2.5, "brighter"),
            CounterfactualOutput("pixel", error="did not converge")]
    return CompetencyCounterfactualResult("aa" * 32, _score(), outs, "looks odd", "/x/a.png", "input",
                                          {"reconstruction": "recon"}, ["n"], {"total": 3.0}, {"seed": 1}, "c" * 64)


def competency_bench() -> CompetencyBenchResult:
    rows = [GeneratorMetrics("orig", 10, 0, 0.0, None, None, None, 12.0, 0.5, 0.0),
            GeneratorMetrics("latent", 10, 7, 0.7, 0.1, 0.9, 0.8, 9.0, 0.3, 1.2, ["slow"], available=False)]
    return CompetencyBenchResult(rows, "classifier", 50, {"seed": 0}, "b" * 64)


def competency_scores() -> CompetencyScoreSet:
    return CompetencyScoreSet([ScoredImage("/x/a.png", _score(), 3), ScoredImage("/x/b.png", _score(0.95))], 0.9,
                              {"/x/c.png": "unreadable"}, {"seed": 0}, "s" * 64)


def fix() -> FixResult:
    overall = {"before": 0.5, "after": 0.75, "change": 25.0, "n": 8}
    return FixResult({"mode": "head", "epochs": 3}, {"id": "toy", "revision": "1", "family": "timm"},
                     {"fingerprint": "f" * 64, "counts": {"train": 10}}, [{"source": "finding", "count": 4}],
                     {"mode": "head", "trainable": 10, "total": 100},
                     {"epochs": 3, "history": [{"epoch": 1, "val_loss": 0.5}]}, {"overall": overall},
                     {"overall": overall}, {"verdict": "kept", "keep": True}, None, {"date": "2026-01-01"},
                     ["note"], {"train": 1.0}, "x" * 64,
                     {"affected": {"sha256": ["a"], "before": [1], "after": [3]}})


def failure_modes() -> FailureModesResult:
    hard = HardCluster(0, 3, 0.33, 0.5, 0.9, [1, 2, 3], ["/a", "/b", "/c"], [2, 1], [{"true": "cat", "pred": "dog",
                                                                                       "count": 2}], 0, 0.7,
                       {"tops": [{"index": 0, "text": "dark", "v_h": 0.3, "v_e": 0.1, "d": 0.2}]}, {"tops": False},
                       {"tops": 0})
    easy = EasyCluster(0, 5, 1.0, [4, 5, 6, 7, 8], [4])
    group = GroupResult("cat", 3, 8, 0.75, {"kind": "entropy"}, 0.1, "auto", [hard], [easy], {"tops": [0]},
                        {"subsample": 8}, ["dark cat"], {"ground_truth": None}, ["few"])
    return FailureModesResult({"methods": ["tops"]}, {"index_id": "i"}, [{"text": "dark {class}"}], [group],
                              {"tops": {"p": 1.0}}, {"seed": 0}, ["n"], {"t": 1.0}, "f" * 64, 2,
                              {"settings": {}, "validations": []}, {"k": 3, "value": 0.5, "n": 1})


def model_diff() -> ModelDiffResult:
    cond = Condition((("weather", "snow"), ("time", "night")), "car")
    m = ConditionMeasurement(cond, 8, 0.75, 0.5, ("car", "bus"), ("bus", "bus"))
    score = ExplanationScore(0.6, 4, 20, 0.1, unparsed=1)
    cand = CandidateRecord("t1-0", "A is better at night", "t0-0", "more detail", score, 0.7, True)
    it = IterationRecord(1, [ExploredCondition({"weather": "snow"}, "grid", True, proposal={"w": "snow"})],
                         ["- line"], [cand], [CandidateRecord("t1-1", "x", error="unreadable")], ["t1-0"], 0.7, 4,
                         2, 8, 1.5, "reply")
    attribution = Attribution(["A", "is"], [0.1, -0.05], [1.0, 0.0], 1, 4, 0.6, 10, [0.5, 0.4], 0.3)
    expl = [MethodExplanation("optimization", "A is better at night", score, 4, attribution=attribution),
            MethodExplanation("raw-differences", "", None, 0, "no differences")]
    ev = [Evidence({"weather": "snow"}, "weather=snow", 8, 0.75, 0.5, [EvidenceImage("ev_0", "car", "car", "bus")])]
    return ModelDiffResult(explanations=expl, observed=[m], test=[m], iterations=[it], evidence=ev,
                           manifest={"seed": 0}, timings={"t": 2.0}, notes=["n"], result_key="m" * 64)


def global_analysis() -> GlobalAnalysisResult:
    ge = GlobalExplanation("cats are dark", 3, "run1", "scitx", ["a", "b"], None, "raw", {"seed": 0}, {"t": 1.0},
                           "g" * 64)
    gs = GlobalScore("g" * 64, [SampleScore("i1", "cat", "dog", 10.0, 20.0, 0.2, 0.4, "brighten", "ed", None),
                                SampleScore("i2", "cat", "dog", None, None, error="failed")], 10.0, 20.0, 1,
                     ["n"], {"seed": 0}, "h" * 64)
    return GlobalAnalysisResult(ge, gs)


EXAMPLES = {"explanation": explanation, "estimator_fit": estimator_fit, "competency_cf": competency_cf,
            "competency_bench": competency_bench, "competency_scores": competency_scores, "fix": fix,
            "failure_modes": failure_modes, "model_diff": model_diff, "global_analysis": global_analysis}
