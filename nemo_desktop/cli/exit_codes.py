"""The `nemo` command's exit codes, one scheme for every command (documented in docs/guide/cli.md and `nemo --help`).

    0  success
    1  partial: some items failed, the others completed (their results are in the store)
    2  usage error (bad arguments, unknown model or method, a file that is not there)
    3  runtime error (nothing completed: a model failed to load, every request failed, ...)
    130 interrupted (Ctrl-C); completed results are kept and a re-run resumes
    141 the reader of stdout went away (`nemo ... | head`): the command stops quietly, as Unix tools do

A batch command (predict, index, bench run, failure-modes, competency score) counts each input that fails,
an unreadable image included, as a failed item: 1 when some completed, 3 when none did (`for_counts`). 2 is
for what is refused before any work: arguments, an unknown model, a single input file (explain's IMAGE, a
config) that is missing or unreadable, an output path whose folder does not exist.
"""
from __future__ import annotations

SUCCESS = 0
PARTIAL = 1
USAGE = 2
RUNTIME = 3
INTERRUPTED = 130
BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell reports for a Unix tool whose reader left


def for_counts(done: int, failed: int) -> int:
    """The exit code of a batch command: success, partial, or runtime error when nothing completed."""
    if failed == 0:
        return SUCCESS
    return PARTIAL if done > 0 else RUNTIME
