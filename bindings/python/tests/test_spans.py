"""DBOS's OpenTelemetry spans on the real agent: one per workflow run and
per step (a data source transaction is a step), current while the user's
code runs (DBOS.span is it, the user's spans nest under it), steps under
their workflow, the status OK or ERROR, DBOS's attributes; a background or
queued run under its caller's trace; nothing when enable_otlp is off or
OpenTelemetry is absent; OTLP export to otlp_traces_endpoints."""

from __future__ import annotations

import asyncio
import http.server
import json
import logging
import os
import subprocess
import sys
import tempfile
import threading
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
import sqlalchemy
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry._logs import get_logger_provider, set_logger_provider
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.trace import StatusCode

from dbos_agent import DBOS, DBOSClient, DBOSContextSetAuth, PropagateOtelContext, SetWorkflowID, SQLAlchemyDatasource

from conftest import TESTS, AgentEnv, new_id

span_queue = DBOS.register_queue("span_queue")
user_tracer = trace.get_tracer("spans-test")


@DBOS.step()
def traced_step(x: int) -> Dict[str, Any]:
    """What the step sees: DBOS.span's id, and a span of its own's parent."""
    here = DBOS.span
    with user_tracer.start_as_current_span("inside_step") as mine:
        parent = mine.parent  # type: ignore[attr-defined]
    return {"span": here.get_span_context().span_id if here else None, "user_parent": parent.span_id if parent else None, "x": x}


@DBOS.workflow()
def traced_workflow(x: int) -> Dict[str, Any]:
    with user_tracer.start_as_current_span("manual_span"):
        seen = traced_step(x)
        sub = DBOS.tracer.start_span({"name": "a new span"}, parent=DBOS.span)
        DBOS.tracer.end_span(sub)
    span = DBOS.span
    seen["workflow_span"] = span.get_span_context().span_id if span is not None else None
    return seen


@DBOS.step()
async def traced_step_async(x: int) -> int:
    assert DBOS.span is not None
    return DBOS.span.get_span_context().span_id  # type: ignore[no-any-return]


@DBOS.workflow()
async def traced_workflow_async(x: int) -> Tuple[int, int]:
    step_span = await traced_step_async(x)
    return step_span, DBOS.span.get_span_context().span_id


attempts: Dict[str, int] = {}


@DBOS.step(retries_allowed=True, max_attempts=2, interval_seconds=0.01)
def span_flaky_step(tag: str) -> str:
    attempts[tag] = attempts.get(tag, 0) + 1
    if attempts[tag] < 2:
        raise RuntimeError(f"attempt {attempts[tag]} of {tag} failed")
    return tag


@DBOS.step()
def span_failing_step() -> None:
    raise ValueError("the step failed")


@DBOS.workflow()
def span_failing_workflow(tag: str) -> str:
    span_flaky_step(tag)
    try:
        span_failing_step()
    except ValueError:
        pass
    raise KeyError("the workflow failed")


@DBOS.workflow()
def span_plain_traced() -> str:
    return "done"


@DBOS.workflow()
def span_parent_workflow() -> str:
    child = span_plain_traced()
    handle = DBOS.start_workflow(span_plain_traced)
    return child + handle.get_result()


@DBOS.step()
def span_logging_step() -> None:
    DBOS.logger.info("a line of the step")


@DBOS.workflow()
def span_logging_workflow() -> None:
    span_logging_step()
    DBOS.logger.debug("below the default level")
    DBOS.logger.info("a line of the workflow")


@DBOS.step()
def span_step_in_handler() -> int:
    return 1


@DBOS.workflow()
def span_workflow_in_handler() -> int:
    try:
        raise OSError("handled by the workflow")
    except OSError:
        return span_step_in_handler()  # a step called inside an except block is not failed by it


# Data sources are created before launch, as DBOS requires.
app_db = SQLAlchemyDatasource.create(f"sqlite:///{os.path.join(tempfile.mkdtemp(prefix='dbspans'), 'app.sqlite')}")


@app_db.transaction()
def span_insert_row() -> int:
    app_db.sql_session().execute(sqlalchemy.text("CREATE TABLE IF NOT EXISTS t (x INTEGER)"))
    return DBOS.span.get_span_context().span_id  # type: ignore[no-any-return]


@DBOS.workflow()
def span_transacting() -> int:
    return span_insert_row()


@pytest.fixture(scope="module")
def exporter() -> Iterator[InMemorySpanExporter]:
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    exp = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exp))
    yield exp
    exp.shutdown()


