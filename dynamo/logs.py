"""Logging by topic.

Each topic is a logger named ``dynamo.<topic>``: ``graph_code`` (generated graph code),
``guards``, ``recompiles``, ``bytecode`` (original and transformed bytecode side by side),
``graph_breaks`` (frames that could not be captured, with the reason and the user's file:line),
``kernels`` (C backend fusion report). Turn topics on with the environment variable
``DYNAMO_LOGS=graph_code,guards`` (read at import) or with `set_logs`. A topic that is off still
passes WARNING records: npdynamo's own diagnostics (`dynamo.diagnostics`), which never go
through Python's `warnings`.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["TOPICS", "set_logs", "get_logger"]

TOPICS = ("graph_code", "guards", "recompiles", "bytecode", "graph_breaks", "kernels")

_handler: logging.Handler | None = None


def get_logger(topic: str) -> logging.Logger:
    return logging.getLogger(f"dynamo.{topic}")


def set_logs(*topics: str, **flags: bool) -> None:
    """Enable log topics: ``set_logs("graph_code", "guards")``, ``set_logs(guards=True)``,
    ``set_logs("all")``; ``set_logs()`` turns every topic off. Each call replaces the selection.

    Messages go to stderr through the standard `logging` module (logger ``dynamo.<topic>``).
    """
    wanted: dict[str, bool] = {}
    for item in topics:
        for name in filter(None, (part.strip() for part in item.split(","))):
            if name == "all":
                wanted.update(dict.fromkeys(TOPICS, True))
            else:
                wanted[name] = True
    wanted.update(flags)
    unknown = sorted(set(wanted) - set(TOPICS))
    if unknown:
        raise ValueError(f"unknown log topic(s) {unknown}; known topics: {', '.join(TOPICS)}")
    global _handler
    root = logging.getLogger("dynamo")
    if _handler is None:
        _handler = logging.StreamHandler(sys.stderr)
        _handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
        root.addHandler(_handler)
        root.propagate = False
    for topic in TOPICS:
        get_logger(topic).setLevel(logging.INFO if wanted.get(topic) else logging.WARNING)


def _from_environment() -> None:
    value = os.environ.get("DYNAMO_LOGS", "")
    if value:
        set_logs(value)
