"""DBOS Python 3.4 reads workflows the agent wrote on a SQLite system database,
for sysdb/sqlite_workflows_test.go.

    workflows_sqlite.py read PATH ID   print, as JSON, what DBOSClient sees of
                                       workflow ID: its status fields, its
                                       decoded result (or error) and its steps
"""

import json
import sys

from dbos import DBOSClient


def read(path: str, workflow_id: str) -> None:
    client = DBOSClient(system_database_url=f"sqlite:///{path}")
    try:
        [status] = client.list_workflows(workflow_ids=[workflow_id], load_input=True, load_output=True)
        steps = client.list_workflow_steps(workflow_id)
        out = {
            "status": status.status,
            "name": status.name,
            "queue_name": status.queue_name,
            "created_at": status.created_at,
            "updated_at": status.updated_at,
            "recovery_attempts": status.recovery_attempts,
            "input": status.input,
            "output": status.output,
            "error": None if status.error is None else str(status.error),
            "attributes": getattr(status, "attributes", None),
            "result": client.retrieve_workflow(workflow_id).get_result()
            if status.status == "SUCCESS"
            else None,
            "steps": [
                {
                    "function_id": s["function_id"],
                    "function_name": s["function_name"],
                    "output": s["output"],
                    "child_workflow_id": s["child_workflow_id"],
                    "started_at_epoch_ms": s.get("started_at_epoch_ms"),
                }
                for s in steps
            ],
        }
        print(json.dumps(out, sort_keys=True, default=str))
    finally:
        client.destroy()


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "read":
        read(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
