"""Observing queue limits from the outside: workflows that hold until the
test releases them, and a driver that lets a queue fill up to its limit,
watches that nothing more starts, and releases the batch.

Two observers share one interface: ``Tracker`` for held workflows running in
the test process, ``ProcessHolds`` for the ``held`` workflow of
apps/queue_worker.py in worker processes (events from their output)."""

from __future__ import annotations

import json
import threading
from typing import Any, Dict, List, Optional, Protocol, Tuple

from conftest import LineWaiter, Worker


class Holds(Protocol):
    def wait_started(self, n: int, timeout: float = 60.0) -> List[str]: ...

    def stays_below(self, n: int, window: float) -> bool: ...

    def release(self, ids: List[str]) -> None: ...

    def wait_finished(self, n: int, timeout: float = 60.0) -> None: ...

    def max_running(self) -> int: ...


class Tracker:
    """Held workflows of this process: ``enter`` blocks until released."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.started: List[str] = []
        self.finished: List[str] = []
        self.tags: Dict[str, str] = {}
        self._gates: Dict[str, threading.Event] = {}
        self._running = 0
        self._max = 0
        self._open = False

    def _gate(self, wid: str) -> threading.Event:
        ev = self._gates.get(wid)
        if ev is None:
            ev = self._gates[wid] = threading.Event()
            if self._open:
                ev.set()
        return ev

    def enter(self, wid: str, tag: str) -> None:
        with self._cond:
            self.started.append(wid)
            self.tags[wid] = tag
            self._running += 1
            self._max = max(self._max, self._running)
            gate = self._gate(wid)
            self._cond.notify_all()
        assert gate.wait(120), f"held workflow {wid} was never released"
        with self._cond:
            self._running -= 1
            self.finished.append(wid)
            self._cond.notify_all()

    def wait_started(self, n: int, timeout: float = 60.0) -> List[str]:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.started) >= n, timeout):
                raise AssertionError(f"{len(self.started)} of {n} held workflows started within {timeout}s")
            return list(self.started)

    def stays_below(self, n: int, window: float) -> bool:
        with self._cond:
            return not self._cond.wait_for(lambda: len(self.started) >= n, window)

    def release(self, ids: List[str]) -> None:
        with self._cond:
            for wid in ids:
                self._gate(wid).set()

    def open(self) -> None:
        with self._cond:
            self._open = True
            for ev in self._gates.values():
                ev.set()

    def wait_finished(self, n: int, timeout: float = 60.0) -> None:
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.finished) >= n, timeout):
                raise AssertionError(f"{len(self.finished)} of {n} held workflows finished within {timeout}s")

    def max_running(self) -> int:
        with self._cond:
            return self._max

    def running(self) -> List[str]:
        with self._cond:
            return [w for w in self.started if w not in self.finished]


def _field(line: str, i: int) -> str:
    return line.split()[i]


class ProcessHolds:
    """The ``held`` workflows of queue_worker.py processes, whose output all
    goes to ``log``."""

    def __init__(self, log: LineWaiter, workers: List[Worker]):
        self.log = log
        self.workers = workers

    def _started(self, line: str) -> bool:
        return line.startswith("started ")

    def _finished(self, line: str) -> bool:
        return line.startswith("finished ")

    def wait_started(self, n: int, timeout: float = 60.0) -> List[str]:
        return [_field(line, 1) for line in self.log.wait_count(self._started, n, timeout)]

    def stays_below(self, n: int, window: float) -> bool:
        return self.log.stays_below(self._started, n, window)

    def release(self, ids: List[str]) -> None:
        for w in self.workers:
            for wid in ids:
                w.send(f"release {wid}")

    def wait_finished(self, n: int, timeout: float = 60.0) -> None:
        self.log.wait_count(self._finished, n, timeout)

    def events(self, log: Optional[LineWaiter] = None) -> List[Tuple[float, int, str]]:
        """(time, +1 start / -1 end, id), in time order (a worker prints the
        end before it reports the outcome, so an end sorts before the start
        it made room for)."""
        ev: List[Tuple[float, int, str]] = []
        for line in (log or self.log).matching(lambda l: self._started(l) or self._finished(l)):
            parts = line.split()
            ev.append((float(parts[-1]), 1 if parts[0] == "started" else -1, parts[1]))
        return sorted(ev, key=lambda e: (e[0], e[1]))

    def max_running(self, log: Optional[LineWaiter] = None) -> int:
        running = peak = 0
        for _, delta, _ in self.events(log):
            running += delta
            peak = max(peak, running)
        return peak

    def max_running_in(self, worker: Worker) -> int:
        return self.max_running(worker.out)

    def started_where(self) -> Dict[str, str]:
        """Which worker (its APP_VERSION or index) started each held workflow."""
        where: Dict[str, str] = {}
        for i, w in enumerate(self.workers):
            for line in w.out.matching(self._started):
                where[_field(line, 1)] = w.env.get("NAME", str(i))
        return where


def drive(holds: Holds, total: int, limit: int, window: float = 1.0) -> List[List[str]]:
    """Let ``total`` held workflows through a queue whose limit is ``limit``:
    wait until ``limit`` run, check for ``window`` seconds that no more
    start, release them, and so on. Returns the batches in start order."""
    batches: List[List[str]] = []
    released = 0
    while released < total:
        want = min(released + limit, total)
        started = holds.wait_started(want)
        if want < total:
            assert holds.stays_below(want + 1, window), (
                f"more than {limit} workflows of the queue ran at once: started {holds.wait_started(want + 1)}"
            )
        batch = started[released:want]
        batches.append(batch)
        holds.release(batch)
        holds.wait_finished(want)
        released = want
    assert holds.max_running() == limit, f"at most {holds.max_running()} ran at once, expected {limit}"
    return batches


def quick_lines(log: LineWaiter) -> List[Tuple[str, str, str, float]]:
    """(id, tag, version, time) of every ``ran`` line."""
    out = []
    for line in log.matching(lambda l: l.startswith("ran ")):
        p = line.split()
        out.append((p[1], p[2], p[3], float(p[4])))
    return out


def tick_lines(log: LineWaiter, kind: str = "tick") -> List[Tuple[str, str, str]]:
    out = []
    for line in log.matching(lambda l: l.startswith(kind + " ")):
        p = line.split()
        out.append((p[1], p[2], p[3]))
    return out


def ready_version(w: Worker) -> str:
    """The version a queue_worker runs as (its "ready" line says)."""
    return w.out.wait_for("ready").split()[1]


def queue_env(socket: str, app: str, queues: Optional[List[Dict[str, Any]]] = None, **extra: str) -> Dict[str, str]:
    env = {"DBOS_AGENT_SOCKET": socket, "APP_NAME": app, "QUEUES": json.dumps(queues or [])}
    env.update(extra)
    return env

