"""An official DBOS Python process (the `dbos` package) on the agent's
system database, for the interop tests of messages, events and streams. It
starts `official_receiver` under the id env WORKFLOW_ID, prints "started", and when
the workflow ends prints "result <repr>" and exits. The workflow waits for a
message on topic "to-official", publishes it as the event "got", and writes
it and "second" to the stream "out", which it closes. Settings from the
environment: APP_DATABASE_URL, APP_SCHEMA (executor id: DBOS__VMID)."""

import os
from typing import Any

from dbos import DBOS, SetWorkflowID


@DBOS.workflow()
def official_receiver() -> Any:
    msg = DBOS.recv("to-official", 60)
    DBOS.set_event("got", msg)
    DBOS.write_stream("out", msg)
    DBOS.write_stream("out", "second")
    DBOS.close_stream("out")
    return msg


if __name__ == "__main__":
    DBOS(config={
        "name": "pytest",
        "system_database_url": os.environ["APP_DATABASE_URL"],
        "dbos_system_schema": os.environ["APP_SCHEMA"],
        "run_admin_server": False,
    })
    DBOS.launch()
    with SetWorkflowID(os.environ["WORKFLOW_ID"]):
        handle = DBOS.start_workflow(official_receiver)
    print("started", flush=True)
    print("result", repr(handle.get_result()), flush=True)
    DBOS.destroy()
