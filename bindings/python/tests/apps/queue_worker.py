"""A worker process for the queue, schedule and version tests.

Environment: DBOS_AGENT_SOCKET (the agent), APP_NAME, APP_VERSION (optional),
QUEUES (a JSON list of Queue keyword arguments to declare), LISTEN (a JSON
list of queue names for DBOS.listen_queues), DECORATED_CRON (declare a
@DBOS.scheduled workflow ``decorated_tick`` on that cron).

It prints "ready <version>" once launched (the version it runs as), then one line per event, with the time
(time.time()) last:
  started <id> <tag> <version> <t>    a ``held`` workflow began (it waits)
  finished <id> <t>                   a ``held`` workflow was released
  ran <id> <tag> <version> <t>        a ``quick`` workflow ran
  tick <id> <scheduled ISO> <context JSON> <t>
  decorated <id> <scheduled ISO> <actual ISO> <t>
Commands on stdin: "release <id>" releases one held workflow, "open" all of
them from now on, "enqueue <queue> <tag>" enqueues ``quick`` (printing
"enqueued <id> <tag> <t>"). It exits when stdin closes.
"""

import json
import logging
import os
import sys
import threading
import time
from datetime import datetime
from typing import Any, Dict

from dbos_agent import DBOS, Queue

logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

_lock = threading.Lock()
_gates: Dict[str, threading.Event] = {}
_open = False


def gate(wid: str) -> threading.Event:
    with _lock:
        ev = _gates.get(wid)
        if ev is None:
            ev = _gates[wid] = threading.Event()
            if _open:
                ev.set()
        return ev


_out = threading.Lock()


def say(*parts: Any) -> None:
    line = " ".join(str(p) for p in parts) + f" {time.time():.6f}\n"
    with _out:  # one write per line: threads do not interleave
        sys.stdout.write(line)
        sys.stdout.flush()


_queues = {spec["name"]: Queue(**spec) for spec in json.loads(os.environ.get("QUEUES", "[]"))}


@DBOS.workflow()
def held(tag: str) -> str:
    wid = DBOS.workflow_id
    assert wid is not None
    say("started", wid, tag, DBOS.application_version or "-")
    gate(wid).wait()
    say("finished", wid)
    return f"{tag}@{DBOS.application_version}"


@DBOS.workflow()
def quick(tag: str) -> str:
    say("ran", DBOS.workflow_id, tag, DBOS.application_version or "-")
    return f"{tag}@{DBOS.application_version}"


@DBOS.workflow()
def tick(scheduled_at: datetime, context: Any) -> None:
    assert isinstance(scheduled_at, datetime)
    say("tick", DBOS.workflow_id, scheduled_at.isoformat(), json.dumps(context, separators=(",", ":")))


if os.environ.get("DECORATED_CRON"):

    @DBOS.scheduled(os.environ["DECORATED_CRON"])
    @DBOS.workflow()
    def decorated_tick(scheduled_time: datetime, actual_time: datetime) -> None:
        say("decorated", DBOS.workflow_id, scheduled_time.isoformat(), actual_time.isoformat())


if __name__ == "__main__":
    DBOS(config={"name": os.environ.get("APP_NAME", "pytest-worker"),
                 "application_version": os.environ.get("APP_VERSION") or None})
    listen = json.loads(os.environ.get("LISTEN", "[]"))
    if listen:
        DBOS.listen_queues(listen)
    DBOS.launch()
    print("ready", DBOS.application_version, flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if cmd[:1] == ["release"]:
            gate(cmd[1]).set()
        elif cmd[:1] == ["enqueue"]:
            h = _queues[cmd[1]].enqueue(quick, cmd[2])
            say("enqueued", h.workflow_id, cmd[2])
        elif cmd == ["open"]:
            with _lock:
                _open = True
                for ev in _gates.values():
                    ev.set()
    DBOS.destroy()
