"""OpenTelemetry spans, as DBOS Python 3.4 makes them: one for each
workflow run and each step (a data source transaction is a step), current
while the user's code runs, so ``DBOS.span`` there is DBOS's span and the
user's own spans nest under it; a step's span under its workflow's; the
status OK, or ERROR with the exception's text.

As in DBOS, spans are made only when the config says ``enable_otlp: True``
(``DBOS.tracer.disable_otlp`` is its negation), and here only when
OpenTelemetry (the ``otel`` extra) is importable: without it, or with
tracing off, nothing imports it and each hook costs one attribute check.
``otlp_traces_endpoints`` adds an OTLP/HTTP exporter (the
``opentelemetry-exporter-otlp-proto-http`` package, imported only then) for
each endpoint; ``otlp_attributes`` go on every span;
``otel_attribute_format: "semconv"`` names DBOS's attributes ``dbos.*``.

``DBOS.tracer`` is DBOS's tracer (``start_span``, ``end_span``,
``get_current_span``), safe without OpenTelemetry (its spans then do
nothing)."""

from __future__ import annotations

import contextvars
import json
import logging
import os
import sys
import weakref
from typing import Any, Dict, List, Literal, Optional, cast

from . import _auth as auth
from ._context import current_ctx

logger = logging.getLogger("dbos_agent")

# The config keys this module reads (DBOS Python's names).
CONFIG_KEYS = {
    "enable_otlp", "otlp_traces_endpoints", "otlp_attributes", "otel_attribute_format", "otlp_logs_endpoints",
    "otlp_log_level", "log_level",
}

OtelAttributeFormat = Literal["legacy", "semconv"]

# DBOS's attribute names and their OpenTelemetry-style names (DBOS 3.4's
# table: what dashboards built on either format look for).
_LEGACY_TO_SEMCONV: Dict[str, str] = {
    "operationUUID": "dbos.operation.workflow_id",
    "operationType": "dbos.operation.type",
    "applicationID": "dbos.application.id",
    "applicationVersion": "dbos.application.version",
    "executorID": "dbos.executor.id",
    "queueName": "dbos.queue.name",
    "authenticatedUser": "dbos.user.name",
    "authenticatedUserRoles": "dbos.user.roles",
    "authenticatedUserAssumedRole": "dbos.user.assumed_role",
}


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


class _Otel:
    """The OpenTelemetry modules the spans need, imported once tracing is
    configured on."""

    def __init__(self) -> None:
        from opentelemetry import context, trace
        from opentelemetry.trace import Status, StatusCode

        self.trace = trace
        self.context = context
        self.ok = Status(StatusCode.OK)
        self.status = Status
        self.error_code = StatusCode.ERROR


# Set by DBOSTracer.config when tracing is on and OpenTelemetry importable;
# None keeps every hook to one check.
_otel: Optional[_Otel] = None


