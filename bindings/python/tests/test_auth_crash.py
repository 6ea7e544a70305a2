"""A workflow's identity survives its worker: the run a replacement worker
receives after SIGKILL carries the user, granted roles and assumed role
recorded at enqueue, so its required roles are checked against them again
and it runs as that identity."""

from __future__ import annotations

import json
from typing import List

from dbos_agent import DBOSClient, DBOSNotAuthorizedError

from conftest import AgentEnv, Worker


def test_identity_is_recovered_after_sigkill(agent_env: AgentEnv, workers: List[Worker]) -> None:
    env = {"DBOS_AGENT_SOCKET": agent_env.socket}
    first = Worker("auth_worker.py", {**env, "BLOCK_AT": "2"})
    workers.append(first)
    first.out.wait_for("ready")
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        handle = client.enqueue(
            {
                "workflow_name": "guarded",
                "queue_name": "auth_crash_queue",
                "authenticated_user": "alice",
                "authenticated_roles": ["user", "admin"],
            },
            3,
        )
        wid = handle.workflow_id
        first.out.wait_for(f"identity {wid} 1 " + json.dumps(["alice", ["user", "admin"], "admin"]))
        first.out.wait_for(f"blocking {wid} 2")
        first.kill()

        second = Worker("auth_worker.py", env)
        workers.append(second)
        assert handle.get_result() == [["alice", ["user", "admin"], "admin"]] * 3
        # The replacement replayed step 1 and ran steps 2 and 3 as alice.
        ran = [line for line in second.out.lines if line.startswith(f"identity {wid} ")]
        assert [line.split()[2] for line in ran] == ["2", "3"]
        st = handle.get_status()
        assert st.status == "SUCCESS" and (st.recovery_attempts or 0) >= 2

        # Without the role, the worker ends the workflow ERROR (as DBOS 3.4:
        # a denied run is not retried).
        denied = client.enqueue(
            {"workflow_name": "guarded", "queue_name": "auth_crash_queue", "authenticated_user": "bob",
             "authenticated_roles": ["reader"]},
            1,
        )
        try:
            denied.get_result()
            raise AssertionError("a workflow without the role ran")
        except DBOSNotAuthorizedError as e:
            assert "Function guarded has required roles" in str(e)
        assert denied.get_status().status == "ERROR"
    finally:
        client.destroy()
