"""Send several MLLM requests at once, whatever the MLLM offers.

A stage (a sample's M hypothesis draws, its M interventions) hands all its requests over in one call here. An
MLLM with `chat_requests` (NEMO's transformers and OpenAI-compatible adapters) gets them as one batch: one
generate() call per chunk locally, concurrent HTTP requests to a server. Any other MLLM (a user's own adapter,
a test double) gets `chat_batch` when every request has the same settings, else one `chat` call per request,
in order: the replies are then exactly those of the old one-call-at-a-time code.

One request's failure must not cost the others their replies: a batch that raises is asked again one request
at a time, and each request gets its own reply or its own exception.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..base.errors import JobCancelled, ModelError
from .protocols import ChatMessage, ChatRequest


class ChatBatchFromRequests:
    """`MultimodalLLM.chat_batch` for an adapter that implements `chat_requests`: every conversation with the
    same settings."""

    chat_requests: Any  # the adapter's own

    def chat_batch(self, conversations: Sequence[Sequence[ChatMessage]], *, max_new_tokens: int | None = None,
                   temperature: float = 0.0, seed: int | None = None, top_p: float | None = None,
                   top_k: int | None = None, min_p: float | None = None) -> list[str]:
        return self.chat_requests([ChatRequest(c, max_new_tokens, temperature, seed, top_p, top_k, min_p)
                                   for c in conversations])


def send_requests(mllm: Any, requests: Sequence[ChatRequest]) -> list[Any]:
    """The reply to each request, in order, or the exception its call raised (JobCancelled is raised)."""
    requests = list(requests)
    if len(requests) > 1:
        try:
            return _batched(mllm, requests)
        except JobCancelled:
            raise
        except Exception:  # noqa: BLE001 - asked again one at a time below, each keeps its own outcome
            pass
    return [_one(mllm, r) for r in requests]


def _batched(mllm: Any, requests: list[ChatRequest]) -> list[Any]:
    settings = [r.chat_kwargs() for r in requests]
    if callable(getattr(mllm, "chat_requests", None)):
        replies = list(mllm.chat_requests(requests))
    elif all(s == settings[0] for s in settings) and callable(getattr(mllm, "chat_batch", None)):
        replies = list(mllm.chat_batch([r.messages for r in requests], **settings[0]))
    else:
        return [_one(mllm, r) for r in requests]
    if len(replies) != len(requests):
        raise ModelError(f"The MLLM returned {len(replies)} replies to {len(requests)} requests.")
    return replies


def _one(mllm: Any, request: ChatRequest) -> Any:
    try:
        return mllm.chat(request.messages, **request.chat_kwargs())
    except JobCancelled:
        raise
    except Exception as exc:  # noqa: BLE001 - the caller records it on this request
        return exc
