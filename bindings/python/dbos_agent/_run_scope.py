"""What a workflow run's body executes in, besides the binding's own run
context: the identity recorded with the workflow (``_auth``) and the trace
context propagated to it (``_ambient``)."""

from __future__ import annotations

from typing import Any

from . import _ambient as ambient
from . import _auth as auth


class RunScope:
    def __init__(self, run: Any) -> None:
        self._identity = auth.enter_run(run)
        self._trace = ambient.RunTrace(getattr(run, "attributes", None))

    def close(self) -> None:
        self._trace.close()
        self._identity.close()


def enter(run: Any) -> RunScope:
    return RunScope(run)
