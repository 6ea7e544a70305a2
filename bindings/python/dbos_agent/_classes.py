"""Workflows and steps that are methods of classes, as DBOS Python has them.

``@DBOS.dbos_class(class_name=None)`` registers a class under a name (its
``__qualname__`` unless given) and tells the workflows among its methods what
kind of method each is: an instance method, a class method or a static method.
``DBOSConfiguredInstance(config_name)`` registers an instance under
(class name, config name).

A workflow's row carries the method's target by name, the way DBOS Python
writes it, so DBOS's own tooling sees the same rows: an instance method's row
has ``class_name`` (the instance's class) and ``config_name`` (the instance's),
a class method's has ``class_name`` only, a static method's neither. The
target itself (``self`` or ``cls``) is not part of the recorded inputs. When a
run is pushed (recovery, a dequeue), the target is found again by those names
in this process's registries and passed first, so the workflow runs on the
configured instance it was started on.

Steps need nothing of this: a step method is called with its ``self``/``cls``
like any function, and a step's inputs are not recorded.
"""

from __future__ import annotations

import enum
import functools
import inspect
import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple, Type, TypeVar

from ._error import DBOSException, DBOSWorkflowFunctionNotFoundError

logger = logging.getLogger("dbos_agent")

T = TypeVar("T")

# Set on a class by @DBOS.dbos_class. Read with getattr, so a subclass that is
# not registered itself goes by its base's name, as in DBOS Python.
_CLASS_INFO_ATTR = "_dbos_agent_class_info"


class MethodKind(enum.Enum):
    """What a workflow function is to the class that holds it."""

    INSTANCE = "instance"
    CLASS = "class"
    STATIC = "static"


@dataclass
class ClassInfo:
    """A registered class: its name in the rows, and the roles its methods
    require unless they say otherwise (DBOS's ``DBOSClassInfo``)."""

    registered_name: str
    default_required_roles: Optional[List[str]] = None


@dataclass
class Method:
    """A workflow that is a method of a registered class."""

    kind: MethodKind
    class_info: ClassInfo


_lock = threading.Lock()
# Registered classes by name, and configured instances by (class name, config name).
_classes: Dict[str, type] = {}
_instances: Dict[Tuple[str, str], object] = {}


def _never_launched() -> bool:
    return False


# Tells the registry whether DBOS is launched (an instance registered after
# launch draws DBOS Python's warning); set by _dbos.
is_launched: Callable[[], bool] = _never_launched


def class_info_of(cls: type) -> Optional[ClassInfo]:
    info = getattr(cls, _CLASS_INFO_ATTR, None)
    return info if isinstance(info, ClassInfo) else None


def class_name_of(cls: type) -> str:
    """A class's registered name, else its qualified name (DBOS's ``_class_fqn``)."""
    info = class_info_of(cls)
    return info.registered_name if info is not None else cls.__qualname__


def get_or_create_class_info(cls: type, class_name: Optional[str] = None) -> ClassInfo:
    """The class's info, made on first use: then its workflow methods learn
    which kind of method each is. (A class decorator such as DBOS's
    ``default_required_roles`` registers the class through here too.)"""
    info = class_info_of(cls)
    if info is not None:
        return info
    info = ClassInfo(class_name if class_name is not None else cls.__qualname__)
    setattr(cls, _CLASS_INFO_ATTR, info)
    _mark_methods(cls, info)
    return info


def register_class(cls: type, info: ClassInfo) -> None:
    with _lock:
        known = _classes.get(info.registered_name)
        if known is not None and known is not cls:
            raise Exception(f"Duplicate type registration for class '{info.registered_name}'")
        _classes[info.registered_name] = cls


def dbos_class(class_name: Optional[str] = None) -> Callable[[Type[T]], Type[T]]:
    """The decorator ``@DBOS.dbos_class(class_name=None)``."""

    def register(cls: Type[T]) -> Type[T]:
        register_class(cls, get_or_create_class_info(cls, class_name))
        return cls

    return register


def _mark_methods(cls: type, info: ClassInfo) -> None:
    """Tell each workflow among the class's own methods which kind it is
    (through the decorators stacked over it, by ``__wrapped__``)."""
    for attribute in cls.__dict__.values():
        if isinstance(attribute, staticmethod):
            kind, func = MethodKind.STATIC, attribute.__func__
        elif isinstance(attribute, classmethod):
            kind, func = MethodKind.CLASS, attribute.__func__
        elif inspect.isfunction(attribute):
            kind, func = MethodKind.INSTANCE, attribute
        else:
            continue
        seen: Any = func
        while seen is not None:
            reg = getattr(seen, "__dbos_workflow__", None)
            if reg is not None and hasattr(reg, "method"):
                reg.method = Method(kind, info)
            seen = getattr(seen, "__wrapped__", None)