class DBOSTracer:
    """DBOS Python's tracer: ``start_span(attributes, parent=None)``,
    ``end_span(span)``, ``get_current_span()``."""

    otlp_attributes: Dict[str, str] = {}

    def __init__(self) -> None:
        self.app_id = os.environ.get("DBOS__APPID", None)
        # What every span names (DBOS.application_version, executor_id):
        # DBOS sets them once launch has settled them.
        self.application_version = ""
        self.executor_id = "local"
        self.disable_otlp = False
        self.otel_attribute_format: OtelAttributeFormat = "legacy"

    def config(self, config: Dict[str, Any]) -> None:
        """Apply a DBOS config (DBOSConfig's keys): DBOS() calls it."""
        global _otel
        _otel = None
        self.otlp_attributes = dict(config.get("otlp_attributes") or {})
        self.disable_otlp = not config.get("enable_otlp", False)
        self.otel_attribute_format = config.get("otel_attribute_format") or "legacy"
        if not self.disable_otlp:
            try:
                _otel = _Otel()
            except ImportError:
                logger.warning(
                    "enable_otlp is set, but OpenTelemetry is not installed (install dbos-agent[otel]): no spans are made"
                )
        _config_logs(config, self.otlp_attributes, self.app_id)
        if _otel is None:
            return
        endpoints: List[str] = list(config.get("otlp_traces_endpoints") or [])
        if endpoints:
            _export_to(endpoints, str(config.get("name") or ""))
        if isinstance(_otel.trace.get_tracer_provider(), _otel.trace.ProxyTracerProvider):
            logger.warning("OTLP is enabled but tracer provider not set, skipping trace exporter setup.")

    def _resolve_attribute_name(self, key: str) -> str:
        if self.otel_attribute_format == "semconv":
            return _LEGACY_TO_SEMCONV.get(key, key)
        return key

    def start_span(self, attributes: Dict[str, Any], parent: Any = None) -> Any:
        trace = _otel_trace()
        if trace is None:
            return _NoopSpan()
        context = trace.set_span_in_context(parent) if parent else None
        return self._start(trace, attributes, context)

    def _start(self, trace: Any, attributes: Dict[str, Any], context: Any) -> Any:
        span = trace.get_tracer("dbos-tracer").start_span(name=attributes["name"], context=context)
        attributes = dict(attributes)
        attributes["applicationID"] = self.app_id
        attributes["applicationVersion"] = self.application_version
        attributes["executorID"] = self.executor_id
        for k, v in attributes.items():
            if k != "name" and v is not None and isinstance(v, (str, bool, int, float)):
                span.set_attribute(self._resolve_attribute_name(k), v)
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


def _export_to(endpoints: List[str], service_name: str) -> None:
    """An OTLP/HTTP exporter for each endpoint, on the global tracer provider
    (made, named after the application, if there is none), as DBOS does."""
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as e:
        logger.warning(
            "otlp_traces_endpoints is set, but the OTLP exporter cannot be imported (%s; install dbos-agent[otel]): "
            "spans are not exported", e,
        )
        return
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):
        provider = TracerProvider(resource=Resource(attributes={SERVICE_NAME: service_name}))
        trace.set_tracer_provider(provider)
    for endpoint in endpoints:
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))  # type: ignore[attr-defined]


# ---------------------------------------------------------------------------
# DBOS's spans around runs and steps (the hooks in _core and _datasource)

# The DBOS span of the workflow or step this code runs in (DBOS's
# get_current_dbos_span, which events go to; the current OpenTelemetry span
# may be one of the user's, nested under it).
_dbos_span: "contextvars.ContextVar[Any]" = contextvars.ContextVar("dbos_agent_span", default=None)

# The caller's context of a run started in the background (DBOS.start_workflow):
# its thread starts from an empty context, and its span belongs under the
# caller's, as in DBOS.
_submitted: "weakref.WeakKeyDictionary[Any, Any]" = weakref.WeakKeyDictionary()


class OpenSpan:
    """A DBOS span, current until ``end``."""

    __slots__ = ("span", "_otel", "_token", "_dbos_token", "_outer")

    def __init__(self, otel: _Otel, span: Any, token: Any, dbos_token: Any) -> None:
        self.span = span
        self._otel = otel
        self._token = token
        self._dbos_token = dbos_token
        # An exception being handled where the span opened is not the span's.
        self._outer = sys.exc_info()[1]

    def end(self, error: Optional[BaseException] = None) -> None:
        """End the span: ERROR with the exception propagating through the
        caller's ``finally``, else ``error``; OK without either."""
        otel = self._otel
        try:
            raised = sys.exc_info()[1]
            if raised is not None and raised is not self._outer:
                error = raised
            self.span.set_status(otel.ok if error is None else otel.status(otel.error_code, description=str(error)))
            self.span.end()
        finally:
            _dbos_span.reset(self._dbos_token)
            otel.context.detach(self._token)


class _NoSpan:
    __slots__ = ()

    def end(self, error: Optional[BaseException] = None) -> None:
        pass


_NO_SPAN = _NoSpan()


