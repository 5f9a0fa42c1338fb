"""Model differences (seed 002): explain in words how two vision classifiers differ.

Qt-free core: condition sources behind one generator protocol, per-condition accuracy differences, the three
explainers (Raw Differences, Summarization, Optimization) and their scores (Completeness, Density, Token Length).
"""
from .conditions import Attribute, Condition, ConditionSpace, load_grid, load_open_conditions
from .config import METHODS, OBJECTIVES, ModelDiffConfig
from .differences import ConditionMeasurement, DifferenceMeter
from .generators import ConditionGenerator
from .labels import LabelMatch, PromptedClassifier, load_prompt_set, match_labels
from .metrics import TokenCounter, completeness, default_token_counter, drop_words, parse_answer, words_to_drop
from .pipeline import ANALYSIS, ModelDiffPipeline
from .result import (CandidateRecord, ExplanationScore, ExploredCondition, IterationRecord, MethodExplanation,
                     ModelDiffResult)
from .synthetic_digits import SyntheticDigits, render_digit, training_set

__all__ = ["ANALYSIS", "METHODS", "OBJECTIVES", "Attribute", "CandidateRecord", "Condition", "ConditionGenerator",
           "ConditionMeasurement", "ConditionSpace", "DifferenceMeter", "ExplanationScore", "ExploredCondition",
           "IterationRecord", "LabelMatch", "MethodExplanation", "ModelDiffConfig", "ModelDiffPipeline",
           "ModelDiffResult", "PromptedClassifier", "SyntheticDigits", "TokenCounter", "completeness",
           "default_token_counter", "drop_words", "load_grid", "load_open_conditions", "load_prompt_set",
           "match_labels", "parse_answer", "render_digit", "training_set", "words_to_drop"]
