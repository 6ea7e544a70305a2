"""Argument validation of workflow inputs (``@DBOS.workflow(validate_args=)``):
a validator takes the deserialized ``(args, kwargs)`` of a run the agent
hands over (a recovery, a dequeue) and returns them validated, or raises,
which ends the workflow ERROR. ``pydantic_args_validator`` asks for one
built from the function's type hints with pydantic (an optional dependency,
imported only when a validator is made)."""

from __future__ import annotations

import inspect
import typing
from typing import Any, Callable, Dict, List, Optional, Tuple

ValidateArgsCallable = Callable[[Tuple[Any, ...], Dict[str, Any]], Tuple[Tuple[Any, ...], Dict[str, Any]]]


def pydantic_args_validator(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
    """A marker for ``validate_args``: the decorator replaces it with
    ``make_pydantic_args_validator(func)``. Not to be called."""
    raise NotImplementedError(
        "pydantic_args_validator should not be called directly. "
        "Use make_pydantic_args_validator(func) to create a validator for a specific function."
    )


def resolve_validator(validate_args: Optional[ValidateArgsCallable], func: Callable[..., Any]) -> Optional[ValidateArgsCallable]:
    if validate_args is pydantic_args_validator:
        return make_pydantic_args_validator(func)
    return validate_args


def _hints(func: Callable[..., Any]) -> Dict[str, Any]:
    try:
        return typing.get_type_hints(func)
    except Exception:
        return dict(getattr(func, "__annotations__", {}))


def make_pydantic_args_validator(func: Callable[..., Any]) -> ValidateArgsCallable:
    """A validator coercing and checking each argument against ``func``'s
    type hints with pydantic (>= 2). Raises ``ValueError`` listing every
    argument that fails, and every required one that is missing."""
    try:
        from pydantic import TypeAdapter, ValidationError
    except ImportError:
        raise ImportError(
            "pydantic is required for pydantic_args_validator. Install it with: pip install pydantic"
        ) from None

    built: List[Any] = []  # [(params, var_args, var_kwargs)] once made

    def adapters() -> Any:
        if built:
            return built[0]
        hints = _hints(func)
        params: List[Tuple[str, Any, Any, Any]] = []
        var_args: Tuple[str, Any] = ("", None)
        var_kwargs: Tuple[str, Any] = ("", None)
        for p in inspect.signature(func).parameters.values():
            hint = hints.get(p.name)
            adapter = TypeAdapter(hint) if hint is not None else None
            if p.kind is p.VAR_POSITIONAL:
                var_args = (p.name, adapter)
            elif p.kind is p.VAR_KEYWORD:
                var_kwargs = (p.name, adapter)
            else:
                params.append((p.name, adapter, p.default, p.kind))
        # One assignment: concurrent first calls see all or nothing.
        built[:] = [(params, var_args, var_kwargs)]
        return built[0]

    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)

    def validate(args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Tuple[Any, ...], Dict[str, Any]]:
        params, var_args, var_kwargs = adapters()
        out_args = list(args)
        out_kwargs = dict(kwargs)
        errors: List[str] = []
        provided = set()
        for i, val in enumerate(out_args):
            if i < len(params) and params[i][3] in positional:
                name, adapter = params[i][0], params[i][1]
                provided.add(name)
            else:
                name, adapter = var_args
            if adapter is not None:
                try:
                    out_args[i] = adapter.validate_python(val)
                except ValidationError as e:
                    errors.append(f"Argument '{name}' (position {i}): {e}")
        by_name = {n: a for n, a, _, k in params if k is not inspect.Parameter.POSITIONAL_ONLY}
        for key, val in out_kwargs.items():
            adapter = by_name.get(key, var_kwargs[1])
            if key in by_name:
                provided.add(key)
            if adapter is not None:
                try:
                    out_kwargs[key] = adapter.validate_python(val)
                except ValidationError as e:
                    errors.append(f"Argument '{key}': {e}")
        for name, _a, default, _k in params:
            if name not in provided and default is inspect.Parameter.empty:
                errors.append(f"Missing required argument: '{name}'")
        if errors:
            raise ValueError("Argument validation failed for workflow:\n" + "\n".join(errors))
        return tuple(out_args), out_kwargs

    return validate
