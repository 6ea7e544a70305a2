"""The agent's wire format (protocol/PROTOCOL.md): each frame is a big-endian
uint32 length followed by a msgpack map ``{kind, id, op?, body?, error?}``.
Requests (kind 1) carry an id that their response (kind 2) repeats; pushes
(kind 3) come from the agent unasked."""

from __future__ import annotations

import struct
from typing import Any, Dict, Optional

import msgpack

PROTOCOL_VERSION = 1
MIN_PROTOCOL_VERSION = 1

KIND_REQUEST = 1
KIND_RESPONSE = 2
KIND_PUSH = 3

OP_HELLO = "hello"
OP_PING = "ping"
OP_STATS = "stats"
OP_CANCEL_REQUEST = "cancel_request"
OP_START_WORKFLOW = "start_workflow"
OP_RECORD_STEP = "record_step"
OP_FINISH = "finish"
OP_GET_RESULT = "get_result"
OP_GET_WORKFLOW = "get_workflow"
OP_LIST_WORKFLOWS = "list_workflows"
OP_LIST_STEPS = "list_steps"
OP_CANCEL = "cancel_workflow"
OP_RESUME = "resume_workflow"

# Late registration: workflow functions and queues declared after hello.
OP_REGISTER = "register"

# Queues, delays and debounce.
OP_REGISTER_QUEUES = "register_queues"
OP_DEBOUNCE_WORKFLOW = "debounce_workflow"
OP_SET_WORKFLOW_DELAY = "set_workflow_delay"
OP_GET_QUEUE = "get_queue"
OP_LIST_QUEUES = "list_queues"
OP_DELETE_QUEUE = "delete_queue"

# Schedules.
OP_CREATE_SCHEDULE = "create_schedule"
OP_GET_SCHEDULE = "get_schedule"
OP_LIST_SCHEDULES = "list_schedules"
OP_PAUSE_SCHEDULE = "pause_schedule"
OP_RESUME_SCHEDULE = "resume_schedule"
OP_DELETE_SCHEDULE = "delete_schedule"
OP_BACKFILL_SCHEDULE = "backfill_schedule"
OP_TRIGGER_SCHEDULE = "trigger_schedule"

# Application versions.
OP_LIST_VERSIONS = "list_versions"
OP_PROMOTE_VERSION = "promote_version"
OP_RENAME_APPLICATION = "rename_application"

# Messages, events, streams, durable sleep and steering.
OP_SEND = "send"
OP_RECV = "recv"
OP_SLEEP = "sleep"
OP_SET_EVENT = "set_event"
OP_GET_EVENT = "get_event"
OP_GET_ALL_EVENTS = "get_all_events"
OP_WRITE_STREAM = "write_stream"
OP_READ_STREAM = "read_stream"
OP_FORK_WORKFLOW = "fork_workflow"
OP_REWIND_WORKFLOW = "rewind_workflow"
OP_DELETE_WORKFLOWS = "delete_workflows"
OP_UPDATE_ATTRIBUTES = "update_workflow_attributes"

# Deduplication policies as the agent names them.
DEDUP_REJECT = "reject"
DEDUP_RETURN_EXISTING = "return_existing"

PUSH_RUN = "run"
PUSH_CANCEL = "cancel"

ROLE_WORKER = "worker"
ROLE_CLIENT = "client"

# The hello's wake_time_format of this binding: the agent records a durable
# sleep's wake time (and a wait's deadline) as DBOS Python writes and reads it,
# epoch seconds (PROTOCOL.md section 2.18). It is also the agent's default.
WAKE_TIME_FORMAT = "epoch_seconds"

MAX_REQUEST_ID = 2**64 - 1

HEADER = struct.Struct(">I")
DEFAULT_MAX_FRAME_SIZE = 16 << 20


class MalformedFrame(Exception):
    """The agent sent bytes that are not a protocol envelope."""


def _compact(body: Dict[str, Any]) -> Dict[str, Any]:
    # Absent and nil are the same to the agent; leaving None out keeps frames
    # small and lets the agent's zero values apply.
    return {k: v for k, v in body.items() if v is not None}


def encode_frame(
    kind: int, request_id: int, op: Optional[str], body: Optional[Dict[str, Any]], *, omit_nil: bool = True
) -> bytes:
    """Encode one frame with its length prefix. Maps keep their insertion
    order; integers take their smallest encoding, floats are float64. A
    request's id is from 1 to 2**64-1: the agent refuses id 0, which its
    errors about the connection carry."""
    if kind == KIND_REQUEST and not 0 < request_id <= MAX_REQUEST_ID:
        raise ValueError(f"a request id is from 1 to {MAX_REQUEST_ID}, not {request_id}")
    env: Dict[str, Any] = {"kind": kind, "id": request_id}
    if op:
        env["op"] = op
    if body is not None:
        env["body"] = _compact(body) if omit_nil else body
    payload: bytes = msgpack.packb(env, use_bin_type=True)
    return HEADER.pack(len(payload)) + payload


def decode_envelope(payload: bytes) -> Dict[str, Any]:
    """Decode a frame body (without its length prefix) into its envelope map."""
    try:
        env = msgpack.unpackb(payload, raw=False, strict_map_key=False)
    except Exception as e:  # msgpack raises several types
        raise MalformedFrame(f"not msgpack: {e}") from e
    if not isinstance(env, dict) or "kind" not in env or "id" not in env:
        raise MalformedFrame("not a protocol envelope (needs a map with kind and id)")
    kind = env["kind"]
    if kind not in (KIND_REQUEST, KIND_RESPONSE, KIND_PUSH):
        raise MalformedFrame(f"unknown kind {kind!r}")
    if kind != KIND_RESPONSE and not env.get("op"):
        raise MalformedFrame("a request or push needs an op")
    return env
