"""Starting and calling workflows, each written once as an operation (see
``_core.drive``) that ``DBOS``'s sync and async paths drive: a direct call
(the workflow runs on the caller's thread or task, or, from workflow code,
as a child whose outcome the parent records), a start in the background,
and an enqueue by name with ``EnqueueOptions`` (DBOS's and DBOSClient's)."""

from __future__ import annotations

import os
import time
from typing import Any, Dict, List, Optional, Tuple, TypedDict, cast

from . import _ambient as ambient
from . import _auth as auth
from . import _classes
from . import _dbos_log as dbos_log
from ._context import (
    _enqueue_options,
    _EnqueueOptions,
    current_attributes,
    current_ctx,
    current_timeout_ms,
    in_timeout_block,
    take_assigned,
    validate_duplication_policy,
    validate_priority,
    validate_workflow_id,
    validate_workflow_id_reuse_policy,
)
from ._core import (
    Engine,
    InBackground,
    Op,
    ParentStep,
    WorkflowRegistration,
    WorkflowRun,
    _now_ms,
    await_result_op,
    child_outcome_body,
    get_result_op,
    record_call,
    start_position,
    start_request_op,
)
from ._error import DBOSException, check_no_shard_key, DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError
from ._serialization import Serializer, WorkflowSerializationFormat, tag_for

# A run that stopped here (cancelled, or taken over by another worker): the
# outcome recorded for its workflow decides.
_STOPPED = (DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError)


def _prepare(
    engine: Engine, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any], queue_name: Optional[str],
    what: str, direct_call: bool = False,
) -> Tuple[Optional[ParentStep], Optional[Dict[str, Any]], str]:
    """The start of a workflow: (the parent step when started from
    workflow code, the start_workflow request, the workflow's id). A
    child whose start is recorded (replay) is not started again: the
    request is None and the id the recorded one. A direct call checks
    the workflow's required roles first, as DBOS does (a start or an
    enqueue is checked when the workflow runs)."""
    # A method's target is named in the row, not recorded in its inputs.
    class_name, config_name = _classes.target_names(reg.method, reg.func, args)
    assumed = auth.check_roles(reg.func, reg.name) if direct_call else None
    parent, recorded = start_position(what, reg.name, engine.serializer)
    pinned = take_assigned()
    assigned = pinned.workflow_id if pinned is not None else None
    if recorded is not None:
        return parent, None, recorded
    body = engine.start_request(
        reg.name, args[1:] if class_name is not None else args, kwargs,
        class_name=class_name, config_name=config_name,
        tag=tag_for(reg.serialization_type, engine.serializer),
        workflow_id=assigned or (parent.child_id() if parent is not None else None),
        queue_name=queue_name,
        run_here=queue_name is None,
        enqueue=_enqueue_options.get(),
        timeout_ms=current_timeout_ms(),
        attributes=current_attributes(),
        parent=parent,
        inherit_deadline=not in_timeout_block(),
    )
    body.update(auth.start_fields(assumed))
    body["app_id"] = dbos_app_id()
    if pinned is not None and pinned.reuse_policy == "reject":
        body["workflow_id_reuse_policy"] = "reject"
    ambient.apply_start(body)
    return parent, body, body["workflow_id"]


def _reclaim_request(
    engine: Engine, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any], wid: str,
    parent: Optional[ParentStep], result_fid: Optional[int],
) -> Optional[Dict[str, Any]]:
    """For a child called directly whose start its parent recorded but
    not its outcome (a recovered parent calling it again): a run_here
    start of the recorded id. The agent then claims a child recovered
    onto the internal queue for this thread, so the parent does not wait
    for it to get a slot of max_concurrency that its own run may be
    holding. None when there is nothing to ask."""
    if parent is None or result_fid in parent.run.history:
        return None  # not a child, or its outcome is recorded
    return engine.start_request(
        reg.name, args, kwargs, tag=tag_for(reg.serialization_type, engine.serializer),
        workflow_id=wid, queue_name=None, run_here=True, parent=parent,
    )


