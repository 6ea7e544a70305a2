"""The wire format against the protocol's golden vectors and error catalog
(protocol/testdata/*.json, generated from the Go code): the binding decodes
every frame the agent may send, encodes what it sends byte for byte, and
maps every error code to the exception the catalog names."""

from __future__ import annotations

import json
from typing import Any, Dict, List

import msgpack
import pytest

import dbos_agent
from dbos_agent import _error, _protocol as proto
from dbos_agent._core import WorkflowRun, status_from_info, step_info
from dbos_agent._serialization import DefaultSerializer

from conftest import REPO

TESTDATA = REPO / "protocol" / "testdata"
VECTORS: List[Dict[str, Any]] = json.loads((TESTDATA / "vectors.json").read_text())
CATALOG: List[Dict[str, Any]] = json.loads((TESTDATA / "error_codes.json").read_text())


def _ordered(v: Any) -> Any:
    """A value with its maps as lists of pairs, so that comparisons check key
    order too (the vectors give maps in wire order)."""
    if isinstance(v, dict):
        return [(k, _ordered(x)) for k, x in v.items()]
    if isinstance(v, list):
        return [_ordered(x) for x in v]
    return v


def _split_frame(raw: bytes) -> bytes:
    (n,) = proto.HEADER.unpack(raw[:4])
    assert n == len(raw) - 4, "one frame, exactly"
    return raw[4:]


@pytest.mark.parametrize("vec", VECTORS, ids=[v["name"] for v in VECTORS])
def test_golden_vector_decodes(vec: Dict[str, Any]) -> None:
    env = proto.decode_envelope(_split_frame(bytes.fromhex(vec["hex"])))
    assert env["kind"] == vec["kind"]
    assert env["id"] == vec["id"]
    assert env.get("op", "") == vec.get("op", "")
    body = env.get("body")
    if "body" in vec:
        assert _ordered(body) == _ordered(vec["body"])
    else:
        assert body is None
    err = env.get("error")
    if "error" in vec:
        assert _ordered(err) == _ordered(vec["error"])
        info = {c["code"]: c for c in CATALOG}[err["code"]]
        assert err["name"] == info["name"]
    else:
        assert err is None


@pytest.mark.parametrize("vec", [v for v in VECTORS if not v.get("decode_only")], ids=lambda v: v["name"])
def test_golden_vector_encodes_byte_for_byte(vec: Dict[str, Any]) -> None:
    env: Dict[str, Any] = {"kind": vec["kind"], "id": vec["id"]}
    if vec.get("op"):
        env["op"] = vec["op"]
    if "body" in vec:
        env["body"] = vec["body"]
    if "error" in vec:
        env["error"] = vec["error"]
    payload = msgpack.packb(env, use_bin_type=True)
    assert (proto.HEADER.pack(len(payload)) + payload).hex() == vec["hex"]
    if vec["kind"] == proto.KIND_REQUEST and "error" not in vec:
        # The binding's own encoder writes the same frame (with nils kept).
        assert proto.encode_frame(vec["kind"], vec["id"], vec["op"], vec["body"], omit_nil=False).hex() == vec["hex"]


@pytest.mark.parametrize("vec", [v for v in VECTORS if v.get("decode_only")], ids=lambda v: v["name"])
def test_decode_only_vectors_read_as_their_canonical_form(vec: Dict[str, Any]) -> None:
    got = proto.decode_envelope(_split_frame(bytes.fromhex(vec["hex"])))
    canonical = proto.decode_envelope(_split_frame(bytes.fromhex(vec["canonical_hex"])))
    assert got["kind"] == canonical["kind"] and got["id"] == canonical["id"]
    # Unknown fields are ignored and nil reads as absent: the fields the
    # canonical frame carries have the same values.
    for k, v in (canonical.get("body") or {}).items():
        assert (got.get("body") or {}).get(k) == v
    for k, v in (got.get("body") or {}).items():
        if v is not None and k in (canonical.get("body") or {}):
            assert canonical["body"][k] == v


