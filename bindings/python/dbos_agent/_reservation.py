"""The step id a ``StepReservation`` runs its step at: set around the run
of the reserved step, and taken by the first step that starts in it, which
then takes no new id (``begin_step``)."""

from __future__ import annotations

import contextvars
from typing import Any, Optional, Tuple

# (the run the id was reserved in, the id), or None.
_reserved: "contextvars.ContextVar[Optional[Tuple[Any, int]]]" = contextvars.ContextVar(
    "dbos_agent_reserved_step", default=None
)


def take(run: Any) -> Optional[int]:
    """The reserved id of ``run``, once; None when there is none."""
    held = _reserved.get()
    if held is None or held[0] is not run:
        return None
    _reserved.set(None)
    return held[1]


def hold(run: Any, function_id: int) -> "contextvars.Token[Optional[Tuple[Any, int]]]":
    return _reserved.set((run, function_id))


def release(token: "contextvars.Token[Optional[Tuple[Any, int]]]") -> None:
    _reserved.reset(token)