class DBOSConfiguredInstance:
    """Base of a class whose workflows use the instance's state: the instance
    is registered under ``config_name``, which its workflows' rows record, so
    recovery runs them on this same instance. Create the instances before
    ``DBOS.launch()``, as in DBOS Python."""

    def __init__(self, config_name: str) -> None:
        self.config_name = config_name
        register_instance(self)


def register_instance(inst: Any) -> None:
    config_name: str = inst.config_name
    name = class_name_of(type(inst))
    if is_launched():
        logger.warning(
            "Configured instance %s of class %s was registered after DBOS was launched. This may cause errors "
            "during workflow recovery. All configured instances should be instantiated before DBOS is launched.",
            config_name, name,
        )
    with _lock:
        known = _instances.get((name, config_name))
        if known is not None and known is not inst:
            raise Exception(f"Duplicate instance registration for class '{name}' instance '{config_name}'")
        _instances[(name, config_name)] = inst


def clear() -> None:
    """Forget every class and instance (``DBOS.destroy(destroy_registry=True)``)."""
    with _lock:
        _classes.clear()
        _instances.clear()


def bound_self(func: Callable[..., Any]) -> Optional[object]:
    """The object a bound method is bound to (an instance, or the class of a
    class method), else None."""
    target: Optional[object] = getattr(func, "__self__", None)
    if target is None or inspect.ismodule(target):
        return None
    return target


def target_names(
    method: Optional[Method], func: Callable[..., Any], args: Tuple[Any, ...]
) -> Tuple[Optional[str], Optional[str]]:
    """(class_name, config_name) of a workflow called with ``args`` (its
    target first, for a method), as DBOS Python names them; the errors for a
    method of a class that is not registered are DBOS's."""
    kind = method.kind if method is not None else None
    if kind is not None and args:
        if kind is MethodKind.INSTANCE:
            target = args[0]
            name = class_name_of(type(target))
            if not hasattr(target, "config_name"):
                raise Exception(
                    "Function target appears to be a class instance, but does not have `config_name` set"
                )
            return name, str(target.config_name)
        if kind is MethodKind.CLASS:
            return class_name_of(args[0]), None
        return None, None
    if args:
        if isinstance(args[0], type):
            raise Exception("Function target appears to be a class, but is not properly registered")
        # As DBOS: a first parameter named self is a method whose class was
        # not registered (not certain, but the likely mistake).
        if _first_parameter_is_self(func):
            raise Exception("Function target appears to be a class instance, but is not properly registered")
    return None, None


@functools.lru_cache(maxsize=4096)
def _first_parameter_is_self(func: Callable[..., Any]) -> bool:
    # Asked at every start of a workflow with arguments: read the signature once.
    try:
        params = list(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return False
    return bool(params) and params[0] == "self"


def schedule_class_name(method: Optional[Method]) -> Optional[str]:
    """The ``workflow_class_name`` of a schedule of a workflow: a class
    method's class; a configured instance's method cannot be scheduled (no
    schedule names an instance), as in DBOS Python."""
    if method is None or method.kind is MethodKind.STATIC:
        return None
    if method.kind is MethodKind.INSTANCE:
        raise DBOSException("Configured instance methods cannot be used as scheduled workflows")
    return method.class_info.registered_name


def pushed_target(
    workflow_id: str, method: Optional[Method], class_name: Optional[str], config_name: Optional[str]
) -> Tuple[Any, ...]:
    """What a pushed run of a workflow passes before its recorded inputs: the
    configured instance its row names, or the class; nothing for a function
    or a static method. Raises DBOSWorkflowFunctionNotFoundError, as DBOS
    Python does, when this process has no such instance or class."""
    with _lock:
        if config_name:
            inst = _instances.get((class_name or "", config_name))
            if inst is None:
                raise DBOSWorkflowFunctionNotFoundError(
                    workflow_id, f"configured class instance '{class_name}/{config_name}' is not registered"
                )
            return (inst,)
        if class_name:
            cls = _classes.get(class_name)
            if cls is None:
                raise DBOSWorkflowFunctionNotFoundError(workflow_id, f"class '{class_name}' is not registered")
            static = method is not None and method.kind is MethodKind.STATIC
            return () if static else (cls,)
    return ()