@pytest.fixture(scope="module")
def log_exporter() -> Iterator[InMemoryLogRecordExporter]:
    provider = get_logger_provider()
    if not isinstance(provider, LoggerProvider):
        provider = LoggerProvider()
        set_logger_provider(provider)
    exp = InMemoryLogRecordExporter()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exp))
    yield exp
    exp.shutdown()


def _launch(agent_env: AgentEnv, **config: Any) -> None:
    DBOS.destroy()
    DBOS(config={"name": "pytest", "agent_socket": agent_env.socket, **config})
    DBOS.launch()


@pytest.fixture(scope="module")
def traced(
    agent_env: AgentEnv, exporter: InMemorySpanExporter, log_exporter: InMemoryLogRecordExporter,
) -> Iterator[InMemorySpanExporter]:
    _launch(agent_env, enable_otlp=True, otlp_attributes={"team": "spans"})
    try:
        yield exporter
    finally:
        DBOS.destroy()


def named(spans: List[ReadableSpan], name: str) -> List[ReadableSpan]:
    return [s for s in spans if s.name == name]


def one(spans: List[ReadableSpan], name: str, wid: Optional[str] = None) -> ReadableSpan:
    found = [s for s in named(spans, name) if wid is None or (s.attributes or {}).get("operationUUID") == wid]
    assert len(found) == 1, [(s.name, dict(s.attributes or {})) for s in spans]
    return found[0]


def span_id(s: ReadableSpan) -> int:
    assert s.context is not None
    return s.context.span_id


def parent_id(s: ReadableSpan) -> Optional[int]:
    return s.parent.span_id if s.parent is not None else None


def test_workflow_and_step_spans_nest_and_carry_dbos_attributes(traced: InMemorySpanExporter) -> None:
    traced.clear()
    wid = new_id("span")
    with SetWorkflowID(wid):
        seen = traced_workflow(7)
    spans = list(traced.get_finished_spans())
    wf = one(spans, traced_workflow.__qualname__)
    step = one(spans, traced_step.__qualname__)
    manual = one(spans, "manual_span")
    sub = one(spans, "a new span")
    inside = one(spans, "inside_step")
    # The tree DBOS makes: workflow > user span > (step > user span in step, tracer span).
    assert wf.parent is None
    assert parent_id(manual) == span_id(wf)
    assert parent_id(step) == span_id(manual) and parent_id(sub) == span_id(manual)
    assert parent_id(inside) == span_id(step)
    # One trace for the whole tree; a span of other work of the process that
    # ended after the clear (the first test of the module runs right after
    # launch) is in a trace of its own and not this workflow's.
    tree = (wf, manual, step, sub, inside)
    assert len({s.context.trace_id for s in tree if s.context is not None}) == 1
    trace = wf.context.trace_id if wf.context is not None else None
    for s in spans:
        if s.context is not None and s.context.trace_id != trace:
            assert dict(s.attributes or {}).get("operationUUID") != wid, f"span {s.name} of {wid} in another trace"
    # DBOS.span is DBOS's span in a step, the workflow's in its body.
    assert seen["span"] == span_id(step) and seen["user_parent"] == span_id(step)
    assert seen["workflow_span"] == span_id(wf)
    for s in (wf, step, sub):
        attrs = dict(s.attributes or {})
        assert attrs["applicationVersion"] == DBOS.application_version and attrs["executorID"] == DBOS.executor_id
        assert attrs["team"] == "spans" and "queueName" not in attrs
    assert dict(wf.attributes or {})["operationUUID"] == wid and dict(wf.attributes or {})["operationType"] == "workflow"
    assert dict(step.attributes or {})["operationUUID"] == wid and dict(step.attributes or {})["operationType"] == "step"
    assert dict(wf.attributes or {})["authenticatedUserRoles"] == ""
    assert wf.status.status_code == StatusCode.OK and step.status.status_code == StatusCode.OK
    # Spans end in order: the step before its workflow.
    assert spans.index(step) < spans.index(wf)
    # Outside a workflow there is no DBOS span, and a step is a plain call.
    assert DBOS.span is None
    traced.clear()
    traced_step(1)
    assert not named(list(traced.get_finished_spans()), traced_step.__qualname__)


