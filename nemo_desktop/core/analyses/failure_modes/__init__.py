"""Dataset-level failure-mode discovery (LBEE; Csurka et al., "What could go wrong?", ECCV-W 2024).

Split an indexed dataset into easy and hard images, cluster each set in a joint image-text space, pair
each hard cluster with its nearest easy cluster and describe it with sentences chosen by TopS, PDiff,
SetDiff or FPDiff; evaluate with AHR, ACR, TPR and JI when image-sentence relevance is known.
Modules: config (settings), split (step 1), clustering (step 2, scipy Ward), ranking (steps 3-4),
metrics (evaluation), sentences (the sentence set), embeddings (stored joint embeddings), relevance
(Gamma from CSV attributes), vqa (Gamma from yes/no questions to MLLMs), generation (LLM-written sentence
sets), discover (one set, arrays in, GroupResult out), pipeline (the analysis), result (the JSON-ready result),
analysis (the `failure-modes` registry entry), describe (each mode as a sentence with its evidence),
by_sentence (images ranked by a sentence), validate (a sentence checked with CEI).
"""
from .config import METHODS, SPLITS, FailureModesConfig
from .embeddings import JointEmbedder, image_embeddings, text_embeddings
from .generation import DEFAULT_TOPICS, GeneratedSentences, generate_sentences
from .pipeline import FailureModesPipeline
from .relevance import AttributeRelevance, Relevance
from .result import ANALYSIS, KIND, STORE_KIND, VERSION, EasyCluster, FailureModesResult, GroupResult, HardCluster
from .sentences import SentenceSet, load_sentence_sets
from .vqa import VqaRelevance

__all__ = ["ANALYSIS", "DEFAULT_TOPICS", "GeneratedSentences", "generate_sentences", "KIND", "METHODS", "SPLITS", "STORE_KIND", "VERSION", "AttributeRelevance", "EasyCluster",
           "FailureModesConfig", "FailureModesPipeline", "FailureModesResult", "GroupResult", "HardCluster",
           "JointEmbedder", "Relevance", "SentenceSet", "image_embeddings", "load_sentence_sets", "text_embeddings",
           "VqaRelevance"]