def call_op(engine: Engine, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> "Op[Any]":
    """A direct call of a workflow function: the agent grants the run to
    the caller, which executes it here; a workflow that already ran (or
    runs elsewhere) is waited for, from workflow code as the step
    DBOS.getResult."""
    parent, body, wid = _prepare(engine, reg, args, kwargs, None, f"calling workflow {reg.name}", direct_call=True)
    # The parent's step that records the child's outcome (DBOS.getResult)
    # is drawn with its start, when the call is made, as DBOS draws it: a
    # task of the parent that starts a step while the child runs takes the
    # id after it, however long the start takes.
    result_fid = parent.run.next_function_id() if parent is not None else None
    body = body or _reclaim_request(engine, reg, args, kwargs, wid, parent, result_fid)
    if body is not None:
        reply, generation = yield from start_request_op(engine, body, parent)
        wid = reply.get("workflow_id") or wid
        grant = reply.get("run")
        if not grant:
            # Ended, or running elsewhere: its result is waited for, not run again.
            dbos_log.dbos_logger.debug(f"Workflow {wid} already run with status {reply.get('status')}")
        if grant:
            dbos_log.dbos_logger.debug(f"Running workflow, id: {wid}, name: {reg.name}")
            run = WorkflowRun(grant, generation)
            engine.register_run(run)
            if parent is not None:
                assert result_fid is not None
                return (yield from _child_op(engine, parent.run, run, reg, args, kwargs, result_fid))
            try:
                return (yield from engine.execute_op(run, reg, args, kwargs))
            except _STOPPED:
                pass
    # The start above made (or found) the row: a missing one fails fast.
    if parent is not None:
        assert result_fid is not None
        return (yield from await_result_op(engine, wid, parent.run, result_fid, wait_for_creation=False))
    return (yield from get_result_op(engine, current_ctx(), wid, wait_for_creation=False))


def _child_op(
    engine: Engine, parent: WorkflowRun, run: WorkflowRun, reg: WorkflowRegistration, args: Tuple[Any, ...],
    kwargs: Dict[str, Any], fid: int,
) -> "Op[Any]":
    """Run a child called directly from workflow code here, then record
    its outcome as the parent's step ``fid`` (DBOS.getResult)."""
    started = _now_ms()
    try:
        output = yield from engine.execute_op(run, reg, args, kwargs)
    except _STOPPED:
        # The child stopped here: wait for the outcome that stands.
        return (yield from await_result_op(engine, run.workflow_id, parent, fid, wait_for_creation=False))
    except Exception as e:
        yield record_call(parent, child_outcome_body(engine, parent, fid, run.workflow_id, started, None, e))
        raise
    yield record_call(parent, child_outcome_body(engine, parent, fid, run.workflow_id, started, output, None))
    return output


def start_op(
    engine: Engine, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any], queue_name: Optional[str],
    what: str,
) -> "Op[Tuple[str, Any]]":
    """A start in the background (``queue_name`` None) or an enqueue: the
    workflow's id, and when the agent granted the run to this process, the
    future of its outcome (of the driver's kind: see ``InBackground``). With
    duplication_policy "return-existing" the id is the workflow holding the
    deduplication id."""
    parent, body, wid = _prepare(engine, reg, args, kwargs, queue_name, what)
    if body is None:
        return wid, None
    reply, generation = yield from start_request_op(engine, body, parent)
    grant = reply.get("run")
    future = (yield InBackground(WorkflowRun(grant, generation), reg, args, kwargs)) if grant else None
    return str(reply.get("workflow_id") or wid), future


def enqueue_by_name_op(
    engine: Engine, options: "EnqueueOptions", args: Tuple[Any, ...], kwargs: Dict[str, Any], call: str, app_name: str
) -> "Op[str]":
    """An enqueue by the workflow's name with ``DBOSClient.enqueue``'s
    options (another process may implement the workflow); from workflow
    code it is the caller's step, as a start is."""
    parent, recorded = start_position(call, str(options.get("workflow_name", "")), engine.serializer)
    if recorded is not None:
        return recorded
    # As DBOS: options the call leaves unset fall back to SetWorkflowID,
    # whose reuse policy goes with its id only.
    pinned = take_assigned()
    if pinned is not None and options.get("workflow_id") is None:
        options = cast("EnqueueOptions", dict(options, workflow_id=pinned.workflow_id))
        if options.get("workflow_id_reuse_policy") is None and pinned.reuse_policy is not None:
            options["workflow_id_reuse_policy"] = pinned.reuse_policy
    body = enqueue_request(engine, engine.serializer, options, args, kwargs, call, app_name, parent, ambient_trace=True)
    body["app_id"] = dbos_app_id()
    reply, _ = yield from start_request_op(engine, body, parent)
    return str(reply.get("workflow_id") or body["workflow_id"])


