"""Error types of the compiler.

`Unsupported` is raised by the translator when it meets code it cannot capture (the frame then runs
unmodified, and the reason is recorded); it carries the user's ``file:line``. `FullGraphError` is
what a user sees with ``fullgraph=True``. `UserCodeError` is an `Unsupported` for an error of the
user's own code met while tracing (``~0.5``, ``len(3)``): the frame runs in plain Python so that
Python raises the user's exception, with the user's traceback, even with ``fullgraph=True``.
`InternalError` wraps a bug in the compiler itself: by default it is reported as a warning and the
frame falls back to plain Python.
"""

from __future__ import annotations

__all__ = ["DynamoError", "Unsupported", "DataDependent", "UserCodeError", "FullGraphError",
           "InternalError", "BackendError"]


class DynamoError(Exception):
    """Base class of every error npdynamo raises on purpose."""


class Unsupported(DynamoError):
    """The translator cannot capture this code; `reason` says what and `location` where."""

    def __init__(self, reason: str, location: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.location = location

    def __str__(self) -> str:
        return f"{self.reason} (at {self.location})" if self.location else self.reason


class DataDependent(Unsupported):
    """Python needs a value the graph only computes (the truth of an array element or of a
    reduction: data-dependent control flow)."""


class UserCodeError(Unsupported):
    """The user's code raises `error` (an exception type) for the traced values; plain Python must
    run it so the user sees their own exception."""

    def __init__(self, reason: str, error: type[BaseException],
                 location: str | None = None) -> None:
        super().__init__(reason, location)
        self.error = error


class FullGraphError(DynamoError):
    """Raised with ``fullgraph=True`` when a frame could not be captured as one whole graph."""


class InternalError(DynamoError):
    """A bug in npdynamo; the message names the frame and the original exception."""


class BackendError(DynamoError):
    """A backend failed to compile a graph."""