def _open(otel: _Otel, attributes: Dict[str, Any], run: Any, parent: Any) -> Any:
    identity = auth.get_authentication()
    attributes["operationUUID"] = run.workflow_id or None
    attributes["authenticatedUser"] = identity.user
    attributes["authenticatedUserRoles"] = json.dumps(identity.roles) if identity.roles is not None else ""
    attributes["authenticatedUserAssumedRole"] = identity.assumed_role
    span = dbos_tracer._start(otel.trace, attributes, parent)
    token = otel.context.attach(otel.trace.set_span_in_context(span))
    return OpenSpan(otel, span, token, _dbos_span.set(span))


def remember_caller(run: Any, pushed: bool) -> None:
    """Keep the caller's context for a run it started in the background."""
    otel = _otel
    if otel is None or pushed or dbos_tracer.disable_otlp:
        return
    _submitted[run] = otel.context.get_current()


def workflow_span(run: Any, name: str) -> Any:
    """Open the span of a workflow run (its ``end`` closes it): under the
    trace propagated to the run if any, else its background caller's span,
    else the current span."""
    otel = _otel
    if otel is None or dbos_tracer.disable_otlp:
        return _NO_SPAN
    try:
        parent = _submitted.pop(run, None)
        if otel.trace.get_current_span().get_span_context().is_valid:
            parent = None  # a propagated trace (PropagateOtelContext), or the inline caller's span
        attributes = {"name": name, "operationType": "workflow", "queueName": run.queue_name}
        return _open(otel, attributes, run, parent)
    except Exception as e:  # tracing never fails a workflow
        logger.warning("workflow %s: its span could not be opened: %s", run.workflow_id, e)
        return _NO_SPAN


def step_span(run: Any, name: str) -> Any:
    """Open the span of a step of ``run`` (under the workflow's span)."""
    otel = _otel
    if otel is None or dbos_tracer.disable_otlp:
        return _NO_SPAN
    try:
        return _open(otel, {"name": name, "operationType": "step"}, run, None)
    except Exception as e:
        logger.warning("workflow %s: the span of step %s could not be opened: %s", run.workflow_id, name, e)
        return _NO_SPAN


def add_event(name: str, attributes: Dict[str, Any]) -> None:
    """An event on the current DBOS span (a step's failed attempt, a
    transaction's retry), as DBOS records them."""
    if _otel is None:
        return
    span = _dbos_span.get()
    if span is not None:
        span.add_event(name, attributes)


# ---------------------------------------------------------------------------
# DBOS.logger's records, as DBOS configures them: the config's log_level
# (INFO by default), DBOS's attributes on every record, and with enable_otlp an OpenTelemetry handler (to the global logger
# provider, or to OTLP/HTTP exporters for otlp_logs_endpoints).

_DBOS_LOGGER = "dbos"  # DBOS.logger
_log_filter: Optional[logging.Filter] = None
_log_handler: Optional[logging.Handler] = None


class DBOSLogTransformer(logging.Filter):
    """DBOS's attributes on each record of DBOS.logger: applicationID,
    applicationVersion, executorID, the config's otlp_attributes, and in a
    workflow or step its operationUUID and (with spans on) traceId."""

    def __init__(self, otlp_attributes: Dict[str, str], app_id: Optional[str]) -> None:
        super().__init__()
        self.app_id = app_id or ""
        self.otlp_attributes = otlp_attributes

    def filter(self, record: logging.LogRecord) -> bool:
        record.applicationID = self.app_id
        record.applicationVersion = dbos_tracer.application_version
        record.executorID = dbos_tracer.executor_id
        for k, v in self.otlp_attributes.items():
            setattr(record, k, v)
        ctx = current_ctx()
        if ctx is not None:
            record.operationUUID = ctx.run.workflow_id
            otel = _otel
            if otel is not None and not dbos_tracer.disable_otlp:
                span_context = otel.trace.get_current_span().get_span_context()
                if span_context.is_valid:
                    record.traceId = format(span_context.trace_id, "032x")
        return True


# DBOS's console handler of DBOS.logger, by the name DBOS gives it.
CONSOLE_HANDLER_NAME = "__dbos_console_log_handler__"


