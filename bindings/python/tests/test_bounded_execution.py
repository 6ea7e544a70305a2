"""Bounded execution: a worker configured with max_executor_threads runs its
sync workflows on at most that many threads and announces the cap, which the
agent keeps for every run it pushes (a recovery burst, queue dequeues) and
which the binding keeps for the runs it is granted (direct starts); a child
workflow called directly runs inline, so parents in every slot cannot
deadlock on it. Real worker processes on the real agent."""

from __future__ import annotations

from typing import Dict, List

from dbos_agent import DBOSClient, WorkflowHandle

from conftest import AgentEnv, Worker

CAP = 3
BURST = 24


def bounded(env: AgentEnv, cap: "int | None", hold: bool = False) -> Worker:
    e: Dict[str, str] = {"DBOS_AGENT_SOCKET": env.socket, "HOLD": "1" if hold else "0"}
    if cap is not None:
        e["MAX_THREADS"] = str(cap)
    w = Worker("bounded_worker.py", e)
    w.out.wait_for("ready")
    return w


def is_start(line: str) -> bool:
    return line.startswith("started ")


def report(w: Worker) -> List[int]:
    """(most workflows at once, distinct threads they ran on, executor
    threads alive)."""
    seen = len(w.out.matching(lambda l: l.startswith("peak ")))
    w.send("report")
    line = w.out.wait_count(lambda l: l.startswith("peak "), seen + 1)[-1]
    return [int(x) for x in line.split()[1:]]


def assert_held_at_cap(w: Worker, total: int) -> None:
    """With the workflows held, exactly CAP start and no more."""
    w.out.wait_count(is_start, CAP)
    assert w.out.stays_below(is_start, CAP + 1, 1.0), w.out.text()
    w.send("open")
    w.out.wait_count(lambda l: l.startswith("finished "), total, timeout=120)


def assert_bounded(w: Worker, total: int) -> None:
    starts = w.out.matching(is_start)
    assert len(starts) >= total
    assert max(int(l.split()[3]) for l in starts) <= CAP
    peak, distinct, alive = report(w)
    assert peak == CAP and distinct <= CAP and alive <= CAP, (peak, distinct, alive)


def enqueue_burst(client: DBOSClient) -> List[WorkflowHandle[int]]:
    return [client.enqueue({"workflow_name": "burst", "queue_name": "bounded_queue"}, i) for i in range(BURST)]


def assert_runs_within_cap(w: Worker, client: DBOSClient, handles: List[WorkflowHandle[int]]) -> None:
    """The agent pushes w (held workflows) CAP runs, the rest wait on their
    queue, not in the worker; once released all finish, never more than CAP
    at once or on more than CAP threads."""
    w.out.wait_count(is_start, CAP)
    assert len(client.list_workflows(queue_name="bounded_queue", status="ENQUEUED")) == BURST - CAP
    assert_held_at_cap(w, BURST)
    assert [h.get_result() for h in handles] == [i * 2 for i in range(BURST)]
    assert_bounded(w, BURST)


def test_recovery_burst_runs_within_the_cap(agent_env: AgentEnv, workers: List[Worker]) -> None:
    # An uncapped worker (DBOS's default) takes the whole burst at once...
    first = bounded(agent_env, None, hold=True)
    workers.append(first)
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        handles = enqueue_burst(client)
        first.out.wait_count(is_start, BURST)
        assert report(first)[0] == BURST
        # ... and dies holding it: the agent hands every run back, and a
        # worker capped at CAP recovers them CAP at a time.
        first.kill()
        second = bounded(agent_env, CAP, hold=True)
        workers.append(second)
        assert_runs_within_cap(second, client, handles)
        assert {h.get_status().recovery_attempts for h in handles} == {2}
    finally:
        client.destroy()


def test_enqueued_burst_runs_within_the_cap(agent_env: AgentEnv, workers: List[Worker]) -> None:
    w = bounded(agent_env, CAP, hold=True)
    workers.append(w)
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        assert_runs_within_cap(w, client, enqueue_burst(client))
    finally:
        client.destroy()


