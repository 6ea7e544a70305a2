"""Payload formats, byte-compatible with DBOS Python's.

Every payload in the system database carries a serialization tag:

- ``py_pickle`` (DBOS Python's default): ``base64(pickle.dumps(value))`` with
  pickle's default protocol. Workflow inputs are the dict
  ``{"args": <tuple>, "kwargs": <dict>}``; errors are the pickled exception.
- ``portable_json``: compact JSON text, readable by every language. Inputs are
  ``{"namedArgs": {...}, "positionalArgs": [...]}``; errors are
  ``{"name", "message", "code", "data"}``.

A custom ``Serializer`` (config key ``serializer``) replaces ``py_pickle`` as
the default, tagged with its ``name()``, as in DBOS Python.
"""

from __future__ import annotations

import base64
import inspect
import io
import json
import pickle
from datetime import date, datetime, timezone
from decimal import Decimal
from enum import Enum
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union, cast

PY_PICKLE = "py_pickle"
PORTABLE_JSON = "portable_json"

# WorkflowInputs is what deserialized workflow inputs look like:
# {"args": tuple, "kwargs": dict}.
WorkflowInputs = Dict[str, Any]


class Serializer:
    """A payload format. Subclass it and pass an instance as the config key
    ``serializer`` to replace pickle, as in DBOS Python."""

    def serialize(self, data: Any) -> str:
        raise NotImplementedError

    def deserialize(self, serialized_data: str) -> Any:
        raise NotImplementedError

    def name(self) -> str:
        return "custom_serializer"


# Classes that DBOS Python pickles under its own module paths, rebuilt here as
# this package's classes of the same name (so a binding process reads what a
# DBOS Python process wrote without the dbos package installed).
_FOREIGN_MODULES = {
    "dbos._error": "dbos_agent._error",
    "dbos.error": "dbos_agent._error",
    "dbos._serialization": "dbos_agent._serialization",
}


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        mapped = _FOREIGN_MODULES.get(module)
        if mapped is not None:
            import importlib

            ours = importlib.import_module(mapped)
            if hasattr(ours, name):
                return getattr(ours, name)
        return super().find_class(module, name)


class DefaultSerializer(Serializer):
    """DBOS Python's default format: base64 of the pickle."""

    def serialize(self, data: Any) -> str:
        return base64.b64encode(pickle.dumps(data)).decode("utf-8")

    def deserialize(self, serialized_data: str) -> Any:
        return _Unpickler(io.BytesIO(base64.b64decode(serialized_data))).load()

    def name(self) -> str:
        return PY_PICKLE


class WorkflowSerializationFormat(str, Enum):
    """The per-workflow choice of format (``@DBOS.workflow(serialization_type=...)``)."""

    PORTABLE = "portable"
    NATIVE = "native"
    DEFAULT = None


class PortableWorkflowError(Exception):
    """An error read from ``portable_json``: its name, message, code and data
    as the writer (possibly another language) gave them."""

    def __init__(
        self,
        message: str,
        name: str,
        code: Union[int, str, None] = None,
        data: Any = None,
    ):
        super().__init__(message)
        self.message = message
        self.name = name
        self.code = code
        self.data = data

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return f"PortableWorkflowError(message={self.message!r}, name={self.name!r}, code={self.code!r}, data={self.data!r})"

    def __reduce__(self) -> Any:
        return (self.__class__, (self.message, self.name, self.code, self.data))


