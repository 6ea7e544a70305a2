"""Durable waits across a SIGKILL, with real processes: a worker is killed
while its workflows wait in recv, in get_event, in DBOS.sleep and on a
child; what they wait for happens while no worker runs; a new worker
resumes each wait with the deadline recorded before the kill (the DBOS.sleep
rows are unchanged, and a timeout ends when it was due, not a full timeout
after the restart), and the child is not started twice.

One kill serves every case: the fixture sets the scene once for the module
and each test checks one kind of wait."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, Iterator, List, Tuple

import pytest

from dbos_agent import DBOSClient

from conftest import AgentEnv, Worker, new_id, query, wait_until

TIMED = 4.0  # the timeouts and sleeps whose end the test times
LONG = 60.0  # waits that end by what happens after the kill


def recorded(schema: str, wid: str) -> List[Tuple[int, str, Any]]:
    """A workflow's operation_outputs rows as stored: (id, name, output)."""
    rows = query(
        f'SELECT function_id, function_name, output FROM "{schema}".operation_outputs '
        "WHERE workflow_uuid = %s ORDER BY function_id",
        (wid,),
    )
    return [(r[0], r[1], r[2]) for r in rows]


def wake_time(rows: List[Tuple[int, str, Any]]) -> float:
    (sleep,) = [r for r in rows if r[1] == "DBOS.sleep"]
    return float(sleep[2])


@pytest.fixture(scope="module")
def crashed(agent_env: AgentEnv) -> Iterator[Dict[str, Any]]:
    env = {"DBOS_AGENT_SOCKET": agent_env.socket}
    schema = agent_env.schema
    client = DBOSClient(agent_socket=agent_env.socket)
    workers: List[Worker] = []
    try:
        first = Worker("comm_worker.py", env)
        workers.append(first)
        first.out.wait_for("ready")

        def enqueue(name: str, *args: Any) -> str:
            return client.enqueue({"workflow_name": name, "queue_name": "comm_crash_queue"}, *args).workflow_id

        target = new_id("event-target")
        ids = {
            "recv": enqueue("recv_waiter", "after-kill", LONG),
            "recv_timeout": enqueue("recv_waiter", "nothing", TIMED),
            "event": enqueue("event_waiter", target, "k", LONG),
            "sleep": enqueue("sleeper", TIMED),
            "parent": enqueue("waiting_parent"),
        }
        ids["child"] = f"{ids['parent']}-1"
        # Each wait has recorded its deadline (or, for the parent, its child)
        # before the worker dies.
        deadline_at = {"recv": 2, "recv_timeout": 2, "event": 2, "sleep": 1, "child": 2}
        for kind, fid in deadline_at.items():
            wait_until(lambda: any(r[0] == fid for r in recorded(schema, ids[kind])), f"{kind} recorded its deadline")
        before = {kind: recorded(schema, wid) for kind, wid in ids.items()}
        first.kill()

        # What the waits wait for happens while no worker runs.
        client.send(ids["recv"], "sent after the kill", "after-kill")
        client.enqueue(
            {"workflow_name": "event_setter", "queue_name": "comm_crash_queue", "workflow_id": target}, "k", "set after the kill"
        )
        client.send(ids["child"], "go", "go")
        # Restart once half the timed waits have passed, so that a wait
        # started over would end well after its recorded deadline.
        due = wake_time(before["sleep"])
        pause = threading.Event()
        pause.wait(max(0.0, due - TIMED / 2 - time.time()))
        restarted_at = time.time()
        second = Worker("comm_worker.py", env)
        workers.append(second)
        results = {kind: client.retrieve_workflow(wid).get_result() for kind, wid in ids.items() if kind != "child"}
        after = {kind: recorded(schema, wid) for kind, wid in ids.items()}
        yield {
            "ids": ids, "before": before, "after": after, "results": results, "restarted_at": restarted_at,
            "client": client, "schema": schema,
        }
    finally:
        for w in workers:
            w.kill()
        client.destroy()


def test_recv_resumes_after_a_kill_with_its_deadline_and_gets_the_message(crashed: Dict[str, Any]) -> None:
    before, after = crashed["before"]["recv"], crashed["after"]["recv"]
    assert before == [(2, "DBOS.sleep", before[0][2])]
    # The deadline row is the one written before the kill; the message sent
    # while no worker ran was received at step 1.
    assert after[1] == before[0]
    assert after[0][:2] == (1, "DBOS.recv")
    assert crashed["results"]["recv"]["value"] == "sent after the kill"


def test_recv_timeout_ends_when_it_was_due_not_a_full_timeout_after_recovery(crashed: Dict[str, Any]) -> None:
    before, after = crashed["before"]["recv_timeout"], crashed["after"]["recv_timeout"]
    assert after[1] == before[0]
    due = wake_time(before)
    result = crashed["results"]["recv_timeout"]
    assert result["value"] is None
    # It waited only what was left: it ended near its deadline, well before
    # a full timeout counted from the restart.
    assert due - 0.1 <= result["at"] < due + 1.0 < crashed["restarted_at"] + TIMED


def test_get_event_resumes_with_its_deadline_and_gets_the_value(crashed: Dict[str, Any]) -> None:
    before, after = crashed["before"]["event"], crashed["after"]["event"]
    assert after[1] == before[0] and after[0][:2] == (1, "DBOS.getEvent")
    assert crashed["results"]["event"]["value"] == "set after the kill"


def test_sleep_resumes_with_its_wake_time(crashed: Dict[str, Any]) -> None:
    before, after = crashed["before"]["sleep"], crashed["after"]["sleep"]
    assert after == before  # the same wake time, recorded once
    due = wake_time(before)
    assert due - 0.1 <= crashed["results"]["sleep"]["at"] < due + 1.0 < crashed["restarted_at"] + TIMED


def test_parent_waiting_on_its_child_resumes_without_starting_it_again(crashed: Dict[str, Any]) -> None:
    ids, client = crashed["ids"], crashed["client"]
    before, after = crashed["before"]["parent"], crashed["after"]["parent"]
    assert before == [(1, "go_child", None)]
    assert [r[:2] for r in after] == [(1, "go_child"), (2, "DBOS.getResult")]
    assert crashed["results"]["parent"]["value"] == "go"
    assert [w.workflow_id for w in client.list_workflows(parent_workflow_id=ids["parent"])] == [ids["child"]]
    child_before, child_after = crashed["before"]["child"], crashed["after"]["child"]
    assert child_after[1] == child_before[0] and child_after[0][:2] == (1, "DBOS.recv")
    steps = client.list_workflow_steps(ids["parent"])
    assert steps[0]["child_workflow_id"] == steps[1]["child_workflow_id"] == ids["child"]