def test_async_workflow_and_step_spans(traced: InMemorySpanExporter) -> None:
    traced.clear()
    wid = new_id("span")

    async def main() -> Tuple[int, int]:
        with SetWorkflowID(wid):
            return await traced_workflow_async(3)

    step_seen, wf_seen = asyncio.run(main())
    spans = list(traced.get_finished_spans())
    wf = one(spans, traced_workflow_async.__qualname__)
    step = one(spans, traced_step_async.__qualname__)
    assert wf.parent is None and parent_id(step) == span_id(wf)
    assert step_seen == span_id(step) and wf_seen == span_id(wf)
    assert dict(step.attributes or {})["operationUUID"] == wid
    assert wf.status.status_code == StatusCode.OK


def test_errors_set_the_status_and_retries_are_events(traced: InMemorySpanExporter) -> None:
    traced.clear()
    tag = new_id("span")
    with pytest.raises(KeyError):
        span_failing_workflow(tag)
    spans = list(traced.get_finished_spans())
    wf = one(spans, span_failing_workflow.__qualname__)
    assert wf.status.status_code == StatusCode.ERROR and wf.status.description == str(KeyError("the workflow failed"))
    flaky = one(spans, span_flaky_step.__qualname__)
    assert flaky.status.status_code == StatusCode.OK and parent_id(flaky) == span_id(wf)
    assert [e.name for e in flaky.events] == ["Step attempt 0 failed"]
    event_attrs = dict(flaky.events[0].attributes or {})
    assert event_attrs["error"] == f"attempt 1 of {tag} failed" and event_attrs["retryIntervalSeconds"] == 0.01
    failed = one(spans, span_failing_step.__qualname__)
    assert failed.status.status_code == StatusCode.ERROR and failed.status.description == "the step failed"
    # An exception the workflow is handling is not its step's.
    traced.clear()
    assert span_workflow_in_handler() == 1
    spans = list(traced.get_finished_spans())
    assert one(spans, span_step_in_handler.__qualname__).status.status_code == StatusCode.OK
    assert one(spans, span_workflow_in_handler.__qualname__).status.status_code == StatusCode.OK


def test_background_children_and_queued_runs_join_their_callers_trace(traced: InMemorySpanExporter) -> None:
    traced.clear()
    with user_tracer.start_as_current_span("caller") as caller:
        started = DBOS.start_workflow(span_plain_traced)
        assert started.get_result() == "done"
        inline = new_id("span")
        with SetWorkflowID(inline):
            assert span_plain_traced() == "done"
    root = DBOS.start_workflow(span_plain_traced)
    assert root.get_result() == "done"
    spans = list(traced.get_finished_spans())
    caller_id = caller.get_span_context().span_id
    # DBOS.start_workflow runs on another thread, still under the caller's span.
    assert parent_id(one(spans, span_plain_traced.__qualname__, started.workflow_id)) == caller_id
    assert parent_id(one(spans, span_plain_traced.__qualname__, inline)) == caller_id
    assert one(spans, span_plain_traced.__qualname__, root.workflow_id).parent is None

    # A child, called or started, is under its parent's span.
    traced.clear()
    parent = DBOS.start_workflow(span_parent_workflow)
    assert parent.get_result() == "donedone"
    spans = list(traced.get_finished_spans())
    parent_span = one(spans, span_parent_workflow.__qualname__)
    children = named(spans, span_plain_traced.__qualname__)
    assert len(children) == 2 and all(parent_id(c) == span_id(parent_span) for c in children)

    # A queued run: its queue's name, and the caller's trace only when propagated.
    traced.clear()
    with user_tracer.start_as_current_span("enqueuer") as enqueuer:
        with PropagateOtelContext():
            joined = span_queue.enqueue(span_plain_traced)
        alone = span_queue.enqueue(span_plain_traced)
    assert joined.get_result() == "done" and alone.get_result() == "done"
    spans = list(traced.get_finished_spans())
    joined_span = one(spans, span_plain_traced.__qualname__, joined.workflow_id)
    alone_span = one(spans, span_plain_traced.__qualname__, alone.workflow_id)
    assert dict(joined_span.attributes or {})["queueName"] == "span_queue"
    assert parent_id(joined_span) == enqueuer.get_span_context().span_id
    assert alone_span.parent is None and alone_span.context is not None
    assert alone_span.context.trace_id != enqueuer.get_span_context().trace_id