def test_direct_starts_beyond_the_cap_wait_for_a_thread(agent_env: AgentEnv, workers: List[Worker]) -> None:
    w = bounded(agent_env, CAP, hold=True)
    workers.append(w)
    w.send(f"start {BURST}")
    assert_held_at_cap(w, BURST)
    w.out.wait_for(f"started-all {BURST}", timeout=120)
    assert_bounded(w, BURST)


def test_parents_in_every_slot_run_their_children_inline(agent_env: AgentEnv, workers: List[Worker]) -> None:
    w = bounded(agent_env, CAP)
    workers.append(w)
    w.send(f"parent {BURST}")
    # Each child ran on its parent's thread (asserted in the app), and all
    # of them finished although the parents held every slot.
    w.out.wait_for(f"parents-done {BURST}", timeout=120)
    assert report(w)[2] <= CAP


def test_hello_announces_the_cap(agent_env: AgentEnv, workers: List[Worker]) -> None:
    w = bounded(agent_env, CAP)
    workers.append(w)
    opened = agent_env.agent.log.wait_for(lambda l: "session opened" in l and '"max_concurrency":3' in l.replace(" ", ""))
    assert '"app":"bounded-app"' in opened.replace(" ", "")


def test_a_stopped_run_frees_its_slot_while_its_thread_finishes(agent_env: AgentEnv, workers: List[Worker]) -> None:
    w = bounded(agent_env, CAP, hold=True)
    workers.append(w)
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        handles = [client.enqueue({"workflow_name": "burst", "queue_name": "bounded_queue"}, i) for i in range(CAP + 1)]
        first = w.out.wait_count(is_start, CAP)
        # The cancelled run's thread stays in its code (held) until its next
        # step; the agent ended the run and pushes the waiting one, which
        # starts on another thread at once rather than waiting behind it.
        cancelled = first[0].split()[1]
        client.cancel_workflow(cancelled)
        started = w.out.wait_count(is_start, CAP + 1)
        assert int(started[-1].split()[3]) == CAP + 1
        w.send("open")
        # "finished" is printed by the body, before its outcome is recorded:
        # wait for the outcomes themselves.
        for h in handles:
            if h.workflow_id != cancelled:
                h.get_result()
        outcomes = {h.workflow_id: h.get_status().status for h in handles}
        assert outcomes.pop(cancelled) == "CANCELLED"
        assert set(outcomes.values()) == {"SUCCESS"}
    finally:
        client.destroy()


def test_recovered_parents_in_every_slot_run_their_recovered_children_inline(agent_env: AgentEnv, workers: List[Worker]) -> None:
    # Parents, each in its child (held), more of them than the cap...
    first = bounded(agent_env, None, hold=True)
    workers.append(first)
    first.send(f"parent {2 * CAP}")
    first.out.wait_count(lambda l: l.startswith("child-started "), 2 * CAP)
    first.kill()
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        parents = client.list_workflows(name="parent", status=["PENDING", "ENQUEUED"])
        assert len(parents) == 2 * CAP
        # ... are recovered with their children onto the internal queue. A
        # worker capped at CAP takes CAP parents; each calls its child again
        # and, rather than wait for the child to get a slot (none would
        # free), claims it and runs it in its own thread, as the first time.
        second = bounded(agent_env, CAP)
        workers.append(second)
        outs = [client.retrieve_workflow(p.workflow_id).get_result() for p in parents]
        # The first CAP parents hold every slot, so their children can only
        # run inline (else all would wait for ever). A later parent may find
        # its child already taken by the queue's poller for a slot a finished
        # parent freed (it waits for it then): that is not a deadlock either.
        inline = [o for o in outs if o["child"].startswith(o["parent"] + ":")]
        assert len(inline) >= CAP, outs
        children = client.list_workflows(name="child", status="SUCCESS")
        assert len(children) >= 2 * CAP
        assert report(second)[2] <= CAP
    finally:
        client.destroy()
