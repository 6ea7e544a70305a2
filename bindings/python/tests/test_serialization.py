"""Payloads are byte-compatible with the official dbos package's: the same
inputs, outputs and errors serialize to the same text in both formats, and
each side reads what the other wrote."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any, Dict, Tuple

import pytest
from dbos import _serialization as official

import dbos_agent
from dbos_agent import _serialization as ours

OURS = ours.DefaultSerializer()
THEIRS = official.DefaultSerializer()

VALUES = [
    None,
    0,
    -7,
    2**70,
    3.25,
    "héllo",
    b"\x00\x01",
    [1, "two", 3.0],
    (1, (2, 3)),
    {"nested": {"list": [1, 2, {"deep": None}]}, "n": 1},
    {1, 2, 3},
    Decimal("12.50"),
    dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc),
]

PORTABLE_VALUES = [
    None,
    True,
    42,
    1.5,
    "naïve ☃",
    [1, [2, [3]]],
    {"b": 1, "a": [1, 2], "c": {"x": None}},
    (1, 2),
    Decimal("1.10"),
    dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc),
    dt.datetime(2026, 1, 2, 3, 4, 5),
    dt.date(2026, 5, 17),
]

ARGS: list = [
    ((), {}),
    ((1, "a"), {}),
    ((), {"x": 1, "y": [1, 2]}),
    ((1, {"k": (2, 3)}), {"flag": True, "when": dt.date(2026, 1, 1)}),
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_py_pickle_values_are_byte_identical(value: Any) -> None:
    mine, tag = ours.serialize_value(value, None, OURS)
    theirs, their_tag = official.serialize_value(value, None, THEIRS)
    assert (mine, tag) == (theirs, their_tag) == (theirs, "py_pickle")
    assert ours.deserialize_value(theirs, "py_pickle", OURS) == value


@pytest.mark.parametrize("value", PORTABLE_VALUES, ids=repr)
def test_portable_values_are_byte_identical(value: Any) -> None:
    mine = ours.serialize_value(value, "portable_json", OURS)
    theirs = official.serialize_value_as(value, "portable_json", THEIRS)
    assert mine == theirs
    assert ours.deserialize_value(theirs[0], "portable_json", OURS) == json.loads(theirs[0])


@pytest.mark.parametrize("args,kwargs", ARGS, ids=repr)
def test_workflow_inputs_are_byte_identical_in_both_formats(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> None:
    assert ours.serialize_args(args, kwargs, "py_pickle", OURS) == official.serialize_args(args, kwargs, None, THEIRS)
    portable = official.serialize_args(args, kwargs, official.WorkflowSerializationFormat.PORTABLE, THEIRS)
    assert ours.serialize_args(args, kwargs, "portable_json", OURS) == portable
    assert portable[0].startswith('{"namedArgs":')
    back = ours.deserialize_args(portable[0], "portable_json", OURS)
    assert back is not None and set(back) == {"args", "kwargs"}


def test_inputs_written_by_dbos_are_read_back_as_dbos_reads_them() -> None:
    data, tag = official.serialize_args((1, [2]), {"z": "q"}, None, THEIRS)
    assert ours.deserialize_args(data, tag, OURS) == official.deserialize_args(data, tag, THEIRS)
    data, tag = official.serialize_args((1, [2]), {"z": "q"}, official.WorkflowSerializationFormat.PORTABLE, THEIRS)
    assert ours.deserialize_args(data, tag, OURS) == official.deserialize_args(data, tag, THEIRS)


class AppError(Exception):
    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code
        self.details = {"retry": False, "at": dt.date(2026, 1, 1)}


@pytest.mark.parametrize(
    "err",
    [ValueError("bad value"), KeyError("k"), AppError("declined", 402), RuntimeError()],
    ids=lambda e: type(e).__name__,
)
def test_errors_are_byte_identical_in_both_formats(err: Exception) -> None:
    assert ours.serialize_exception(err, None, OURS) == official.serialize_exception(err, None, THEIRS)
    assert ours.serialize_exception(err, "portable_json", OURS) == official.serialize_exception(err, "portable_json", THEIRS)


def test_portable_error_reads_as_portable_workflow_error() -> None:
    data, tag = official.serialize_exception(AppError("declined", 402), "portable_json", THEIRS)
    assert json.loads(data) == {"name": "AppError", "message": "declined", "code": 402, "data": {"retry": False, "at": "2026-01-01"}}
    err = ours.deserialize_exception(data, tag, OURS)
    assert isinstance(err, dbos_agent.PortableWorkflowError)
    assert (err.name, err.message, err.code) == ("AppError", "declined", 402)
    theirs = official.deserialize_exception(data, tag, THEIRS)
    assert (theirs.name, theirs.message, theirs.code, theirs.data) == (err.name, err.message, err.code, err.data)


def test_dbos_exceptions_pickled_by_dbos_rebuild_as_ours() -> None:
    from dbos._error import DBOSMaxStepRetriesExceeded as TheirMax, DBOSAwaitedWorkflowCancelledError as TheirCancelled

    data, _ = official.serialize_exception(TheirMax("charge", 3, [ValueError("x")]), None, THEIRS)
    err = ours.deserialize_exception(data, "py_pickle", OURS)
    assert type(err) is dbos_agent.DBOSMaxStepRetriesExceeded
    assert err.step_name == "charge" and err.max_retries == 3 and str(err.errors[0]) == "x"
    assert str(err) == str(TheirMax("charge", 3, [ValueError("x")]))

    data, _ = official.serialize_exception(TheirCancelled("wf-9"), None, THEIRS)
    err = ours.deserialize_exception(data, "py_pickle", OURS)
    assert type(err) is dbos_agent.DBOSAwaitedWorkflowCancelledError and err.workflow_id == "wf-9"


def test_unpicklable_error_is_replaced_not_lost() -> None:
    class Local(Exception):  # a local class cannot be pickled
        pass

    data, tag = ours.serialize_exception_safely(Local("boom"), None, OURS)
    err = ours.deserialize_exception(data, tag, OURS)
    assert type(err) is Exception and "Local: boom" in str(err)


def test_a_custom_serializer_tags_its_payloads() -> None:
    class Upper(dbos_agent.Serializer):
        def serialize(self, data: Any) -> str:
            return json.dumps(data).upper()

        def deserialize(self, serialized_data: str) -> Any:
            return json.loads(serialized_data.lower())

        def name(self) -> str:
            return "upper_json"

    s = Upper()
    assert ours.serialize_value("ab", None, s) == ('"AB"', "upper_json")
    assert ours.deserialize_value('"AB"', "upper_json", s) == "ab"
    # A row in another format is still read by its tag.
    assert ours.deserialize_value(THEIRS.serialize(5), "py_pickle", s) == 5
    with pytest.raises(TypeError):
        ours.deserialize_value("x", "some_other_format", s)
    # Inputs come back as the serializer gives them, as DBOS returns them:
    # a JSON serializer's args are a list, not a tuple.
    data, tag = ours.serialize_args(("v",), {}, None, s)
    assert ours.deserialize_args(data, tag, s) == {"args": ["v"], "kwargs": {}}
    assert ours.deserialize_args(data, tag, s) == official.deserialize_args(data, tag, s)  # type: ignore[arg-type]
