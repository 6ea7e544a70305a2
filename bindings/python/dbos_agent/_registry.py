"""What this process declared: its workflows, queues and scheduled
workflows (declared at import time, before DBOS exists, as in DBOS Python,
or after launch), the queues it listens to, and the process's DBOS
instance. Declarations made once the instance is launched are announced to
the agent at once (``_announce``)."""

from __future__ import annotations

import inspect
import logging
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from . import _classes
from ._announce import announcer as _announcer
from ._announce import workflow_form
from ._core import DEFAULT_MAX_RECOVERY_ATTEMPTS, WorkflowRegistration
from ._error import DBOSException, DBOSWorkflowFunctionNotFoundError

if TYPE_CHECKING:
    from ._dbos import DBOS
    from ._queue import Queue

logger = logging.getLogger("dbos_agent")

# The workflows and queues of this process, declared at import time (before
# DBOS exists, as in DBOS Python) and announced to the agent at launch.
_workflows: Dict[str, WorkflowRegistration] = {}
_queues: Dict[str, "Queue"] = {}
# @DBOS.scheduled workflows, by name: their schedules are written at launch.
_scheduled: Dict[str, WorkflowRegistration] = {}


class _Listening:
    """DBOS.listen_queues of the current DBOS instance: the queues this
    process dequeues (besides the internal queue), or None when it was not
    called (then it serves every queue it declares). As in DBOS it is the
    instance's setting: a destroyed DBOS takes it with it."""

    def __init__(self) -> None:
        self.names: Optional[List[str]] = None

    def serves(self, name: str) -> bool:
        return self.names is None or name in self.names

    def form(self, registration: Dict[str, Any]) -> Dict[str, Any]:
        """A declared queue's registration as sent: one this process does
        not listen to is stored all the same, for the processes that do,
        but not served here (configure_only)."""
        if self.serves(registration["name"]):
            return registration
        return {**registration, "configure_only": True}


_listened = _Listening()
# The process's DBOS instance (DBOS(config=...) makes it; destroy drops it).
_instance: Optional["DBOS"] = None
_instance_lock = threading.RLock()
# The (application version, executor id) of the last instance destroyed: as
# in DBOS Python, where they are process-wide, a destroy leaves them readable
# until the next DBOS(config=...) sets its own.
_last_identity: Tuple[str, str] = ("", "local")


def _is_launched() -> bool:
    inst = _instance
    return inst is not None and bool(inst._launched)


# A configured instance created after launch draws DBOS Python's warning.
_classes.is_launched = _is_launched


def _dbos() -> "DBOS":
    inst = _instance
    if inst is None:
        raise DBOSException("DBOS is not configured: create DBOS(config=...) and call DBOS.launch()")
    if not inst._launched:
        raise DBOSException("DBOS is not launched: call DBOS.launch() first")
    return inst


def _started(func: Callable[..., Any], args: Tuple[Any, ...]) -> Tuple[WorkflowRegistration, Tuple[Any, ...]]:
    """The workflow a start or an enqueue names, and its arguments: a bound
    method (``inst.workflow``, ``Cls.class_workflow``) passes its target
    first, as a call through it would."""
    target = _classes.bound_self(func)
    return _registration_of(func), args if target is None else (target,) + tuple(args)


def _registration_of(func: Callable[..., Any]) -> WorkflowRegistration:
    reg = getattr(func, "__dbos_workflow__", None)
    if not isinstance(reg, WorkflowRegistration):
        name = getattr(func, "__name__", repr(func))
        raise DBOSWorkflowFunctionNotFoundError("<NONE>", f"{name} is not a registered workflow function")
    return reg


def _step_workflow(step_name: str, step: Callable[..., Any]) -> Callable[..., Any]:
    """Make a step startable and enqueueable, as DBOS Python does: a
    workflow named ``<temp>.<step name>`` whose body is the one step (so a
    started or enqueued step is a workflow with that step recorded once).
    Declared before or after launch, it is announced as any workflow is
    (_declare_workflow)."""
    if inspect.iscoroutinefunction(step):

        async def temp_async(*args: Any, **kwargs: Any) -> Any:
            return await step(*args, **kwargs)

        body: Callable[..., Any] = temp_async
    else:

        def temp_sync(*args: Any, **kwargs: Any) -> Any:
            return step(*args, **kwargs)

        body = temp_sync
    body.__dbos_origin__ = step  # type: ignore[attr-defined]  # for _check_redeclaration
    reg = WorkflowRegistration(body, "<temp>." + step_name, DEFAULT_MAX_RECOVERY_ATTEMPTS, None)
    _declare_workflow(reg)
    step.__dbos_workflow__ = reg  # type: ignore[attr-defined]
    return step