def test_a_client_enqueue_with_otel_context_joins_the_callers_trace(
    traced: InMemorySpanExporter, agent_env: AgentEnv
) -> None:
    traced.clear()
    name = span_plain_traced.__qualname__
    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        with user_tracer.start_as_current_span("client_caller") as caller:
            joined = client.enqueue(
                {"queue_name": "span_queue", "workflow_name": name, "otel_context": otel_context.get_current(),
                 "attributes": {"customer": "acme", "dbos.otelContext": {"traceparent": "written by hand"}}}
            )
        # An empty context has nothing to propagate: no carrier, no attributes.
        empty = client.enqueue({"queue_name": "span_queue", "workflow_name": name, "otel_context": otel_context.Context()})
        assert joined.get_result() == "done" and empty.get_result() == "done"
        attrs = client.retrieve_workflow(joined.workflow_id).get_status().attributes
        # The caller's own attributes stay beside the carrier, which wins over one written by hand.
        assert attrs is not None and attrs["customer"] == "acme"
        assert attrs["dbos.otelContext"]["traceparent"].split("-")[2] == format(caller.get_span_context().span_id, "016x")
        assert client.retrieve_workflow(empty.workflow_id).get_status().attributes is None
    finally:
        client.destroy()
    spans = list(traced.get_finished_spans())
    joined_span = one(spans, name, joined.workflow_id)
    assert parent_id(joined_span) == caller.get_span_context().span_id
    assert joined_span.context is not None and joined_span.context.trace_id == caller.get_span_context().trace_id
    assert one(spans, name, empty.workflow_id).parent is None

    # DBOS.enqueue_workflow_with_options: an enclosing PropagateOtelContext
    # applies, and the options' own otel_context wins over it.
    traced.clear()
    with user_tracer.start_as_current_span("ambient") as ambient_span:
        with PropagateOtelContext():
            under_block = DBOS.enqueue_workflow_with_options(
                {"queue_name": "span_queue", "workflow_name": name, "attributes": {"k": 1}}
            )
            with user_tracer.start_as_current_span("explicit") as explicit_span:
                explicit = otel_context.get_current()
            own = DBOS.enqueue_workflow_with_options(
                {"queue_name": "span_queue", "workflow_name": name, "otel_context": explicit}
            )
    assert under_block.get_result() == "done" and own.get_result() == "done"
    assert (under_block.get_status().attributes or {})["k"] == 1
    spans = list(traced.get_finished_spans())
    assert parent_id(one(spans, name, under_block.workflow_id)) == ambient_span.get_span_context().span_id
    assert parent_id(one(spans, name, own.workflow_id)) == explicit_span.get_span_context().span_id


def test_authenticated_identity_is_on_the_spans(traced: InMemorySpanExporter) -> None:
    traced.clear()
    with DBOSContextSetAuth("alice", ["admin", "user"]):
        assert span_plain_traced() == "done"
    attrs = dict(one(list(traced.get_finished_spans()), span_plain_traced.__qualname__).attributes or {})
    assert attrs["authenticatedUser"] == "alice"
    assert json.loads(str(attrs["authenticatedUserRoles"])) == ["admin", "user"]


def test_a_transaction_is_a_step_span(traced: InMemorySpanExporter) -> None:
    traced.clear()
    seen = span_transacting()
    spans = list(traced.get_finished_spans())
    tx = one(spans, span_insert_row.__qualname__)
    assert seen == span_id(tx) and parent_id(tx) == span_id(one(spans, span_transacting.__qualname__))
    assert dict(tx.attributes or {})["operationType"] == "step" and tx.status.status_code == StatusCode.OK


def test_dbos_logger_records_carry_dbos_attributes_and_their_span(
    traced: InMemorySpanExporter, log_exporter: InMemoryLogRecordExporter,
) -> None:
    traced.clear()
    log_exporter.clear()
    wid = new_id("span")
    with SetWorkflowID(wid):
        span_logging_workflow()
    DBOS.logger.info("a line outside")
    spans = list(traced.get_finished_spans())
    records = {str(r.log_record.body): r.log_record for r in log_exporter.get_finished_logs()}
    assert "below the default level" not in records  # DBOS's default log_level: INFO
    step, wf = one(spans, span_logging_step.__qualname__), one(spans, span_logging_workflow.__qualname__)
    for body, span in (("a line of the step", step), ("a line of the workflow", wf)):
        record = records[body]
        assert span.context is not None
        assert record.span_id == span.context.span_id and record.trace_id == span.context.trace_id
        attrs = dict(record.attributes or {})
        assert attrs["operationUUID"] == wid and attrs["traceId"] == format(span.context.trace_id, "032x")
        assert attrs["applicationVersion"] == DBOS.application_version and attrs["executorID"] == DBOS.executor_id
        assert attrs["team"] == "spans"
    outside = dict(records["a line outside"].attributes or {})
    assert outside["team"] == "spans" and "operationUUID" not in outside and "traceId" not in outside


