"""The transformers-llm family (text-only chat models) on a tiny random Llama saved and loaded back through the
real loader, and as the explainer and evaluator of a model-difference run (replies are garbage: they must be
reported as unreadable, never crash the run)."""
from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from nemo_desktop.core.base.errors import ConfigError  # noqa: E402
from nemo_desktop.core.models.protocols import ChatMessage  # noqa: E402
from nemo_desktop.core.models.families import LoadOptions, ModelSpec, load_model  # noqa: E402

CPU = LoadOptions(device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    from fixtures_tiny.llm import build_tiny_llama

    folder = build_tiny_llama(tmp_path_factory.mktemp("llm"))
    return load_model(ModelSpec("mllm", "transformers-llm", str(folder), options={"batch_size": 2}), CPU)


def test_chat_greedy_and_seeded_sampling(llm):
    assert llm.info.family == "transformers-llm" and llm.info.revision.startswith("local-")
    msg = [ChatMessage.user("Which model performs better given the condition: digit=3?")]
    a = llm.chat(msg, max_new_tokens=8)
    assert isinstance(a, str) and a == llm.chat(msg, max_new_tokens=8)  # greedy despite the checkpoint's sampling
    s1 = llm.chat(msg, max_new_tokens=8, temperature=1.0, seed=3)
    assert s1 == llm.chat(msg, max_new_tokens=8, temperature=1.0, seed=3)
    replies = llm.chat_batch([msg, [ChatMessage.user("Explain.")], msg], max_new_tokens=8)
    assert len(replies) == 3 and replies[0] == replies[2] == a  # left padding keeps batched rows equal
    assert llm.last_usage["image_tokens"] == [0, 0, 0] if len(llm.last_usage["image_tokens"]) == 3 else True


def test_a_reply_says_whether_it_reached_max_new_tokens(llm):
    """The multimodal adapter's generation code: a text cut at the limit is marked so (issue 27 §3)."""
    msg = [ChatMessage.user("Which model performs better given the condition: digit=3?")]
    a = llm.chat(msg, max_new_tokens=8)
    assert a.finish_reason == "stop" or (a.finish_reason, a.completion_tokens) == ("length", 8)
    one = llm.chat(msg, max_new_tokens=1)  # greedy: the same first token, cut there unless it ended the reply
    ended_at_once = (a.finish_reason, a.completion_tokens) == ("stop", 1)
    assert (one.finish_reason, one.completion_tokens) == ("stop" if ended_at_once else "length", 1)


def test_images_are_refused_clearly(llm):
    from PIL import Image

    with pytest.raises(ConfigError, match="text-only"):
        llm.chat([ChatMessage.user(Image.new("RGB", (8, 8)), "What is this?")])


def test_model_diff_runs_on_it_and_reports_unreadable_replies(llm, tmp_path):
    from fixtures_tiny.digits_classifier import DigitsMLPClassifier, load_digits_arrays
    from nemo_desktop.core.analyses.model_diff import ModelDiffConfig, SyntheticDigits
    from nemo_desktop.core.registry import Components, build_analysis

    X, y = load_digits_arrays()
    a, b = DigitsMLPClassifier.train(X, y, hidden=16, seed=0), DigitsMLPClassifier.train(X[::3], y[::3], seed=2)
    config = ModelDiffConfig(samples_per_condition=2, initial_conditions=2, iterations=1, explore_size=2,
                             beam_size=1, test_conditions=4, max_new_tokens=16, evaluator_max_new_tokens=4)
    result = build_analysis("model-diff", Components(classifier=a, classifier_b=b, mllm=llm,
                                                     generator=SyntheticDigits(size=16)), config)()
    summ = result.explanation("summarization")
    assert summ.error and "Reply:" in summ.error  # a garbage reply is recorded as the method's failure
    opt = result.explanation("optimization")
    assert opt.error and "no readable explanation" in opt.error and opt.score is None
    raw = result.explanation("raw-differences")
    assert raw.score.n == 4 and raw.score.unparsed == 4  # every garbage answer counted, none crashed the run
