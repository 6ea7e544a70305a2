"""The async-only step options ``preemptible`` and ``timeout_seconds``, as
DBOS Python 3.4 has them: their checks (at declaration for ``@DBOS.step``,
when called in a workflow for ``DBOS.run_step``) and the watch one attempt of
an async step runs under.

``timeout_seconds``: each attempt runs at most that long; then it is
cancelled (its cleanup runs) and the attempt fails with
``DBOSStepTimeoutError``, which retries and ``should_retry`` treat like any
other failure and which is recorded as the step's outcome when it is the
last. ``preemptible``: the attempt is cancelled as soon as its workflow is
cancelled, and the step fails with ``DBOSWorkflowCancelledError`` without
recording anything, so a resumed workflow runs it again. DBOS polls the
database for the cancellation about once a second; here the agent's cancel
push stops the run, which ends the step at once.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from typing import Any, Awaitable, Callable, Dict, Optional, Set, Tuple, TypeVar

from ._error import DBOSException, DBOSStepTimeoutError, DBOSWorkflowCancelledError

R = TypeVar("R")


def check_async_only_options(
    name: str, func: Callable[..., Any], preemptible: bool, timeout_seconds: Optional[float]
) -> None:
    """DBOS Python's checks of ``preemptible`` and ``timeout_seconds``, in
    its order and with its messages."""
    is_async = inspect.iscoroutinefunction(func)
    if preemptible and not is_async:
        raise DBOSException(
            f"Step {name} is sync but preemptible=True. Preemption is only supported for async steps."
        )
    if timeout_seconds is not None:
        if not is_async:
            raise DBOSException(
                f"Step {name} is sync but timeout_seconds is set. Step timeouts are only supported for async steps."
            )
        # `<= 0` alone would admit NaN, which would disable the timeout.
        if not (timeout_seconds > 0 and math.isfinite(timeout_seconds)):
            raise DBOSException(
                f"Step {name} has timeout_seconds={timeout_seconds}. Step timeouts must be positive and finite."
            )


async def supervise_attempt(
    func: Callable[..., Awaitable[R]],
    args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
    *,
    step_name: str,
    timeout_seconds: Optional[float],
    stopped: "Optional[asyncio.Future[None]]",
    stop_error: Callable[[], BaseException],
) -> R:
    """One attempt of an async step: its outcome, or, when ``stopped``
    (the run's stop, given for a preemptible step) or the timeout comes
    first, the step cancelled and the reason raised (from the exception its
    cancellation ended with, if any)."""
    task: "asyncio.Future[R]" = asyncio.ensure_future(func(*args, **kwargs))
    try:
        watched: "Set[asyncio.Future[Any]]" = {task}
        if stopped is not None:
            watched.add(stopped)
        done, _ = await asyncio.wait(watched, timeout=timeout_seconds, return_when=asyncio.FIRST_COMPLETED)
        # A step that finished keeps its outcome, whatever else happened.
        if task in done:
            return task.result()
        # A cancellation outranks a timeout reached at the same moment: not
        # recording a cancelled workflow's step is the safer outcome.
        abort: BaseException
        if stopped is not None and stopped in done:
            abort = stop_error()
        else:
            assert timeout_seconds is not None
            abort = DBOSStepTimeoutError(step_name, timeout_seconds)
        task.cancel()
        await asyncio.wait({task})
        ended = None if task.cancelled() else task.exception()
        if ended is not None and not isinstance(ended, Exception):
            raise ended
        raise abort from ended
    finally:
        if not task.done():
            # The caller itself was cancelled: do not leak the step.
            task.cancel()
            try:
                await task
            except BaseException:
                pass
        elif not task.cancelled():
            task.exception()  # retrieved, so asyncio does not report it


def preempted_error(workflow_id: str, reason: Optional[str], other: Callable[[], BaseException]) -> BaseException:
    """What a preempted step raises: DBOS's error for a cancelled workflow,
    else the run's own stop error (fenced or disconnected)."""
    if reason == "cancelled":
        return DBOSWorkflowCancelledError(f"Workflow {workflow_id} is cancelled. Aborting preemptible step.")
    return other()
