"""Ambient start options of DBOS Python 3.4 that are not the binding's
core ones: ``SetShardKey`` and ``PropagateOtelContext``. Each applies to the
workflows started, enqueued or called in its block (``apply_start`` folds
them into the start_workflow request)."""

from __future__ import annotations

import contextvars
import json
from typing import Any, Dict, Literal, Optional

from ._context import _Setting
from ._error import DBOSException

# The attribute DBOS Python keeps a propagated trace context under, so a
# DBOS process reading the row finds it where it looks.
OTEL_CARRIER_ATTRIBUTE = "dbos.otelContext"

_shard_key: "contextvars.ContextVar[Optional[str]]" = contextvars.ContextVar("dbos_agent_shard_key", default=None)
_otel_carrier: "contextvars.ContextVar[Optional[Dict[str, str]]]" = contextvars.ContextVar(
    "dbos_agent_otel_carrier", default=None
)


class _Block(_Setting):
    """A context manager setting one context variable for its block (its
    exit may run in another ``contextvars`` Context, as ``_Setting``'s)."""

    _var: "contextvars.ContextVar[Any]"

    def _value(self) -> Any:
        raise NotImplementedError

    def __enter__(self) -> "_Block":
        self._enter(self._var, self._value())
        return self

    def __exit__(self, *exc: Any) -> Literal[False]:
        self._exit(self._var)
        return False


class SetShardKey(_Block):
    """Set the shard key of every workflow started, enqueued or called in
    the block. The agent's system database is unsharded, so (as DBOS does on
    an unsharded database) a start in the block raises ``DBOSException``."""

    _var = _shard_key

    def __init__(self, shard_key: str) -> None:
        if not shard_key:
            raise ValueError("shard_key must be a non-empty string")
        super().__init__()
        self.shard_key = shard_key

    def _value(self) -> Any:
        return self.shard_key


def inject_trace_context(context: Any = None) -> Dict[str, str]:
    """The W3C trace context of ``context`` (default: the current one) as a
    carrier, baggage left out as DBOS leaves it out; empty when
    OpenTelemetry is not installed or there is no valid span context."""
    try:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        return {}
    carrier: Dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier, context=context)
    return carrier


class PropagateOtelContext(_Block):
    """Propagate the current OpenTelemetry context (or ``context``) to the
    workflows started or enqueued in the block: its W3C trace context is
    stored in their attributes (``dbos.otelContext``), as DBOS stores it.
    Without OpenTelemetry, or without a valid span, nothing is stored."""

    _var = _otel_carrier

    def __init__(self, context: Any = None) -> None:
        super().__init__()
        self.context = context

    def _value(self) -> Any:
        carrier = inject_trace_context(self.context)
        return carrier if carrier else None


def attributes_with_otel_context(attributes: Optional[Dict[str, Any]], context: Any) -> Optional[Dict[str, Any]]:
    """An ``otel_context`` enqueue option folded into the workflow's
    attributes, as DBOS folds it: the context's W3C trace carrier under
    ``dbos.otelContext`` (winning over one written by hand), nothing when
    there is no valid span context to propagate. The worker that runs the
    workflow reads it back (``RunTrace``), so the workflow's span joins the
    caller's trace."""
    if context is None:
        return attributes
    carrier = inject_trace_context(context)
    if not carrier:
        return attributes
    merged = dict(attributes) if attributes else {}
    merged[OTEL_CARRIER_ATTRIBUTE] = carrier
    return merged


def attributes_under_ambient(attributes: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """An enqueue's own attributes over the ambient ``PropagateOtelContext``
    carrier, as DBOS merges them for ``enqueue_workflow_with_options``: the
    block's carrier applies unless the options carry their own (their
    ``otel_context`` or a ``dbos.otelContext`` attribute)."""
    carrier = _otel_carrier.get()
    if carrier is None:
        return attributes
    return {OTEL_CARRIER_ATTRIBUTE: carrier, **(attributes or {})}


def apply_start(body: Dict[str, Any]) -> None:
    """Fold the ambient blocks into a start_workflow request."""
    if _shard_key.get() is not None:
        raise DBOSException("A shard key was given, but this system database is not sharded")
    carrier = _otel_carrier.get()
    if carrier is not None:
        attributes = json.loads(body["attributes"]) if body.get("attributes") else {}
        attributes[OTEL_CARRIER_ATTRIBUTE] = carrier
        body["attributes"] = json.dumps(attributes)


def extract_trace_context(carrier: Any) -> Any:
    """The OpenTelemetry context of a carrier ``inject_trace_context``
    wrote, or None (no OpenTelemetry, not a carrier, no valid span context).
    Never raises: the carrier lives in user-writable attributes."""
    if not isinstance(carrier, dict):
        return None
    try:
        from opentelemetry.trace import get_current_span
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator
    except ImportError:
        return None
    try:
        ctx = TraceContextTextMapPropagator().extract({str(k): str(v) for k, v in carrier.items()})
        return ctx if get_current_span(ctx).get_span_context().is_valid else None
    except Exception:
        return None


class RunTrace:
    """A run's propagated trace context, attached around its body so the
    spans its code opens, and the workflow's own span (_tracing), join the
    trace of whoever started it."""

    def __init__(self, attributes_text: Optional[str]) -> None:
        self._token: Any = None
        if not attributes_text or OTEL_CARRIER_ATTRIBUTE not in attributes_text:
            return
        try:
            carrier = json.loads(attributes_text).get(OTEL_CARRIER_ATTRIBUTE)
        except (ValueError, AttributeError):
            return
        ctx = extract_trace_context(carrier)
        if ctx is not None:
            from opentelemetry import context as otel_context

            self._token = otel_context.attach(ctx)

    def close(self) -> None:
        if self._token is not None:
            from opentelemetry import context as otel_context

            otel_context.detach(self._token)
            self._token = None
