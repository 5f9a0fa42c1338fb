"""Sending a stage's MLLM requests at once (models/requests.py) and sizing edit batches from free memory."""
from __future__ import annotations

import pytest

from nemo_desktop.core.base.errors import JobCancelled
from nemo_desktop.core.models.batching import batch_from_free_memory
from nemo_desktop.core.models.protocols import ChatMessage, ChatRequest, ModelInfo
from nemo_desktop.core.models.requests import send_requests

GIB = 1 << 30


class ChatOnly:
    """A user's own MLLM: `chat` only, and only the arguments the protocol's first version had."""

    info = ModelInfo("user:chat-only", "user")

    def __init__(self, bad_seed=-1):
        self.calls, self.bad_seed = [], bad_seed

    def chat(self, messages, *, max_new_tokens=512, temperature=0.0, seed=None):
        self.calls.append((seed, temperature))
        if seed == self.bad_seed:
            raise ConnectionError("endpoint unreachable")
        return f"reply {seed}"


class WithBatch(ChatOnly):
    def __init__(self):
        super().__init__()
        self.batches = []

    def chat_batch(self, conversations, **kw):
        self.batches.append(len(conversations))
        return [self.chat(c, **kw) for c in conversations]


class BatchRaises(ChatOnly):
    def chat_requests(self, requests):
        raise RuntimeError("CUDA out of memory")  # the batch fails; alone each request fits


def _req(seed=None, temperature=0.0):
    return ChatRequest([ChatMessage.user("why?")], 16, temperature, seed)


def test_an_mllm_without_batching_gets_one_call_per_request_in_order():
    mllm = ChatOnly()
    assert send_requests(mllm, [_req(), _req(1, 0.7), _req(2, 0.7)]) == ["reply None", "reply 1", "reply 2"]
    assert mllm.calls == [(None, 0.0), (1, 0.7), (2, 0.7)]


def test_requests_with_the_same_settings_use_chat_batch():
    mllm = WithBatch()
    assert send_requests(mllm, [_req(), _req()]) == ["reply None", "reply None"]
    assert mllm.batches == [2]
    send_requests(mllm, [_req(1, 0.7), _req(2, 0.7)])  # different seeds: chat_batch has one seed
    assert mllm.batches == [2]


def test_one_failing_request_keeps_the_others_replies():
    out = send_requests(ChatOnly(bad_seed=2), [_req(1, 0.7), _req(2, 0.7), _req(3, 0.7)])
    assert out[0] == "reply 1" and out[2] == "reply 3" and isinstance(out[1], ConnectionError)


def test_a_failed_batch_is_asked_again_one_request_at_a_time():
    mllm = BatchRaises()
    assert send_requests(mllm, [_req(1, 0.7), _req(2, 0.7)]) == ["reply 1", "reply 2"]


def test_cancelling_is_never_swallowed():
    class Cancels(ChatOnly):
        def chat(self, messages, **kw):
            raise JobCancelled()

    with pytest.raises(JobCancelled):
        send_requests(Cancels(), [_req(), _req(1, 0.7)])


@pytest.mark.parametrize("free, per_image, expected", [
    (None, 2 * GIB, 1),            # off CUDA: one at a time
    (40 * GIB, None, 1),           # nothing measured yet: the first edit runs alone
    (40 * GIB, 4 * GIB, 8),        # 80 % of 40 GiB / 4 GiB = 8
    (10 * GIB, 4 * GIB, 2),
    (3 * GIB, 4 * GIB, 1),         # not even one more fits: still one (the edit itself decides)
    (500 * GIB, 1 * GIB, 8),       # capped
])
def test_edit_batch_from_free_memory(free, per_image, expected):
    assert batch_from_free_memory(free, per_image) == expected
