"""The per-sample result records (ExplanationResult and its parts) live in core/records.py, below the data
and metrics layers that use them too; methods import them from here as before."""
from ..records import Candidate, ClassScore, ExplanationResult, Observation, SampleInfo

__all__ = ["Candidate", "ClassScore", "ExplanationResult", "Observation", "SampleInfo"]