def _console_handler(dbos_logger: logging.Logger) -> Optional[logging.Handler]:
    """DBOS.logger's console handler, added as DBOS adds it: when the logger
    has no handler yet (then it stops propagating, so records are not
    printed twice); None when the application gave it handlers of its own."""
    if not dbos_logger.handlers:
        dbos_logger.propagate = False
        handler = logging.StreamHandler()
        handler.name = CONSOLE_HANDLER_NAME
        handler.setFormatter(
            logging.Formatter("%(asctime)s [%(levelname)8s] (%(name)s:%(filename)s:%(lineno)s) %(message)s", datefmt="%H:%M:%S")
        )
        dbos_logger.addHandler(handler)
    return next((h for h in dbos_logger.handlers if h.name == CONSOLE_HANDLER_NAME), None)


def _config_logs(config: Dict[str, Any], otlp_attributes: Dict[str, str], app_id: Optional[str]) -> None:
    global _log_filter, _log_handler
    dbos_logger = logging.getLogger(_DBOS_LOGGER)
    log_level = config.get("log_level") or "INFO"  # DBOS's default
    dbos_logger.setLevel(log_level)
    console = _console_handler(dbos_logger)
    if console is not None:
        console.setLevel(config.get("console_log_level") or log_level)
    if _log_filter is not None:
        dbos_logger.removeFilter(_log_filter)
    _log_filter = DBOSLogTransformer(otlp_attributes, app_id)
    dbos_logger.addFilter(_log_filter)
    if not config.get("enable_otlp", False) or _log_handler is not None:
        return
    try:
        from opentelemetry._logs import get_logger_provider, set_logger_provider
        from opentelemetry._logs._internal import ProxyLoggerProvider
    except ImportError:
        return  # the tracer's warning said it
    provider = get_logger_provider()
    endpoints: List[str] = list(config.get("otlp_logs_endpoints") or [])
    if endpoints:
        try:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
            from opentelemetry.sdk._logs import LoggerProvider
            from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
            from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        except ImportError as e:
            logger.warning("otlp_logs_endpoints is set, but the OTLP exporter cannot be imported (%s): logs are not exported", e)
        else:
            if isinstance(provider, ProxyLoggerProvider):
                provider = LoggerProvider(Resource.create(attributes={SERVICE_NAME: str(config.get("name") or "")}))
                set_logger_provider(provider)
            for endpoint in endpoints:
                provider.add_log_record_processor(  # type: ignore[attr-defined]
                    BatchLogRecordProcessor(OTLPLogExporter(endpoint=endpoint), export_timeout_millis=5000)
                )
    if isinstance(provider, ProxyLoggerProvider):
        logger.warning("OTLP is enabled but logger provider not set, skipping log exporter setup.")
        return
    _log_handler = _otel_log_handler(provider)
    if config.get("otlp_log_level"):
        _log_handler.setLevel(config["otlp_log_level"])
    dbos_logger.addHandler(_log_handler)


def _otel_log_handler(provider: Any) -> logging.Handler:
    """OpenTelemetry's logging handler: DBOS's (the logging
    instrumentation's) when installed, else the SDK's."""
    try:
        from opentelemetry.instrumentation.logging.handler import LoggingHandler
    except ImportError:
        from opentelemetry.sdk._logs import LoggingHandler as SDKLoggingHandler

        return SDKLoggingHandler(logger_provider=provider)
    return cast(logging.Handler, LoggingHandler(logger_provider=provider, log_code_attributes=True))


def teardown_logs() -> None:
    """Detach what the config attached to DBOS.logger (DBOS.destroy)."""
    global _log_filter, _log_handler
    dbos_logger = logging.getLogger(_DBOS_LOGGER)
    if _log_handler is not None:
        dbos_logger.removeHandler(_log_handler)
        _log_handler.flush()
        _log_handler.close()
        _log_handler = None
    if _log_filter is not None:
        dbos_logger.removeFilter(_log_filter)
        _log_filter = None