def _forget_queue(name: str) -> None:
    """A deleted queue is no longer declared here: retrieve_queue no longer
    finds it, and no later handshake registers it again."""
    with _instance_lock:
        _queues.pop(name, None)
        if _listened.names is not None and name in _listened.names:
            _listened.names.remove(name)
    _announcer.forget_queue(name)


def _workflow_form(reg: WorkflowRegistration) -> Dict[str, Any]:
    """A workflow's registration as hello and register carry it."""
    return workflow_form(reg.name, reg.max_recovery_attempts, getattr(reg, "class_name", None))


def _user_function(reg: WorkflowRegistration) -> Any:
    """The user's function behind a registration (a step's, for its <temp>
    workflow)."""
    return inspect.unwrap(getattr(reg.func, "__dbos_origin__", reg.func))


def _code_origin(fn: Any) -> Tuple[Optional[str], Optional[str]]:
    """A function's module and real source path."""
    code = getattr(fn, "__code__", None)
    return getattr(fn, "__module__", None), os.path.realpath(code.co_filename) if code is not None else None


def _check_redeclaration(previous: WorkflowRegistration, reg: WorkflowRegistration) -> None:
    """DBOS's rules for a name declared again: two workflows of one name from
    different modules and files are an error; another function of the name
    is warned about (DBOS's message, with the <temp>. of a step's workflow
    left out); the same code declared again (a function that declares its
    workflow at every call) is no news."""
    old_fn, new_fn = _user_function(previous), _user_function(reg)
    if getattr(old_fn, "__code__", None) is getattr(new_fn, "__code__", 0):
        return  # the common case, checked before any path is resolved
    (old_module, old_file), (new_module, new_file) = _code_origin(old_fn), _code_origin(new_fn)
    if (not reg.name.startswith("<temp>.") and None not in (old_module, new_module, old_file, new_file)
            and old_module != new_module and old_file != new_file):
        raise DBOSException(
            f"Operation (Name: {reg.name}) is registered by two different functions, "
            f"{old_module} at {old_file} and {new_module} at {new_file}."
        )
    name = reg.name.replace("<temp>.", "")
    logger.warning(
        f"Duplicate registration of function '{name}'. A function named '{name}' has already been "
        "registered with DBOS. All functions registered with DBOS must have unique names."
    )


def _declare_workflow(reg: WorkflowRegistration) -> None:
    """Record a declared workflow; once launched, register it with the agent
    before returning (_announce_workflow)."""
    with _instance_lock:
        previous = _workflows.get(reg.name)
        if previous is not None:
            _check_redeclaration(previous, reg)
        _workflows[reg.name] = reg
    try:
        _announce_workflow(reg)
    except BaseException:
        _undeclare(_workflows, reg.name, reg, previous)
        raise


def _undeclare(registry: Dict[str, Any], name: str, declared: Any, previous: Any) -> None:
    """Undo a declaration the agent refused: the registry as it was, unless
    the name was declared again meanwhile."""
    with _instance_lock:
        if registry.get(name) is declared:
            if previous is not None:
                registry[name] = previous
            else:
                del registry[name]


def _announce_workflow(reg: WorkflowRegistration) -> None:
    """Register a workflow already in the registry (``_workflows``) with the
    agent, if this process is launched: from its return on, the agent runs
    it here, as if declared before launch (a recovered or queued workflow
    of it included). Before launch it does nothing: the launch's hello
    carries it. Raises what the agent refuses (DBOSException)."""
    _announcer.announce(workflows=[_workflow_form(reg)])


def _hello_queues() -> List[Dict[str, Any]]:
    """The queues a handshake registers: every declared queue in the form
    decided for it (queues still to be decided after the handshake are left
    out), and the queues named in DBOS.listen_queues, by name. With
    listen_queues, a declared queue it does not name is stored but not
    served (as DBOS Python dequeues only the queues named there)."""
    regs: List[Dict[str, Any]] = []
    for q in list(_queues.values()):
        form = q._hello_form()
        if form is not None:
            regs.append(_listened.form(form))
    for name in _listened.names or ():
        if name not in _queues:
            regs.append({"name": name})
    return regs


def _declare_queue(q: "Queue", on_conflict: str) -> None:
    """Record a declared queue; once launched, register it with the agent at
    once (register), as DBOS Python registers queues after launch."""
    q._on_conflict = on_conflict
    with _instance_lock:
        previous = _queues.get(q.name)
        _queues[q.name] = q
        inst = _instance
        launched = inst is not None and inst._launched
    if not launched:
        return
    assert inst is not None
    try:
        inst._register_queue(q, previous)
    except BaseException:
        _undeclare(_queues, q.name, q, previous)
        raise
