"""DBOS Python 3.4's client enqueues on a SQLite system database, for
sysdb/sqlite_queues_test.go.

    dbos_sqlite_enqueue.py PATH QUEUE WORKFLOW ID [PRIORITY]
        enqueue WORKFLOW(6, 7) on QUEUE under ID with DBOSClient, as an app
        that is not running would; prints the workflow id
"""

import sys

from dbos import DBOSClient, EnqueueOptions


def main() -> None:
    if len(sys.argv) not in (5, 6):
        sys.exit(__doc__)
    path, queue, workflow, workflow_id = sys.argv[1:5]
    options: EnqueueOptions = {
        "queue_name": queue,
        "workflow_name": workflow,
        "workflow_id": workflow_id,
        "workflow_timeout": 60.0,
    }
    if len(sys.argv) == 6:
        options["priority"] = int(sys.argv[5])
    client = DBOSClient(system_database_url=f"sqlite:///{path}")
    try:
        handle = client.enqueue(options, 6, 7)
        print(handle.get_workflow_id())
    finally:
        client.destroy()


if __name__ == "__main__":
    main()
