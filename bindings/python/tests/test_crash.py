"""Durability across process deaths, with real processes: a worker killed
with SIGKILL mid-workflow is replaced and the workflow finishes without
re-running its recorded steps; a run cut off from a killed agent stops
without writing, and the restarted agent hands the workflow back."""

from __future__ import annotations

from typing import Dict, List

import pytest

from dbos_agent import DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded, DBOSClient

from conftest import AgentEnv, Worker, effect_counts


def worker_env(env: AgentEnv, effects: str, **extra: int) -> Dict[str, str]:
    out = {"DBOS_AGENT_SOCKET": env.socket, "EFFECTS_FILE": effects}
    out.update({k: str(v) for k, v in extra.items()})
    return out


def ran_lines(w: Worker, wid: str) -> List[str]:
    return [l for l in w.out.lines if l.startswith(f"ran {wid} ")]


def test_sigkilled_worker_is_replaced_without_rerunning_recorded_steps(agent_env: AgentEnv, workers: List[Worker]) -> None:
    effects = agent_env.path("effects-kill")
    first = Worker("pipeline_worker.py", worker_env(agent_env, effects, BLOCK_AT=4))
    workers.append(first)
    first.out.wait_for("ready")
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        handle = client.enqueue({"workflow_name": "crash_pipeline", "queue_name": "crash_queue"}, 6)
        wid = handle.workflow_id
        first.out.wait_for(f"blocking {wid} 4")
        first.kill()
        assert effect_counts(effects) == {f"{wid} {n}": 1 for n in (1, 2, 3)}

        # The agent saw the connection close and re-enqueued the workflow; a
        # new worker receives it with its three recorded steps.
        second = Worker("pipeline_worker.py", worker_env(agent_env, effects))
        workers.append(second)
        assert handle.get_result() == [10, 20, 30, 40, 50, 60]
        assert effect_counts(effects) == {f"{wid} {n}": 1 for n in range(1, 7)}
        assert ran_lines(second, wid) == [f"ran {wid} {n}" for n in (4, 5, 6)]

        steps = client.list_workflow_steps(wid)
        assert [(s["function_id"], s["output"]) for s in steps] == [(n, n * 10) for n in range(1, 7)]
        status = handle.get_status()
        assert status.status == "SUCCESS" and (status.recovery_attempts or 0) >= 2
    finally:
        client.destroy()


def test_run_cut_off_from_its_agent_stops_and_the_restarted_agent_finishes_it(agent_env: AgentEnv, workers: List[Worker]) -> None:
    effects = agent_env.path("effects-agent")
    worker = Worker("pipeline_worker.py", worker_env(agent_env, effects, PAUSE_AT=4))
    workers.append(worker)
    worker.out.wait_for("ready")
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        handle = client.enqueue({"workflow_name": "crash_pipeline", "queue_name": "crash_queue"}, 5)
        wid = handle.workflow_id
        worker.out.wait_for(f"paused {wid} 4")

        agent_env.agent.kill()
        worker.out.wait_for("connection to")  # the binding noticed the drop
        assert worker.proc.stdin is not None
        worker.proc.stdin.write("go\n")
        worker.proc.stdin.flush()
        # Step 4 finishes its side effect, but the run lost its connection:
        # it records nothing and never finishes the workflow.
        worker.out.wait_for(f"ran {wid} 4")
        worker.out.wait_for(f"workflow {wid} stopped here")

        agent_env.start_agent()
        # The worker reconnects; the restarted agent recovered the PENDING
        # workflow and dispatches it with steps 1-3: step 4, which ran but was
        # never recorded, runs again (at least once), the others do not.
        assert handle.get_result() == [10, 20, 30, 40, 50]
        counts = effect_counts(effects)
        assert counts == {f"{wid} 1": 1, f"{wid} 2": 1, f"{wid} 3": 1, f"{wid} 4": 2, f"{wid} 5": 1}
        assert worker.out.wait_for("reconnected")
        assert [s["function_id"] for s in client.list_workflow_steps(wid)] == [1, 2, 3, 4, 5]
    finally:
        client.destroy()


def test_workflow_killed_past_its_max_recovery_attempts_is_dead_lettered(agent_env: AgentEnv, workers: List[Worker]) -> None:
    effects = agent_env.path("effects-dead")
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        handle = client.enqueue({"workflow_name": "fragile_pipeline", "queue_name": "crash_queue"}, 3)
        wid = handle.workflow_id
        # max_recovery_attempts=1: the first run and one recovery are allowed.
        for attempt in (1, 2):
            w = Worker("pipeline_worker.py", worker_env(agent_env, effects, BLOCK_AT=2))
            workers.append(w)
            w.out.wait_for(f"blocking {wid} 2")
            w.kill()
        last = Worker("pipeline_worker.py", worker_env(agent_env, effects))
        workers.append(last)
        with pytest.raises(DBOSAwaitedWorkflowMaxRecoveryAttemptsExceeded):
            handle.get_result()
        assert handle.get_status().status == "MAX_RECOVERY_ATTEMPTS_EXCEEDED"
        assert effect_counts(effects) == {f"{wid} 1": 1}
        assert ran_lines(last, wid) == []
    finally:
        client.destroy()
