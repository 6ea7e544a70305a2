"""Starting and calling workflows, each written once as an operation (see
``_core.drive``) that ``DBOS``'s sync and async paths drive: a direct call
(the workflow runs on the caller's thread or task, or, from workflow code,
as a child whose outcome the parent records), a start in the background,
and an enqueue by name with ``EnqueueOptions``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple, cast

from . import _ambient as ambient
from . import _auth as auth
from . import _classes
from ._context import _enqueue_options, current_attributes, current_ctx, current_timeout_ms, take_assigned
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
from ._error import DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError
from ._serialization import tag_for

if TYPE_CHECKING:
    from ._client import EnqueueOptions

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
    )
    body.update(auth.start_fields(assumed))
    if pinned is not None and pinned.reuse_policy == "reject":
        body["workflow_id_reuse_policy"] = "reject"
    ambient.apply_start(body)
    return parent, body, body["workflow_id"]


def _reclaim_request(
    engine: Engine, reg: WorkflowRegistration, args: Tuple[Any, ...], kwargs: Dict[str, Any], wid: str,
    parent: Optional[ParentStep],
) -> Optional[Dict[str, Any]]:
    """For a child called directly whose start its parent recorded but
    not its outcome (a recovered parent calling it again): a run_here
    start of the recorded id. The agent then claims a child recovered
    onto the internal queue for this thread, so the parent does not wait
    for it to get a slot of max_concurrency that its own run may be
    holding. None when there is nothing to ask."""
    if parent is None or parent.run.peek_function_id() in parent.run.history:
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
    body = body or _reclaim_request(engine, reg, args, kwargs, wid, parent)
    if body is not None:
        reply, generation = yield from start_request_op(engine, body, parent)
        wid = reply.get("workflow_id") or wid
        grant = reply.get("run")
        if grant:
            run = WorkflowRun(grant, generation)
            engine.register_run(run)
            if parent is not None:
                return (yield from _child_op(engine, parent.run, run, reg, args, kwargs))
            try:
                return (yield from engine.execute_op(run, reg, args, kwargs))
            except _STOPPED:
                pass
    return (yield from get_result_op(engine, current_ctx(), wid))


def _child_op(
    engine: Engine, parent: WorkflowRun, run: WorkflowRun, reg: WorkflowRegistration, args: Tuple[Any, ...],
    kwargs: Dict[str, Any],
) -> "Op[Any]":
    """Run a child called directly from workflow code here, then record
    its outcome as the parent's next step (DBOS.getResult)."""
    fid = parent.next_function_id()
    started = _now_ms()
    try:
        output = yield from engine.execute_op(run, reg, args, kwargs)
    except _STOPPED:
        # The child stopped here: wait for the outcome that stands.
        return (yield from await_result_op(engine, run.workflow_id, parent, fid))
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
    from ._client import enqueue_request

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
    reply, _ = yield from start_request_op(engine, body, parent)
    return str(reply.get("workflow_id") or body["workflow_id"])