def _utc_rfc3339(dt: datetime) -> str:
    dt = dt.replace(tzinfo=timezone.utc) if dt.tzinfo is None else dt.astimezone(timezone.utc)
    return dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def to_portable(value: Any) -> Any:
    """Convert a value to plain JSON types the way DBOS Python does: datetimes
    to RFC 3339 UTC with milliseconds, dates to ISO, Decimals to fixed-point
    strings, tuples and sets to lists; maps need string keys."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, datetime):
        return _utc_rfc3339(value)
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, (list, tuple, set)):
        return [to_portable(v) for v in value]
    if isinstance(value, Mapping):
        out: Dict[str, Any] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(
                    "Attempt to do portable JSON serialization of a map with non-string keys"
                )
            out[k] = to_portable(v)
        return out
    raise TypeError(f"Object of type {type(value).__name__} is not portable JSON serializable")


class DBOSPortableJSONSerializer(Serializer):
    """The cross-language format: compact JSON."""

    def serialize(self, data: Any) -> str:
        return json.dumps(to_portable(data), separators=(",", ":"), ensure_ascii=False)

    def deserialize(self, serialized_data: Optional[str]) -> Any:
        return None if serialized_data is None else json.loads(serialized_data)

    def name(self) -> str:
        return PORTABLE_JSON


DBOSPortableJSON = DBOSPortableJSONSerializer()
DBOSDefaultSerializer = DefaultSerializer()


def tag_for(fmt: Optional[WorkflowSerializationFormat], serializer: Serializer) -> str:
    """The serialization tag a workflow declared with ``fmt`` writes."""
    if fmt == WorkflowSerializationFormat.PORTABLE:
        return PORTABLE_JSON
    if fmt == WorkflowSerializationFormat.NATIVE:
        return PY_PICKLE
    return serializer.name()


def _by_tag(tag: Optional[str], serializer: Serializer) -> Serializer:
    if tag is None or tag == "" or tag == serializer.name():
        return serializer
    if tag == PORTABLE_JSON:
        return DBOSPortableJSON
    if tag == PY_PICKLE:
        return DBOSDefaultSerializer
    raise TypeError(f"Serialization {tag} is not available")


def serialize_value(value: Any, tag: Optional[str], serializer: Serializer) -> Tuple[str, str]:
    """Serialize an output in the format ``tag`` (None: the default)."""
    s = _by_tag(tag, serializer)
    return s.serialize(value), s.name()


def deserialize_value(data: Optional[str], tag: Optional[str], serializer: Serializer) -> Any:
    if data is None:
        return None
    return _by_tag(tag, serializer).deserialize(data)


def serialize_args(
    args: Tuple[Any, ...], kwargs: Dict[str, Any], tag: Optional[str], serializer: Serializer
) -> Tuple[str, str]:
    """Serialize workflow inputs as DBOS Python stores them."""
    s = _by_tag(tag, serializer)
    if s.name() == PORTABLE_JSON:
        return s.serialize({"namedArgs": kwargs, "positionalArgs": list(args)}), PORTABLE_JSON
    return s.serialize({"args": args, "kwargs": kwargs}), s.name()


def deserialize_args(data: Optional[str], tag: Optional[str], serializer: Serializer) -> Optional[WorkflowInputs]:
    if data is None:
        return None
    s = _by_tag(tag, serializer)
    if s.name() == PORTABLE_JSON:
        raw = s.deserialize(data) or {}
        positional = raw.get("positionalArgs") or []
        named = raw.get("namedArgs") or {}
        return {"args": tuple(positional), "kwargs": named}
    # As the serializer gives it back, as DBOS Python returns it (a JSON
    # serializer's args are a list); a run takes its args as a tuple.
    return cast(WorkflowInputs, s.deserialize(data))


def _safe_str(x: Any) -> str:
    try:
        return str(x)
    except Exception:
        try:
            return repr(x)
        except Exception:
            return "<unprintable>"


def error_to_portable(err: BaseException) -> Dict[str, Any]:
    """The portable form of an exception: its class name, message, a code
    found on common attributes, and structured data when it has some."""
    try:
        name = type(err).__name__
    except Exception:
        name = "Error"
    out: Dict[str, Any] = {"name": name, "message": _safe_str(err)}
    code: Union[int, str, None] = None
    for attr in ("code", "error_code", "errno", "status", "status_code"):
        try:
            v = getattr(err, attr)
        except Exception:
            continue
        if v is None or isinstance(v, (int, str)):
            code = v
            break
    out["code"] = code
    for attr in ("data", "details", "payload", "extra", "meta", "metadata"):
        try:
            v = getattr(err, attr)
        except Exception:
            continue
        if callable(v):
            continue
        try:
            out["data"] = to_portable(v)
        except Exception:
            out["data"] = _safe_str(v)
        break
    return out


def serialize_exception(err: BaseException, tag: Optional[str], serializer: Serializer) -> Tuple[str, str]:
    s = _by_tag(tag, serializer)
    if s.name() == PORTABLE_JSON:
        return s.serialize(error_to_portable(err)), PORTABLE_JSON
    return s.serialize(err), s.name()


def serialize_exception_safely(err: BaseException, tag: Optional[str], serializer: Serializer) -> Tuple[str, str]:
    """Serialize a workflow's error for its outcome; an exception that cannot
    be serialized is replaced by a plain Exception naming it, so the outcome
    is recorded either way."""
    try:
        return serialize_exception(err, tag, serializer)
    except Exception:
        fallback = Exception(f"{type(err).__name__}: {_safe_str(err)}")
        return serialize_exception(fallback, tag, serializer)


def deserialize_exception(data: Optional[str], tag: Optional[str], serializer: Serializer) -> Optional[BaseException]:
    if data is None:
        return None
    s = _by_tag(tag, serializer)
    if s.name() == PORTABLE_JSON:
        d = s.deserialize(data) or {}
        return PortableWorkflowError(
            d.get("message", ""), d.get("name", "Error"), d.get("code"), d.get("data")
        )
    value = s.deserialize(data)
    if isinstance(value, BaseException):
        return value
    return Exception(_safe_str(value))


def coerce_portable_args(func: Callable[..., Any], inputs: WorkflowInputs) -> WorkflowInputs:
    """Portable JSON loses datetimes and dates; turn ISO strings back into them
    where the workflow's type hints ask for them, as DBOS Python does."""
    import typing

    try:
        hints = typing.get_type_hints(func)
    except Exception:
        hints = dict(getattr(func, "__annotations__", {}) or {})
    if not hints:
        return inputs
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return inputs

    def coerce(value: Any, hint: Any) -> Any:
        if not isinstance(value, str):
            return value
        try:
            if hint is datetime:
                return datetime.fromisoformat(value.replace("Z", "+00:00"))
            if hint is date:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).date()
        except ValueError:
            return value
        return value

    args: List[Any] = list(inputs["args"])
    for i, v in enumerate(args):
        if i < len(params):
            args[i] = coerce(v, hints.get(params[i].name))
    kwargs = {k: coerce(v, hints.get(k)) for k, v in inputs["kwargs"].items()}
    return {"args": tuple(args), "kwargs": kwargs}
