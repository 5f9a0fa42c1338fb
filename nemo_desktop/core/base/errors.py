"""Errors that carry a user-facing message, what to do about it, and technical detail.

Every failure the user can meet is raised as a NemoError (or subclass); the CLI prints `message` and
`hint`, the GUI shows them in a dialog with `detail` expandable. Never put secrets into any field.
"""
from __future__ import annotations


class NemoError(Exception):
    """Base error: `message` says what happened, `hint` what to do, `detail` the technical story."""

    def __init__(self, message: str, *, hint: str | None = None, detail: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.detail = detail

    def user_text(self) -> str:
        from nemo_desktop.core.base.secrets import redact

        return redact(self.message if not self.hint else f"{self.message}\n{self.hint}")

    def to_dict(self) -> dict:
        """Serialisable form for dialogs, stored failures and JSON output; token shapes are redacted."""
        from nemo_desktop.core.base.secrets import redact

        def clean(text: str | None) -> str | None:
            return None if text is None else redact(text)

        return {"type": type(self).__name__, "message": clean(self.message), "hint": clean(self.hint),
                "detail": clean(self.detail)}


class JobCancelled(NemoError):
    """Raised inside a job when its cancellation token was set; completed results stay stored."""

    def __init__(self, message: str = "Cancelled by the user.", **kw):
        super().__init__(message, **kw)


class InputImageError(NemoError):
    """A file that is not a usable image (corrupt, truncated, empty, unsupported)."""


class ModelError(NemoError):
    """A model could not be found, downloaded, loaded or run."""


class WeightsNotFoundError(ModelError):
    """Weights are not in the local cache (and offline mode forbids downloading them)."""


class GatedModelError(ModelError):
    """A gated Hugging Face repository needs a token and an accepted license."""


class ModelNotRestoredError(ModelError):
    """A new model process could not load again the model the user had loaded (no other is used instead)."""


class OutOfMemoryError(ModelError):
    """The GPU (or host) ran out of memory; the process stays usable."""


class MalformedOutputError(NemoError):
    """A model answered with something that could not be parsed."""


class CutOffOutputError(MalformedOutputError):
    """The reply stops inside a JSON object it opened (cut short, usually at the token limit): what it holds
    is not a whole answer, so it is not read as one."""


class StoreError(NemoError):
    """The results store or cache directory is unusable (corrupt, newer schema, unwritable)."""


class ConfigError(NemoError):
    """Settings, paths or command-line arguments are invalid."""