def test_semconv_names_and_tracing_off(agent_env: AgentEnv, exporter: InMemorySpanExporter) -> None:
    try:
        _launch(agent_env, enable_otlp=True, otel_attribute_format="semconv")
        exporter.clear()
        wid = new_id("span")
        with SetWorkflowID(wid):
            assert span_plain_traced() == "done"
        attrs = dict(one(list(exporter.get_finished_spans()), span_plain_traced.__qualname__).attributes or {})
        assert attrs["dbos.operation.workflow_id"] == wid and attrs["dbos.operation.type"] == "workflow"
        assert "dbos.application.version" in attrs and "applicationVersion" not in attrs and "operationUUID" not in attrs

        # DBOS's default: no enable_otlp, no spans (DBOS.span is then the user's).
        _launch(agent_env)
        assert DBOS.tracer.disable_otlp is True
        exporter.clear()
        assert traced_workflow(1)["x"] == 1
        assert {s.name for s in exporter.get_finished_spans()} == {"manual_span", "inside_step", "a new span"}
        assert not [h for h in logging.getLogger("dbos").handlers if "opentelemetry" in type(h).__module__]
    finally:
        DBOS.destroy()
    # DBOS.destroy takes back what the config attached to DBOS.logger.
    assert not logging.getLogger("dbos").filters


def test_without_opentelemetry_enable_otlp_only_warns(
    agent_env: AgentEnv, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    for name in [m for m in sys.modules if m == "opentelemetry" or m.startswith("opentelemetry.")]:
        monkeypatch.setitem(sys.modules, name, None)
    try:
        _launch(agent_env, enable_otlp=True)
        assert "OpenTelemetry is not installed" in caplog.text
        handle = DBOS.start_workflow(span_plain_traced)
        assert handle.get_result() == "done" and DBOS.span is None
    finally:
        DBOS.destroy()


class _Collector(http.server.BaseHTTPRequestHandler):
    bodies: List[Tuple[str, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        _Collector.bodies.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


EXPORTING_APP = """
import sys
from dbos_agent import DBOS

@DBOS.workflow()
def exported_workflow() -> str:
    return "exported"

DBOS(config={"name": "spans-otlp", "agent_socket": sys.argv[1], "enable_otlp": True,
             "otlp_traces_endpoints": [sys.argv[2] + "/v1/traces"], "otlp_logs_endpoints": [sys.argv[2] + "/v1/logs"]})
DBOS.launch()
print(exported_workflow())
DBOS.logger.info("a line for the collector")
DBOS.destroy()
from opentelemetry import trace
from opentelemetry._logs import get_logger_provider
trace.get_tracer_provider().shutdown()  # flushes the batches to the collector
get_logger_provider().shutdown()
"""


def test_spans_are_exported_to_otlp_traces_endpoints(agent_env: AgentEnv) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        out = subprocess.run(
            [sys.executable, "-c", EXPORTING_APP, agent_env.socket, endpoint],
            capture_output=True, text=True, timeout=120, env=dict(os.environ),
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "exported"
    finally:
        server.shutdown()
        server.server_close()
    traces = b"".join(b for p, b in _Collector.bodies if p == "/v1/traces")
    logs = b"".join(b for p, b in _Collector.bodies if p == "/v1/logs")
    assert {p for p, _ in _Collector.bodies} == {"/v1/traces", "/v1/logs"}
    # OTLP protobuf keeps strings as UTF-8: the span's name and the resource
    # DBOS names after the application; the log line and its attributes.
    assert b"exported_workflow" in traces and b"spans-otlp" in traces and b"operationUUID" in traces
    assert b"a line for the collector" in logs and b"spans-otlp" in logs and b"applicationVersion" in logs


def test_workflows_run_without_opentelemetry(agent_env: AgentEnv) -> None:
    # opentelemetry is optional and OTLP off by default: starting, enqueueing,
    # propagating and recovering workflows import nothing of it.
    env = dict(os.environ, DBOS_AGENT_SOCKET=agent_env.socket)
    result = subprocess.run(
        [sys.executable, str(TESTS / "apps" / "otel_absent.py")], capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "OK []" in result.stdout
