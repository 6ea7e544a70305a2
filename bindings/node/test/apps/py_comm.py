"""A Python-binding worker for interop_comm.test.ts: its workflow sends a
message in portable JSON to the Node-binding workflow NODE_WORKFLOW_ID,
receives that workflow's reply, reads its event and stream, then sets an
event and writes a stream of its own for the Node side to read; all through
the test's agent (DBOS_AGENT_SOCKET; with DBOS_AGENT_LIBRARY and
DBOS_AGENT_MODE=connect, over libdbos.so). The message is PY_PING (JSON)
plus a tuple, which portable JSON carries as a list. The workflow is
portable, so its result is read by the Node binding too. Prints JSON lines:
"started" once the workflow exists, then "result" with what it read and the
Python type of each field of the reply."""

import json
import os
from typing import Any, Dict

from dbos_agent import DBOS, SetWorkflowID, WorkflowSerializationFormat

PORTABLE = WorkflowSerializationFormat.PORTABLE
WAIT = 30


@DBOS.workflow(serialization_type=PORTABLE)
def py_pinger(node_id: str, ping: Dict[str, Any]) -> Dict[str, Any]:
    DBOS.send(node_id, {**ping, "pair": ("a", 1)}, "ping", serialization_type=PORTABLE)
    reply = DBOS.recv("pong", WAIT)
    kinds = {k: type(v).__name__ for k, v in reply.items()} if isinstance(reply, dict) else None
    event = DBOS.get_event(node_id, "node-event", WAIT)
    stream = list(DBOS.read_stream(node_id, "node-stream"))
    DBOS.set_event("py-event", {"from": "python", "ok": True}, serialization_type=PORTABLE)
    DBOS.write_stream("py-stream", {"i": 1}, serialization_type=PORTABLE)
    DBOS.write_stream("py-stream", [2.5, None, "three"], serialization_type=PORTABLE)
    DBOS.close_stream("py-stream")
    return {"reply": reply, "kinds": kinds, "event": event, "stream": stream}


if __name__ == "__main__":
    DBOS(config={"name": "py-comm-app"})
    DBOS.launch()
    with SetWorkflowID(os.environ["PY_WORKFLOW_ID"]):
        handle = DBOS.start_workflow(py_pinger, os.environ["NODE_WORKFLOW_ID"], json.loads(os.environ["PY_PING"]))
    print(json.dumps({"event": "started"}), flush=True)
    print(json.dumps({"event": "result", "result": handle.get_result()}), flush=True)
    DBOS.destroy()
