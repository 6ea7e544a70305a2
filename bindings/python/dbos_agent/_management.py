"""DBOS Python 3.4's ``asyncio_wait`` and ``step_status``."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Awaitable, List, Optional, Set, Tuple

from ._context import current_ctx
from ._core import NEW_STEP, _now_ms, _record_body, begin_step, drive_async, record_op


@dataclass
class StepStatus:
    """The step running in this thread or task (DBOS Python's, from
    ``DBOS.step_status()``): its function id in its workflow and, for a
    step with retries, its current attempt (from 0) and most attempts."""

    step_id: int
    current_attempt: Optional[int]
    max_attempts: Optional[int]


def step_status() -> Optional[StepStatus]:
    ctx = current_ctx()
    if ctx is None or ctx.step_id is None:
        return None
    return StepStatus(ctx.step_id, ctx.attempt, ctx.max_attempts)


_ASYNCIO_WAIT_STEP = "DBOS.asyncio_wait"


async def asyncio_wait(
    fs: List[Awaitable[Any]], *, timeout: Optional[float], return_when: str
) -> "Tuple[Set[asyncio.Future[Any]], Set[asyncio.Future[Any]]]":
    """``asyncio.wait``, durable in a workflow: which of ``fs`` were done is
    recorded as the step ``DBOS.asyncio_wait`` (their indexes), so a replay
    returns the same split, waiting for those recorded done; outside a
    workflow (or in a step), plain ``asyncio.wait``."""
    futs: "List[asyncio.Future[Any]]" = [asyncio.ensure_future(f) for f in fs]
    ctx = current_ctx()
    if ctx is None or ctx.step_id is not None:
        split: "Tuple[Set[asyncio.Future[Any]], Set[asyncio.Future[Any]]]" = await asyncio.wait(
            futs, timeout=timeout, return_when=return_when
        )
        return split
    engine, run = ctx.engine, ctx.run
    # The function id is taken before the awaitables run (they start at the
    # first await), as in DBOS.
    fid, replayed = begin_step(run, _ASYNCIO_WAIT_STEP, engine.serializer)
    if replayed is not NEW_STEP:
        indexes = set(replayed or [])
        done = {f for i, f in enumerate(futs) if i in indexes}
        pending = {f for i, f in enumerate(futs) if i not in indexes}
        if done:
            await asyncio.wait(done)
        return done, pending
    started = _now_ms()
    done, pending = await asyncio.wait(futs, timeout=timeout, return_when=return_when)
    indexes_done = [i for i, f in enumerate(futs) if f in done]
    body = _record_body(run, fid, _ASYNCIO_WAIT_STEP, started, indexes_done, None, engine.serializer)
    await drive_async(engine, record_op(run, body))
    return done, pending
