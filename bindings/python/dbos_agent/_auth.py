"""Identity and roles, as DBOS Python has them: ``DBOSContextSetAuth``,
``DBOS.set_authentication``, ``@DBOS.required_roles``,
``@DBOS.default_required_roles`` and the ``authenticated_user`` /
``authenticated_roles`` / ``assumed_role`` a workflow runs as.

A workflow's identity is stored on its ``workflow_status`` row (the agent
writes the three columns from ``start_workflow`` and hands them back with
every run), so a recovered or dequeued workflow runs as the identity it was
started under. The required roles are checked where DBOS checks them: a
direct call before the workflow is created, every run before its body (a
denied run ends ``ERROR`` with ``DBOSNotAuthorizedError``, as in DBOS 3.4),
a step before it is recorded, and the ``required_roles`` wrapper itself
whenever it is called.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Literal, Optional, Type, TypeVar, cast

from ._error import DBOSException, DBOSNotAuthorizedError

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


@dataclass(frozen=True)
class Authentication:
    """The identity code acts as: an authenticated user, their granted
    roles, and the role assumed."""

    user: Optional[str] = None
    roles: Optional[List[str]] = None
    assumed_role: Optional[str] = None


@dataclass
class _Scope:
    """One identity scope: a ``DBOSContextEnsure`` / ``DBOSContextSetAuth``
    block, or a workflow run. ``set_authentication`` changes the innermost."""

    user: Optional[str] = None
    roles: Optional[List[str]] = None


_scope: "contextvars.ContextVar[Optional[_Scope]]" = contextvars.ContextVar("dbos_agent_auth_scope", default=None)
_assumed_role: "contextvars.ContextVar[Optional[str]]" = contextvars.ContextVar("dbos_agent_assumed_role", default=None)


def in_context() -> bool:
    """Whether code runs in a DBOS context (a workflow, a step, or a
    ``DBOSContextEnsure`` block), which ``set_authentication`` needs."""
    return _scope.get() is not None


def get_authentication() -> Authentication:
    scope = _scope.get()
    if scope is None:
        return Authentication()
    return Authentication(scope.user, scope.roles, _assumed_role.get())


def set_authentication(user: Optional[str], roles: Optional[List[str]]) -> None:
    scope = _scope.get()
    # DBOS asserts the same: outside a context there is nothing to set.
    assert scope is not None, "No DBOS context found"
    scope.user = user
    scope.roles = roles


class DBOSContextEnsure:
    """Make sure code runs in a DBOS context (one is made for the block when
    there is none), as ``set_authentication`` needs."""

    def __init__(self) -> None:
        self._token: "Optional[contextvars.Token[Optional[_Scope]]]" = None
        self._entered = False

    def _scope_for_block(self) -> Optional[_Scope]:
        """The scope the block sets, or None to keep the current one."""
        return _Scope() if _scope.get() is None else None

    def __enter__(self) -> "DBOSContextEnsure":
        if self._entered:
            raise DBOSException(
                f"This {type(self).__name__} is already in use; create a new one for each with block."
            )
        self._entered = True
        scope = self._scope_for_block()
        if scope is not None:
            self._token = _scope.set(scope)
        return self

    def __exit__(self, *exc: Any) -> Literal[False]:
        token, self._token = self._token, None
        self._entered = False
        if token is not None:
            _scope.reset(token)
        return False


class DBOSContextSetAuth(DBOSContextEnsure):
    """Run the block as ``user`` with the granted ``roles``: workflows
    started, enqueued or called in it record that identity, and required
    roles are checked against it."""

    def __init__(self, user: Optional[str], roles: Optional[List[str]]) -> None:
        super().__init__()
        self.user = user
        self.roles = roles

    def _scope_for_block(self) -> Optional[_Scope]:
        return _Scope(self.user, list(self.roles) if self.roles is not None else None)


# ---------------------------------------------------------------------------
# Required roles


class RolesInfo:
    """The roles a function requires: its own (``required_roles``), else its
    class's default (``default_required_roles``). Shared by a function and
    every wrapper of it, so the decorators may come in either order."""

    __slots__ = ("roles", "class_roles")

    def __init__(self) -> None:
        self.roles: Optional[List[str]] = None
        self.class_roles: Optional[List[str]] = None

    def required(self) -> Optional[List[str]]:
        return self.roles if self.roles is not None else self.class_roles


_ATTR = "__dbos_roles__"


def _chain(func: Any) -> List[Any]:
    """The function, what it wraps (functools.wraps' ``__wrapped__``), and
    the body a workflow registration runs."""
    out: List[Any] = []
    f = func
    while f is not None and not any(f is g for g in out):
        out.append(f)
        reg = getattr(f, "__dbos_workflow__", None)
        body = getattr(reg, "func", None)
        if body is not None and not any(body is g for g in out):
            out.append(body)
        f = getattr(f, "__wrapped__", None)
    return out


def roles_info(func: Any) -> RolesInfo:
    """The RolesInfo of ``func``, made and attached to it and all it wraps
    when it has none."""
    chain = _chain(func)
    info: Optional[RolesInfo] = None
    for f in chain:
        got = getattr(f, _ATTR, None)
        if isinstance(got, RolesInfo):
            info = got
            break
    if info is None:
        info = RolesInfo()
    for f in chain:
        try:
            setattr(f, _ATTR, info)
        except (AttributeError, TypeError):
            pass  # a builtin or bound method: nothing to attach to
    return info


def required_of(func: Any) -> Optional[List[str]]:
    for f in _chain(func):
        got = getattr(f, _ATTR, None)
        if isinstance(got, RolesInfo):
            return got.required()
    return None


def _func_name(func: Any) -> str:
    reg = getattr(func, "__dbos_workflow__", None)
    name = getattr(reg, "name", None)
    return name if isinstance(name, str) else getattr(func, "__qualname__", repr(func))


def check_roles(func: Any, name: Optional[str] = None) -> Optional[str]:
    """DBOS's check: None when ``func`` requires no role, else the first of
    its required roles the current identity holds (the role it assumes);
    raises ``DBOSNotAuthorizedError`` with DBOS's messages."""
    required = required_of(func)
    if not required:
        return None
    fname = name if name is not None else _func_name(func)
    roles = get_authentication().roles
    if roles is None:
        raise DBOSNotAuthorizedError(
            f"Function {fname} requires a role, but was called in a context without authentication information"
        )
    for r in required:
        if r in roles:
            return r
    raise DBOSNotAuthorizedError(f"Function {fname} has required roles, but user is not authenticated for any of them")


class assume_role:
    """Assume ``role`` for the block (None keeps the current one)."""

    def __init__(self, role: Optional[str]) -> None:
        self.role = role
        self._token: "Optional[contextvars.Token[Optional[str]]]" = None

    def __enter__(self) -> None:
        if self.role is not None:
            self._token = _assumed_role.set(self.role)

    def __exit__(self, *exc: Any) -> Literal[False]:
        if self._token is not None:
            _assumed_role.reset(self._token)
        return False


def required_roles(roles: List[str]) -> Callable[[F], F]:
    def set_roles(func: F) -> F:
        roles_info(func).roles = roles

        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                with assume_role(check_roles(func)):
                    return await func(*args, **kwargs)

            return cast(F, async_wrapper)

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with assume_role(check_roles(func)):
                return func(*args, **kwargs)

        return cast(F, wrapper)

    return set_roles


def default_required_roles(roles: List[str]) -> Callable[[Type[T]], Type[T]]:
    """The roles every workflow and step of the class requires unless it
    names its own with ``required_roles``."""

    def set_roles(cls: Type[T]) -> Type[T]:
        cls.__dbos_default_required_roles__ = roles  # type: ignore[attr-defined]
        for member in vars(cls).values():
            func = getattr(member, "__func__", member)  # classmethod / staticmethod
            if callable(func) and _is_dbos_function(func):
                roles_info(func).class_roles = roles
        return cls

    return set_roles


def _is_dbos_function(func: Any) -> bool:
    return any(
        getattr(f, "__dbos_workflow__", None) is not None or getattr(f, "__dbos_step__", None) is not None
        for f in _chain(func)
    )


# ---------------------------------------------------------------------------
# Runs and starts


class RunIdentity:
    """The identity a workflow run executes as (its row's columns), entered
    around its body; the body's required roles are checked inside it."""

    def __init__(self, user: Optional[str], roles: Optional[List[str]], assumed: Optional[str]) -> None:
        self._scope_token = _scope.set(_Scope(user, list(roles) if roles is not None else None))
        self._role_token = _assumed_role.set(assumed)

    def close(self) -> None:
        _assumed_role.reset(self._role_token)
        _scope.reset(self._scope_token)


def enter_run(run: Any) -> RunIdentity:
    return RunIdentity(
        getattr(run, "authenticated_user", None),
        getattr(run, "authenticated_roles", None),
        getattr(run, "assumed_role", None),
    )


def check_run(func: Any, name: str) -> None:
    """Before a run's body: raise DBOSNotAuthorizedError when its identity
    holds none of the required roles (the run then ends ERROR), else assume
    the matching role for the rest of the run."""
    role = check_roles(func, name)
    if role is not None:
        _assumed_role.set(role)


def start_fields(assumed: Optional[str] = None) -> Dict[str, Any]:
    """The identity fields of a start_workflow request: the current
    identity, with ``assumed`` (a direct call's checked role) when given.
    Empty outside any context, which leaves the request as it is."""
    if _scope.get() is None and assumed is None:
        return {}
    auth = get_authentication()
    return {
        "authenticated_user": auth.user,
        "authenticated_roles": auth.roles or None,
        "assumed_role": assumed if assumed is not None else auth.assumed_role,
    }
