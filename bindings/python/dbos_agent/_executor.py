"""The threads sync workflow runs execute on.

DBOS Python runs each workflow it dispatches on a ``ThreadPoolExecutor`` of
``max_executor_threads`` workers (unbounded, ``sys.maxsize``, when the config
leaves it out). Here the agent dispatches, so the bound is kept at both ends:
the worker announces ``max_executor_threads`` as its ``max_concurrency`` in
``hello`` and the agent pushes no more runs than that; this executor runs
them on at most that many live threads, reusing idle ones.

Two things ``ThreadPoolExecutor`` cannot do are why this is not one:

- A run that stops (cancelled, fenced, or its connection lost) ends on the
  agent's side at once, and the agent may push another in its place, while
  its thread is still in user code until its next step. Its slot is released
  when it stops, so the run pushed in its place starts at once on another
  thread instead of waiting behind it: the threads doing live work stay
  within the cap; a stopped run's thread is extra until its code returns.
- Its threads are daemons, as the binding's run threads always were: a
  process that exits with a workflow blocked does not hang at exit (the
  agent hands that workflow to another worker).

Async workflows do not run here but on the binding's event loop; steps run
inline in their workflow's thread, and a child workflow called directly from
workflow code runs inline in its caller's thread, so neither takes a slot of
this pool (the agent counts every run against max_concurrency, async ones and
inline children included: see the README's "Threads and concurrency").
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from typing import Callable, Deque, List, Optional, Tuple

logger = logging.getLogger("dbos_agent")

# Protocol bound of max_concurrency (section 6 of PROTOCOL.md): a larger cap
# is announced as none.
_MAX_ANNOUNCED = 2**31 - 1


def executor_cap(value: object) -> Optional[int]:
    """The cap ``max_executor_threads`` configures: None (DBOS's default,
    ``sys.maxsize``: no cap) when it is absent, 0 or too large to announce."""
    if value is None or value == 0:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_executor_threads must be an int, not {type(value).__name__}")
    if value < 0:
        # ThreadPoolExecutor's own message, which DBOS Python raises.
        raise ValueError("max_workers must be greater than 0")
    return value if value <= _MAX_ANNOUNCED else None


class Slot:
    """One admitted task's place under the cap, released once: when the
    task returns, or earlier when its run stops."""

    __slots__ = ("_executor", "_released")

    def __init__(self, executor: "RunExecutor"):
        self._executor = executor
        self._released = False

    def release(self) -> None:
        self._executor._release(self)


_Task = Tuple[Callable[[Slot], None], Slot]


class _Thread:
    """An idle pool thread's mailbox: the next task handed to it."""

    __slots__ = ("task", "handed")

    def __init__(self) -> None:
        self.task: Optional[_Task] = None
        self.handed = threading.Event()


class RunExecutor:
    """A pool of daemon threads named ``dbos-executor-N`` (DBOS Python's
    prefix) running at most ``cap`` tasks at once (any number when None);
    tasks beyond it wait, first in first out, for a slot. An admitted task
    is handed to an idle thread, else to a new one, never queued behind a
    busy one; a thread whose task returns takes the next waiting task
    itself."""

    def __init__(self, cap: Optional[int]):
        self.cap = cap
        self._lock = threading.Lock()
        self._waiting: Deque[_Task] = deque()  # waiting for a slot
        self._idle: List[_Thread] = []
        self._live = 0  # slots held
        self._names = itertools.count(1)

    def submit(self, task: Callable[[Slot], None]) -> None:
        """Run ``task(slot)`` on a pool thread when a slot is free; the slot
        is released when the task returns, or earlier by ``slot.release()``."""
        item = (task, Slot(self))
        with self._lock:
            if self._has_room_locked():
                self._live += 1
                self._hand_locked(item)
            else:
                self._waiting.append(item)

    def _has_room_locked(self) -> bool:
        return self.cap is None or self._live < self.cap

    def _release_locked(self, slot: Slot) -> bool:
        if slot._released:
            return False
        slot._released = True
        self._live -= 1
        return True

    def _release(self, slot: Slot) -> None:
        """A slot given up before its task returned (its run stopped): the
        next waiting task starts on another thread."""
        with self._lock:
            if self._release_locked(slot) and self._waiting and self._has_room_locked():
                self._live += 1
                self._hand_locked(self._waiting.popleft())

    def _hand_locked(self, item: _Task) -> None:
        if self._idle:
            t = self._idle.pop()
            t.task = item
            t.handed.set()
            return
        threading.Thread(
            target=self._loop, args=(item,), name=f"dbos-executor-{next(self._names)}", daemon=True
        ).start()

    def _loop(self, item: _Task) -> None:
        me = _Thread()
        while True:
            task, slot = item
            try:
                task(slot)
            except BaseException:
                # Tasks report their own outcomes: this is a bug, and the
                # thread must survive it to keep the pool's count right.
                logger.exception("a task of the workflow executor raised")
            with self._lock:
                self._release_locked(slot)
                if self._waiting and self._has_room_locked():
                    self._live += 1
                    item = self._waiting.popleft()
                    continue
                me.task = None
                me.handed.clear()
                self._idle.append(me)
            me.handed.wait()
            assert me.task is not None
            item = me.task
