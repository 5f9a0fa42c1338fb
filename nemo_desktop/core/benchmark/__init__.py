"""The NEMO benchmark (paper §4.1, appendix B): dataset adapters, misclassified-sample selection, LLM Match
judges, a resumable and shardable runner over the results store, shard merging, and the paper's tables.

Modules: datasets (benchmark layouts and evaluation protocols), views (ImageNet-1k classifiers seen through a
benchmark's classes), selection, judge (LLM Match), config, runner, merge, tables, records (what is stored).
Importing this package is cheap: models and torch load only when a run needs them.
"""
