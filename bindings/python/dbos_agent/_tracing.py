"""``DBOS.tracer`` and ``DBOS.span``: DBOS Python's tracer, safe when
OpenTelemetry is not installed (then its spans do nothing and there is no
current span). The binding itself opens no spans around workflows and steps:
``DBOS.span`` is the application's current span, as DBOS reports the
current active span."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional


class _NoopSpan:
    """What ``start_span`` returns without OpenTelemetry: a span that
    records nothing."""

    def set_attribute(self, key: str, value: Any) -> None:
        pass

    def set_attributes(self, attributes: Dict[str, Any]) -> None:
        pass

    def add_event(self, name: str, attributes: Optional[Dict[str, Any]] = None) -> None:
        pass

    def set_status(self, *args: Any, **kwargs: Any) -> None:
        pass

    def record_exception(self, *args: Any, **kwargs: Any) -> None:
        pass

    def is_recording(self) -> bool:
        return False

    def end(self, end_time: Optional[int] = None) -> None:
        pass


def _otel_trace() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace


class DBOSTracer:
    """DBOS Python's tracer: ``start_span(attributes, parent=None)``,
    ``end_span(span)``, ``get_current_span()``."""

    otlp_attributes: Dict[str, str] = {}

    def __init__(self) -> None:
        self.app_id = os.environ.get("DBOS__APPID", None)
        self.disable_otlp = False

    def start_span(self, attributes: Dict[str, Any], parent: Any = None) -> Any:
        trace = _otel_trace()
        if trace is None:
            return _NoopSpan()
        from ._dbos import DBOS

        tracer = trace.get_tracer("dbos-tracer")
        context = trace.set_span_in_context(parent) if parent else None
        span = tracer.start_span(name=attributes["name"], context=context)
        attributes = dict(attributes)
        attributes["applicationID"] = self.app_id
        attributes["applicationVersion"] = DBOS.application_version
        attributes["executorID"] = DBOS.executor_id
        for k, v in attributes.items():
            if k != "name" and v is not None and isinstance(v, (str, bool, int, float)):
                span.set_attribute(k, v)
        for k, v in self.otlp_attributes.items():
            span.set_attribute(k, v)
        return span

    def end_span(self, span: Any) -> None:
        span.end()

    def get_current_span(self) -> Any:
        """The current active span, if any and valid (it might not be
        DBOS's); None without OpenTelemetry."""
        trace = _otel_trace()
        if trace is None:
            return None
        span = trace.get_current_span()
        return span if span.get_span_context().is_valid else None


dbos_tracer = DBOSTracer()
