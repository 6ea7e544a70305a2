"""How ``DBOS`` and ``DBOSClient`` expose the operations of ``_ops``.

An operation is written once, as an op generator (see ``_core.drive``) that
takes the caller's ``Scope`` and then DBOS Python's own parameters. The
facades bind it twice, as a sync method (``drive`` on the calling thread)
and an async one (``drive_async`` on the event loop), with the operation's
signature and docstring, so that each method of DBOS's API is one line in
each facade and its logic is in one place.

The scope is what differs between the facades: ``DBOS`` acts for the
process's instance and, from workflow code, for the calling workflow (its
management calls are then recorded steps, as in DBOS Python: ``as_step``);
a ``DBOSClient`` is no workflow, so its calls are never recorded.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
from dataclasses import dataclass, field
from typing import (
    Any,
    AsyncGenerator,
    Callable,
    Concatenate,
    Coroutine,
    Dict,
    Generator,
    Generic,
    List,
    Mapping,
    Optional,
    ParamSpec,
    Tuple,
    TypeVar,
    cast,
)

from ._context import _Ctx
from ._core import Engine, Op, WorkflowHandle, WorkflowHandleAsync, drive, drive_async, drive_values, drive_values_async
from ._serialization import Serializer

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True)
class Scope:
    """Who makes a call: the engine it goes through, the caller's
    application, the calling workflow's context (``DBOS`` from workflow code
    or a step; None for a client or outside a workflow), the facade's name
    for messages, and the queues declared in this process (``DBOS``'s)."""

    engine: Engine
    ctx: Optional[_Ctx]
    app_name: str
    who: str
    declared_queues: Mapping[str, Any] = field(default_factory=dict)
    # What a deleted queue means to the caller (DBOS stops serving it).
    forget_queue: Callable[[str], None] = lambda name: None

    @property
    def serializer(self) -> Serializer:
        return self.engine.serializer

    def name(self, method: str) -> str:
        """The call as its caller wrote it, for messages (``DBOS.send``)."""
        return f"{self.who}.{method}"


def check_no_running_loop(call: str) -> None:
    """As DBOS Python: a blocking call on a thread that runs an event loop
    would stall it."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    raise RuntimeError(f"{call}() was called while an event loop is running. Use await {call}_async(...) instead.")


class _Binding:
    """One binding of an operation into a facade (see ``twins``). Read from
    an instance (a DBOSClient) or from a class whose operations act on the
    class (DBOS), it gives the callable, which asks its receiver for the
    call's scope (``_op_scope()``). Read from a client's class, it is the
    unbound function, taking the client first, as a method is; ``__func__``
    is that function too, as introspection of a classmethod or method
    expects."""

    def __init__(self, op: Callable[..., Any]):
        self._op = op
        self._name = op.__name__
        self._facade = ""
        self._on_class = False
        self._by_class: Dict[Any, Callable[..., Any]] = {}
        sig = inspect.signature(op)
        self._params = list(sig.parameters.values())[1:]
        self._call_signature = sig.replace(parameters=self._params)
        self.__doc__ = op.__doc__
        self.__func__ = self._unbound("self")

    def __set_name__(self, owner: Any, name: str) -> None:
        self._name, self._facade = name, owner.__name__
        self._on_class = bool(getattr(owner, "_ops_on_class", False))
        self.__func__ = self._unbound("cls" if self._on_class else "self")

    def _unbound_call(self) -> Callable[..., Any]:
        def method(target: Any, *args: Any, **kwargs: Any) -> Any:
            return self._bind(target)(*args, **kwargs)

        return method

    def _unbound(self, receiver: str) -> Callable[..., Any]:
        method = self._unbound_call()
        first = inspect.Parameter(receiver, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        self._dress(method)
        cast(Any, method).__signature__ = self._call_signature.replace(parameters=[first, *self._params])
        return method

    def _dress(self, fn: Callable[..., Any]) -> None:
        fn.__name__ = self._name
        fn.__qualname__ = f"{self._facade}.{self._name}"
        fn.__doc__ = self._op.__doc__
        cast(Any, fn).__signature__ = self._call_signature

    def _bind(self, receiver: Any) -> Callable[..., Any]:
        raise NotImplementedError

    def copy_into(self, owner: Any, name: str) -> "_Binding":
        """The same binding in another class (see ``Shared``)."""
        twin = copy.copy(self)
        twin._by_class = {}
        twin.__set_name__(owner, name)
        return twin

    def __get__(self, obj: Any, owner: Any) -> Any:
        if obj is None and not self._on_class:
            return self.__func__
        if obj is None:
            # A class-level facade (DBOS): one callable per class, made once.
            cached = self._by_class.get(owner)
            if cached is None:
                cached = self._by_class[owner] = self._bind(owner)
                self._dress(cached)
            return cached
        bound = self._bind(obj)
        self._dress(bound)
        return bound


class _Bound(_Binding, Generic[P, T]):
    """An operation bound as a sync method (driven on the calling thread)
    or an async one (driven on the event loop), its result passed through
    ``finish`` (a workflow id made a handle)."""

    def __init__(self, op: Callable[..., Any], finish: Callable[[Any, Any], Any], is_async: bool, check_loop: bool):
        super().__init__(op)
        self._finish = finish
        self._is_async = is_async
        self._check_loop = check_loop and not is_async

    def __get__(self, obj: Any, owner: Any) -> Callable[P, T]:
        return cast(Callable[P, T], super().__get__(obj, owner))

    def _bind(self, receiver: Any) -> Callable[..., Any]:
        op, finish, name = self._op, self._finish, self._name
        if self._is_async:

            async def call_async(*args: Any, **kwargs: Any) -> Any:
                scope: Scope = receiver._op_scope()
                return finish(scope, await drive_async(scope.engine, op(scope, *args, **kwargs)))

            return call_async
        # DBOS refuses to block a running event loop; its client does not.
        check = self._check_loop and bool(getattr(receiver, "_refuses_blocking_on_loop", False))

        def call(*args: Any, **kwargs: Any) -> Any:
            if check:
                check_no_running_loop(name)
            scope: Scope = receiver._op_scope()
            return finish(scope, drive(scope.engine, op(scope, *args, **kwargs)))

        return call


class _Stream(_Binding):
    """A stream reader bound into a facade (see ``stream_twins``): the sync
    method is a generator of the values, the async one an async generator."""

    def __init__(self, op: Callable[..., Any], is_async: bool):
        self._is_async = is_async
        super().__init__(op)

    def _unbound_call(self) -> Callable[..., Any]:
        # A generator function (an async one for the twin), as DBOS's are.
        if self._is_async:

            async def method_async(target: Any, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
                async for value in self._bind(target)(*args, **kwargs):
                    yield value

            return method_async

        def method(target: Any, *args: Any, **kwargs: Any) -> Generator[Any, Any, None]:
            yield from self._bind(target)(*args, **kwargs)

        return method

    def _bind(self, receiver: Any) -> Callable[..., Any]:
        op = self._op
        if self._is_async:

            async def read_async(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
                scope: Scope = receiver._op_scope()
                async for value in drive_values_async(scope.engine, op(scope, *args, **kwargs)):
                    yield value

            return read_async

        def read(*args: Any, **kwargs: Any) -> Generator[Any, Any, None]:
            scope: Scope = receiver._op_scope()
            yield from drive_values(scope.engine, op(scope, *args, **kwargs))

        return read


def stream_twins(op: Callable[..., "Op[None]"]) -> Tuple[_Stream, _Stream]:
    """The sync and async readers of a stream operation (one that emits
    values: see ``_core.Emit``)."""
    return _Stream(op, False), _Stream(op, True)


class Shared:
    """A base of the facades: the operations bound in its body are bound
    into each subclass as if declared there (so each facade shows them as
    its own methods, ``cls`` first in DBOS, ``self`` in DBOSClient)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__mro__[1:]:
            for name, binding in vars(base).items():
                if isinstance(binding, _Binding) and name not in vars(cls):
                    setattr(cls, name, binding.copy_into(cls, name))


def _as_is(scope: Scope, value: Any) -> Any:
    return value


def twins(
    op: Callable[Concatenate[Scope, P], "Op[T]"], *, check_loop: bool = True
) -> "Tuple[_Bound[P, T], _Bound[P, Coroutine[Any, Any, T]]]":
    """The sync and async methods of one operation. In DBOS the sync one
    refuses to block a running event loop (``check_loop``, as DBOS Python
    does for most of its calls)."""
    return _Bound(op, _as_is, False, check_loop), _Bound(op, _as_is, True, False)


def _handle(scope: Scope, workflow_id: str) -> Any:
    return WorkflowHandle(scope.engine, workflow_id)


def _handle_async(scope: Scope, workflow_id: str) -> Any:
    return WorkflowHandleAsync(scope.engine, workflow_id)


def handle_twins(
    op: Callable[Concatenate[Scope, P], "Op[str]"], *, check_loop: bool = True
) -> "Tuple[_Bound[P, WorkflowHandle[Any]], _Bound[P, Coroutine[Any, Any, WorkflowHandleAsync[Any]]]]":
    """``twins`` of an operation that names a workflow: the sync method
    returns its ``WorkflowHandle``, the async one its ``WorkflowHandleAsync``."""
    return _Bound(op, _handle, False, check_loop), _Bound(op, _handle_async, True, False)


def handles_twins(
    op: Callable[Concatenate[Scope, P], "Op[List[str]]"], *, check_loop: bool = True
) -> "Tuple[_Bound[P, List[WorkflowHandle[Any]]], _Bound[P, Coroutine[Any, Any, List[WorkflowHandleAsync[Any]]]]]":
    """``handle_twins`` for an operation that names several workflows."""

    def handles(scope: Scope, ids: List[str]) -> Any:
        return [_handle(scope, wid) for wid in ids]

    def handles_async(scope: Scope, ids: List[str]) -> Any:
        return [_handle_async(scope, wid) for wid in ids]

    return _Bound(op, handles, False, check_loop), _Bound(op, handles_async, True, False)

