"""A program on libdbos.so with no agent process of its own running (the
tests of the library's modes and hazards). ``library_app.py <scenario>``,
configured by env: LIBRARY (libdbos.so), MODE (embedded or sidecar),
SYSTEM_DATABASE_URL and SCHEMA (DBOS's config keys system_database_url and
dbos_system_schema), EFFECTS_FILE (each step's execution appends a line)
and WORKFLOW_ID. It prints what the test waits for, line by line.

Scenarios:
- ``crash``: start WORKFLOW_ID, a five-step workflow whose step 3 blocks
  forever when BLOCK=1 (after printing "blocking 3"): the test SIGKILLs it
  there. Without BLOCK, launching recovers the workflow if it is pending;
  the program prints "result <json>" of WORKFLOW_ID and exits.
- ``fork``: run a workflow, fork; the child calls the agent on its parent's
  session (then opens a client of its own) and reports each exception as
  "child <class>: <message>"; the parent then runs another workflow.
- ``postfork``: declare, fork, and launch in the child only (what a
  pre-forking server's workers do): the child runs a workflow and reports
  "child ran <result>"; the parent never loads the library.
- ``interrupt``: the main thread waits on a workflow's result (prints
  "waiting result"), then sleeps (prints "sleeping"); each SIGINT must raise
  KeyboardInterrupt there ("interrupted result", "interrupted sleep"), and
  the library keeps working ("works <n>").
- ``sigterm``: prints "waiting" and waits on a workflow's result; with
  TERM_HANDLER=1 a Python SIGTERM handler prints "sigterm" and exits 3.
- ``relaunch``: launch, run, destroy, twice in one process, with a
  DBOSClient on the same engine; prints "run <n> <result>".
- ``sidecar``: run a workflow through the sidecar agent; print "children
  <pid> <exe>" of this process's child processes, then wait for stdin to
  close.
"""

import json
import os
import signal
import sys
import threading
import time
from typing import Any, Dict, List

from dbos_agent import DBOS, DBOSClient, SetWorkflowID

EFFECTS = os.environ.get("EFFECTS_FILE", os.devnull)
BLOCK = os.environ.get("BLOCK") == "1"
forever = threading.Event()


def say(line: str) -> None:
    print(line, flush=True)


def effect(what: str) -> None:
    with open(EFFECTS, "a") as f:
        f.write(what + "\n")


@DBOS.step()
def numbered(n: int) -> int:
    effect(f"step {n}")
    if n == 3 and BLOCK:
        say("blocking 3")
        forever.wait()  # until SIGKILL
    return n * 10


@DBOS.workflow()
def five_steps() -> List[int]:
    return [numbered(n) for n in range(1, 6)]


@DBOS.workflow()
def echo(x: str) -> str:
    return x


@DBOS.workflow()
def waits_for_ever() -> None:
    DBOS.recv("never", timeout_seconds=3600)


def config() -> Dict[str, Any]:
    return {
        "name": "library-app",
        "agent_library": os.environ["LIBRARY"],
        "agent_mode": os.environ.get("MODE", "embedded"),
        "system_database_url": os.environ["SYSTEM_DATABASE_URL"],
        "dbos_system_schema": os.environ["SCHEMA"],
    }


def crash() -> None:
    DBOS(config=config())
    DBOS.launch()
    wid = os.environ["WORKFLOW_ID"]
    if BLOCK:
        with SetWorkflowID(wid):
            handle = DBOS.start_workflow(five_steps)
    else:
        handle = DBOS.retrieve_workflow(wid)
    say("result " + json.dumps(handle.get_result()))
    DBOS.destroy()


def relay_child(pid: int, r: int, w: int) -> None:
    """Say each line the forked child writes to its pipe, then how it exited."""
    os.close(w)
    with os.fdopen(r) as f:
        for line in f:
            say(line.rstrip("\n"))
    _, status = os.waitpid(pid, 0)
    say(f"child exited {os.waitstatus_to_exitcode(status)}")


def fork() -> None:
    DBOS(config=config())
    DBOS.launch()
    say("parent " + echo("before"))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        report: List[str] = []
        try:
            DBOS.list_workflows()
            report.append("child no error")
        except BaseException as e:
            report.append(f"child {type(e).__name__}: {e}")
        try:
            echo("again")
            report.append("child no error")
        except BaseException as e:
            report.append(f"child {type(e).__name__}: {e}")
        try:
            DBOSClient(**{k: v for k, v in config().items() if k != "name"})
            report.append("child no error")
        except BaseException as e:
            report.append(f"child {type(e).__name__}: {e}")
        os.write(w, ("\n".join(report) + "\n").encode())
        os._exit(0)
    relay_child(pid, r, w)
    say("parent " + echo("after"))
    DBOS.destroy()


def postfork() -> None:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            DBOS(config=config())
            DBOS.launch()
            report = f"child ran {echo('in the child')}"
            DBOS.destroy()
        except BaseException as e:
            report = f"child {type(e).__name__}: {e}"
        os.write(w, (report + "\n").encode())
        os._exit(0)
    relay_child(pid, r, w)
    with open(f"/proc/{os.getpid()}/maps") as maps:
        say(f"parent loaded the library: {'libdbos' in maps.read()}")


def interrupt() -> None:
    DBOS(config=config())
    DBOS.launch()
    handle = DBOS.start_workflow(waits_for_ever)
    try:
        say("waiting result")
        handle.get_result()
    except KeyboardInterrupt:
        say("interrupted result")
    say(f"works {len(DBOS.list_workflows(workflow_ids=[handle.workflow_id]))}")
    try:
        say("sleeping")
        time.sleep(3600)
    except KeyboardInterrupt:
        say("interrupted sleep")
    say("works " + echo("still"))
    DBOS.cancel_workflow(handle.workflow_id)
    DBOS.destroy()
    say("done")


def sigterm() -> None:
    if os.environ.get("TERM_HANDLER") == "1":

        def on_term(signum: int, frame: object) -> None:
            say("sigterm")
            os._exit(3)

        signal.signal(signal.SIGTERM, on_term)
    DBOS(config=config())
    DBOS.launch()
    handle = DBOS.start_workflow(waits_for_ever)
    say("waiting")
    handle.get_result()


def relaunch() -> None:
    for n in (1, 2):
        DBOS(config=config())
        DBOS.launch()
        client = DBOSClient(**{k: v for k, v in config().items() if k != "name"})
        handle = DBOS.start_workflow(echo, f"run-{n}")
        got = client.retrieve_workflow(handle.workflow_id).get_result()
        client.destroy()
        say(f"run {n} {handle.get_result()} {got}")
        DBOS.destroy()


def sidecar() -> None:
    DBOS(config=config())
    DBOS.launch()
    say("result " + json.dumps(five_steps()))
    me = os.getpid()
    for task in os.listdir(f"/proc/{me}/task"):
        with open(f"/proc/{me}/task/{task}/children") as f:
            for child in f.read().split():
                say(f"children {child} {os.readlink(f'/proc/{child}/exe')}")
    say("listed children")
    sys.stdin.read()
    DBOS.destroy()


SCENARIOS = {
    "crash": crash,
    "fork": fork,
    "postfork": postfork,
    "interrupt": interrupt,
    "sigterm": sigterm,
    "relaunch": relaunch,
    "sidecar": sidecar,
}

if __name__ == "__main__":
    SCENARIOS[sys.argv[1]]()