def test_run_push_vector_becomes_a_run_with_its_history() -> None:
    vec = next(v for v in VECTORS if v["name"] == "push_run")
    env = proto.decode_envelope(_split_frame(bytes.fromhex(vec["hex"])))
    run = WorkflowRun(env["body"], generation=1)
    assert run.workflow_id == "order-1002"
    assert run.owner_xid == vec["body"]["owner_xid"]
    assert run.serialization == "portable_json"
    assert sorted(run.history) == [1, 2, 3]
    assert run.history[2]["name"] == "charge_card"
    assert run.authenticated_user == "alice"
    assert (run.assumed_role, run.authenticated_roles) == ("admin", ["user", "admin"])
    assert run.recovery_attempts == 2


def test_reply_vectors_become_statuses_and_steps() -> None:
    wf = next(v for v in VECTORS if v["name"] == "get_workflow_reply")
    st = status_from_info(wf["body"], DefaultSerializer())
    assert st.workflow_id == wf["body"]["workflow_id"]
    assert st.status == wf["body"]["status"]
    assert (st.authenticated_user, st.assumed_role, st.authenticated_roles) == ("alice", "admin", ["user", "admin"])
    assert st.app_id == "", "an empty application id is one, not none"
    steps = next(v for v in VECTORS if v["name"] == "list_steps_reply")
    infos = [step_info(s, DefaultSerializer(), load_output=False) for s in steps["body"]["steps"]]
    assert [i["function_id"] for i in infos] == [s["function_id"] for s in steps["body"]["steps"]]


@pytest.mark.parametrize("vec", [v for v in VECTORS if "error" in v], ids=lambda v: v["name"])
def test_error_vectors_map_to_the_catalogs_exception(vec: Dict[str, Any]) -> None:
    env = proto.decode_envelope(_split_frame(bytes.fromhex(vec["hex"])))
    e = env["error"]
    exc = _error.map_agent_error(
        _error.AgentErrorReply(e["code"], e["name"], e["message"], e.get("data")), workflow_id="order-1002"
    )
    dbos_name = {c["code"]: c for c in CATALOG}[e["code"]]["dbos_name"]
    expected = getattr(dbos_agent, dbos_name) if dbos_name else dbos_agent.DBOSAgentError
    assert isinstance(exc, expected)
    if e["code"] == 202:
        assert isinstance(exc, dbos_agent.DBOSQueueDeduplicatedError)
        assert exc.queue_name == e["data"]["queue_name"]
        assert exc.deduplication_id == e["data"]["deduplication_id"]
    if e["code"] == 205:
        assert isinstance(exc, dbos_agent.DBOSUnexpectedStepError)
        assert e["data"]["recorded"] in str(exc)


def test_error_catalog_matches_the_protocols() -> None:
    ours = {code: (name, dbos, retry) for code, (name, dbos, retry) in _error.ERROR_CATALOG.items()}
    theirs = {c["code"]: (c["name"], c["dbos_name"], c["retryable"]) for c in CATALOG}
    assert ours == theirs
    assert _error.CLOSING_CODES == {c["code"] for c in CATALOG if c["close_connection"]}


@pytest.mark.parametrize("rid", [0, -1, proto.MAX_REQUEST_ID + 1])
def test_a_request_never_goes_out_with_a_reserved_id(rid: int) -> None:
    # The agent refuses id 0 (its errors about the connection carry it);
    # ids come from a counter from 1, and the encoder refuses the rest.
    with pytest.raises(ValueError):
        proto.encode_frame(proto.KIND_REQUEST, rid, proto.OP_PING, {})
    assert proto.encode_frame(proto.KIND_REQUEST, proto.MAX_REQUEST_ID, proto.OP_PING, {})
    # Responses and pushes carry id 0 legitimately.
    assert proto.encode_frame(proto.KIND_RESPONSE, 0, None, {})


@pytest.mark.parametrize("entry", CATALOG, ids=lambda c: c["name"])
def test_every_code_raises_the_named_exception(entry: Dict[str, Any]) -> None:
    exc = _error.map_agent_error(
        _error.AgentErrorReply(entry["code"], entry["name"], entry["doc"], {}), workflow_id="wf-1"
    )
    if entry["dbos_name"]:
        cls = getattr(dbos_agent, entry["dbos_name"])
        assert type(exc) is cls, f"code {entry['code']} raises {type(exc).__name__}, the catalog says {cls.__name__}"
    else:
        assert type(exc) is dbos_agent.DBOSAgentError
        assert exc.code == entry["code"] and exc.name == entry["name"]
