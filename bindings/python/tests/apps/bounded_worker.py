"""A worker process for the bounded-execution tests.

Environment: DBOS_AGENT_SOCKET (the agent), MAX_THREADS (the config's
max_executor_threads; unset: none), HOLD ("1": every ``burst`` workflow waits
until "open"; otherwise they run through).

Prints "ready" once launched, then per workflow
  started <id> <thread name> <workflows running at once>
  finished <id>
and "peak <most at once> <distinct threads> <dbos-executor threads alive>" on
"report". Commands on stdin: "open" releases the held workflows; "start <n>"
starts n ``burst`` workflows with DBOS.start_workflow from this thread and
prints "started-all <n>" once each returned its result (waited for on
another thread); "parent <n>" starts
n ``parent`` workflows, each of which calls a child workflow directly
(which prints "child-started <id> <thread>" and is held like ``burst``), and
prints "parents-done <n>" once each returned its result (checking that its
child ran in the parent's thread). It exits when stdin closes.
"""

import logging
import os
import sys
import threading
from typing import Any, Dict, List, Set

from dbos_agent import DBOS, Queue

logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

_lock = threading.Lock()
_opened = threading.Event()
# Held parents call their children only once all of them started, so that
# every child is younger than every parent.
_children_go = threading.Event()
if os.environ.get("HOLD") != "1":
    _opened.set()
    _children_go.set()
_running = 0
_peak = 0
_threads: Set[str] = set()
_out = threading.Lock()

Queue("bounded_queue")


def say(*parts: Any) -> None:
    with _out:
        sys.stdout.write(" ".join(str(p) for p in parts) + "\n")
        sys.stdout.flush()


@DBOS.step()
def work(i: int) -> int:
    return i * 2


@DBOS.workflow()
def burst(i: int) -> int:
    global _running, _peak
    name = threading.current_thread().name
    with _lock:
        _running += 1
        _peak = max(_peak, _running)
        _threads.add(name)
        now = _running
    say("started", DBOS.workflow_id, name, now)
    try:
        _opened.wait()
        return work(i)
    finally:
        with _lock:
            _running -= 1
        say("finished", DBOS.workflow_id)


@DBOS.workflow()
def child(i: int) -> str:
    say("child-started", DBOS.workflow_id, threading.current_thread().name)
    _opened.wait()
    return f"{threading.current_thread().name}:{work(i)}"


@DBOS.workflow()
def parent(i: int) -> Dict[str, str]:
    # A child called directly runs inline, in this thread: it takes no
    # second slot, so parents filling every slot cannot deadlock on it.
    _children_go.wait()
    got = child(i)
    return {"parent": threading.current_thread().name, "child": got}


def collect(handles: List[Any]) -> None:
    assert [h.get_result() for h in handles] == [i * 2 for i in range(len(handles))]
    say("started-all", len(handles))


def collect_parents(handles: List[Any]) -> None:
    for i, h in enumerate(handles):
        out = h.get_result()
        assert out["child"] == f"{out['parent']}:{i * 2}", out
    say("parents-done", len(handles))


if __name__ == "__main__":
    threads = os.environ.get("MAX_THREADS")
    config: Dict[str, Any] = {"name": "bounded-app"}
    if threads:
        config["max_executor_threads"] = int(threads)
    DBOS(config=config)
    DBOS.launch()
    say("ready")
    for line in sys.stdin:
        cmd = line.split()
        if cmd == ["open"]:
            _opened.set()
        elif cmd[:1] == ["start"]:
            n = int(cmd[1])
            handles = [DBOS.start_workflow(burst, i) for i in range(n)]
            # Wait for them off this thread, which must still read "open".
            threading.Thread(target=collect, args=(handles,), daemon=True).start()
        elif cmd[:1] == ["parent"]:
            n = int(cmd[1])
            handles = [DBOS.start_workflow(parent, i) for i in range(n)]
            _children_go.set()
            threading.Thread(target=collect_parents, args=(handles,), daemon=True).start()
        elif cmd == ["report"]:
            alive = sum(1 for t in threading.enumerate() if t.name.startswith("dbos-executor-"))
            with _lock:
                say("peak", _peak, len(_threads), alive)
    DBOS.destroy()
