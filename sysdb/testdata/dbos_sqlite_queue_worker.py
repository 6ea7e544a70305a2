"""A DBOS Python 3.4 app serving a queue on a SQLite system database while the
agent dequeues from it too, for sysdb/sqlite_queues_test.go.

    dbos_sqlite_queue_worker.py PATH N
        launch DBOS (version v1) with queue "jobs", enqueue work(i) for i < N
        with DBOSClient as mix-000..., run what DBOS claims until no workflow
        of the queue is ENQUEUED, then print the ids DBOS ran, one a line
"""

import sys
import threading
import time

from dbos import DBOS, DBOSClient, EnqueueOptions

ran: list[str] = []
ran_lock = threading.Lock()


@DBOS.workflow()
def work(i: int) -> int:
    with ran_lock:
        ran.append(DBOS.workflow_id or "")
    time.sleep(0.005)
    return i


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    path, n = sys.argv[1], int(sys.argv[2])
    url = f"sqlite:///{path}"
    DBOS(
        config={
            "name": "queues-interop",
            "system_database_url": url,
            "application_version": "v1",
            "executor_id": "python",
        }
    )
    DBOS.launch()
    DBOS.register_queue("jobs", polling_interval_sec=0.05)
    client = DBOSClient(system_database_url=url)
    try:
        for i in range(n):
            options: EnqueueOptions = {
                "queue_name": "jobs",
                "workflow_name": "work",
                "workflow_id": f"mix-{i:03d}",
            }
            client.enqueue(options, i)
            time.sleep(0.01)  # a trickle, so that both sides find work
        deadline = time.time() + 60
        while time.time() < deadline:
            if not client.list_workflows(status="ENQUEUED", queue_name="jobs"):
                break
            time.sleep(0.05)
        # Let the runs DBOS claimed finish.
        deadline = time.time() + 30
        while time.time() < deadline:
            pending = client.list_workflows(status="PENDING", queue_name="jobs")
            if all(w.executor_id != "python" for w in pending):
                break
            time.sleep(0.05)
        with ran_lock:
            for workflow_id in sorted(ran):
                print(workflow_id)
    finally:
        client.destroy()
        DBOS.destroy()


if __name__ == "__main__":
    main()
