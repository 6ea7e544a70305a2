"""An official DBOS Python process (the `dbos` package, not this binding) on
the agent's system database. It registers a queue with limits, prints the
limits it reads back for QUEUE_TO_READ (a queue the binding registered), and
exits. Settings from the environment: APP_DATABASE_URL, APP_SCHEMA, APP_NAME,
APP_VERSION (the executor id is DBOS__VMID)."""

import json
import os

from dbos import DBOS

from official_env import official_config

if __name__ == "__main__":
    DBOS(config=official_config())
    DBOS.launch()
    q = DBOS.register_queue("official_limited", worker_concurrency=2, global_concurrency=3,
                            limiter={"limit": 100, "period": 1.5})
    print("registered", q.name, flush=True)
    other = os.environ.get("QUEUE_TO_READ")
    if other:
        theirs = DBOS.retrieve_queue(other)
        assert theirs is not None
        print("read", json.dumps({"global_concurrency": theirs.global_concurrency,
                                  "worker_concurrency": theirs.worker_concurrency,
                                  "limiter": theirs.limiter}), flush=True)
    DBOS.destroy()
