"""The binding's background event loop wakes up every WAKE_INTERVAL_SEC
even when nothing is due on it.

Async workflows run on that loop, and their code often waits on an asyncio
primitive (an ``asyncio.Event``) that code on another loop, usually the
application's own, sets. That set is not thread-safe: it queues the waiter's
wake-up on the binding's loop without waking the loop's selector, so a loop
with nothing else to do (every workflow waiting, no agent message due)
sleeps on it for good. DBOS Python runs such code (its own tests do: an
``asyncio.Event`` of the test set while queued async workflows wait on it)
and it finishes there; a loop that wakes on its own sees the queued wake-up
within one interval, at the cost of ten idle wake-ups a second.
"""

from __future__ import annotations

import asyncio

WAKE_INTERVAL_SEC = 0.1


def keep_waking(loop: asyncio.AbstractEventLoop) -> None:
    """Schedule the wake-ups on ``loop`` (call it from the loop's thread,
    or before the loop runs); they end when the loop stops."""

    def tick() -> None:
        loop.call_later(WAKE_INTERVAL_SEC, tick)

    loop.call_soon(tick)