def dbos_app_id() -> str:
    """The application id DBOS Python writes on every workflow it starts
    (its context's app_id: DBOS__APPID, else ""); a client's enqueue and a
    scheduled run carry none."""
    return os.environ.get("DBOS__APPID", "")


class _EnqueueOptionsRequired(TypedDict):
    workflow_name: str
    queue_name: str


class EnqueueOptions(_EnqueueOptionsRequired, total=False):
    """What ``DBOSClient.enqueue`` (and ``DBOS.enqueue_workflow_with_options``)
    takes, as in DBOS Python."""

    workflow_id: str
    workflow_id_reuse_policy: str
    app_version: str
    workflow_timeout: float
    delay_seconds: float
    deduplication_id: str
    duplication_policy: str
    priority: int
    queue_partition_key: str
    authenticated_user: str
    serialization_type: WorkflowSerializationFormat
    class_name: str
    instance_name: str
    attributes: Dict[str, Any]
    authenticated_roles: List[str]
    application_name: Optional[str]
    # The OpenTelemetry context the workflow's span joins when it runs
    # (DBOS's client-side PropagateOtelContext).
    otel_context: Any
    # DBOS Enterprise's sharded system databases; the agent's is unsharded
    # (check_no_shard_key).
    shard_key: str


def enqueue_request(
    engine: Engine,
    serializer: Serializer,
    options: EnqueueOptions,
    args: Any,
    kwargs: Dict[str, Any],
    call: str,
    own_app: str,
    parent: Optional[ParentStep] = None,
    ambient_trace: bool = False,
) -> Dict[str, Any]:
    """The start_workflow request for ``EnqueueOptions``, as DBOS Python
    builds the row: a timeout starts counting when the workflow is dequeued,
    ``delay_seconds`` keeps it DELAYED that long first, ``otel_context`` is
    stored as the trace carrier the run joins. With ``ambient_trace`` (DBOS's
    own enqueue by name) an enclosing ``PropagateOtelContext`` applies too,
    under the options' own attributes."""
    opts: Dict[str, Any] = dict(options)
    check_no_shard_key(opts.get("shard_key"))
    if "workflow_id" in opts and opts["workflow_id"] is not None:
        validate_workflow_id(opts["workflow_id"])
    validate_workflow_id_reuse_policy(opts.get("workflow_id_reuse_policy"))
    if "workflow_name" not in opts or "queue_name" not in opts:
        raise DBOSException(f"{call} needs options workflow_name and queue_name")
    validate_priority(opts.get("priority"))
    validate_duplication_policy(opts.get("duplication_policy"), opts["queue_name"], opts.get("deduplication_id"))
    delay = opts.get("delay_seconds")
    timeout = opts.get("workflow_timeout")
    body = engine.start_request(
        opts["workflow_name"], tuple(args), kwargs,
        tag=tag_for(opts.get("serialization_type"), serializer),
        workflow_id=opts.get("workflow_id") or (parent.child_id() if parent is not None else None),
        queue_name=opts["queue_name"],
        run_here=False,
        class_name=opts.get("class_name"),
        config_name=opts.get("instance_name"),
        enqueue=_EnqueueOptions(
            deduplication_id=opts.get("deduplication_id"),
            priority=opts.get("priority"),
            app_version=opts.get("app_version"),
            queue_partition_key=opts.get("queue_partition_key"),
            delay_until_epoch_ms=int((time.time() + delay) * 1000) if delay is not None else None,
            duplication_policy=opts.get("duplication_policy"),
        ),
        authenticated_user=opts.get("authenticated_user"),
        timeout_ms=int(timeout * 1000) if timeout else None,
        attributes=_attributes(opts, ambient_trace),
        parent=parent,
    )
    # The roles the user was granted, recorded as DBOS records them (the
    # worker checks the workflow's required roles against them).
    if opts.get("authenticated_roles"):
        body["authenticated_roles"] = list(opts["authenticated_roles"])
    if opts.get("workflow_id_reuse_policy") == "reject":
        body["workflow_id_reuse_policy"] = "reject"
    # Another application's workflow (DBOS's application_name option): its
    # row, run by that application's workers.
    app = opts.get("application_name")
    if app and app != own_app:
        body["application_name"] = app
    return body


def _attributes(opts: Dict[str, Any], ambient_trace: bool) -> Optional[Dict[str, Any]]:
    attributes = ambient.attributes_with_otel_context(opts.get("attributes"), opts.get("otel_context"))
    return ambient.attributes_under_ambient(attributes) if ambient_trace else attributes
