"""Issue 43 §5: an error written for the command line, said in the page's words (registry/page_words.py)."""
from __future__ import annotations


def test_flags_become_the_pages_labels_and_a_choice_stays_a_choice():
    from nemo_desktop.core.registry import get_analysis
    from nemo_desktop.core.registry.page_words import in_page_words

    fix = get_analysis("fix")
    said = in_page_words("Give the validated edit (--instruction), a sentence (--sentence with --generator), or "
                         "choose --data augment for the control; --no-such-flag stays.", fix)
    assert said == ("Give the validated edit (“Edit that removes the cause”), a sentence (“Failure mode's sentence” "
                    "with “Condition source”), or choose “Targeted data”: augment for the control; --no-such-flag "
                    "stays.")
    assert in_page_words("Seed (--seed) must be at least 0, not -1.", fix) == "“Seed” must be at least 0, not -1."
    assert in_page_words("--sentence with text", fix) == "“Failure mode's sentence” with text"  # not a choice
    assert in_page_words(None, fix) is None and in_page_words("no flags", fix) == "no flags"
