"""The binding's public surface against DBOS Python 3.4's, made mechanically
from the official package installed beside it: every name DBOS exports
(``dbos.__all__``, ``dbos.error``), and every public method and property of
``DBOS``, ``DBOSClient``, the workflow handles, ``Queue`` and the
debouncers, must exist in ``dbos_agent``, unless the binding's README lists
it under "Refused" with its reason. Where both have a callable, each of
DBOS's parameters must be accepted (by name, in DBOS's position when it is
positional, or through ``**kwargs``) with DBOS's default."""

from __future__ import annotations

import importlib.metadata
import inspect
import re
from pathlib import Path
from typing import Any, Dict, List, Set, Tuple

import dbos
import pytest

import dbos_agent

README = Path(__file__).resolve().parents[1] / "README.md"

# Names another part of issue 11 adds on its own branch: each must still be
# missing here (take it off this list once it is merged), so the list cannot
# hide a name that is there or outlive the merge.
PENDING_ELSEWHERE: Dict[str, str] = {
}

PAIRS: List[Tuple[str, Any, Any]] = [
    ("DBOS", dbos.DBOS, dbos_agent.DBOS),
    ("DBOSClient", dbos.DBOSClient, dbos_agent.DBOSClient),
    ("WorkflowHandle", dbos.WorkflowHandle, dbos_agent.WorkflowHandle),
    ("WorkflowHandleAsync", dbos.WorkflowHandleAsync, dbos_agent.WorkflowHandleAsync),
    ("Queue", dbos.Queue, dbos_agent.Queue),
    ("Debouncer", dbos.Debouncer, dbos_agent.Debouncer),
    ("DebouncerClient", dbos.DebouncerClient, dbos_agent.DebouncerClient),
]


def refused_in_readme() -> Set[str]:
    """The names the README's "Refused" section gives a reason for: each of
    its bullets starts with the backquoted names it is about."""
    text = README.read_text()
    m = re.search(r"^## Refused\n(.*?)(?=^## )", text, re.S | re.M)
    assert m, "the README has no '## Refused' section"
    names: Set[str] = set()
    for bullet in re.findall(r"^- (.*?)(?=^- |\Z)", m.group(1), re.S | re.M):
        head, sep, reason = bullet.partition(":")
        assert sep and reason.strip(), f"a refusal without its reason: {bullet!r}"
        names.update(re.findall(r"`([A-Za-z_][\w.]*)`", head))
    return names


def dbos_public_names() -> List[str]:
    names = [n for n in dbos.__all__]
    names += [f"error.{n}" for n in dir(dbos.error) if not n.startswith("_") and not inspect.ismodule(getattr(dbos.error, n))]
    for label, theirs, _ in PAIRS:
        names += [f"{label}.{n}" for n in dir(theirs) if not n.startswith("_")]
    return names


def has(name: str) -> bool:
    target: Any = dbos_agent
    for part in name.split("."):
        if not hasattr(target, part):
            return False
        target = getattr(target, part)
    return True


def test_the_reference_is_dbos_3_4() -> None:
    assert importlib.metadata.version("dbos").startswith("3.4.")


def test_every_public_name_of_dbos_is_there_or_refused_with_a_reason() -> None:
    refused = refused_in_readme()
    missing = [n for n in dbos_public_names() if not has(n) and n not in refused and n not in PENDING_ELSEWHERE]
    assert missing == []
    # PENDING_ELSEWHERE holds only names that are really missing.
    assert [n for n in PENDING_ELSEWHERE if has(n)] == []


def _signature(f: Any) -> Any:
    try:
        return inspect.signature(f)
    except (TypeError, ValueError):
        return None


def common_callables() -> List[Tuple[str, Any, Any]]:
    out = []
    for label, theirs, ours in PAIRS:
        for n in sorted(x for x in dir(theirs) if not x.startswith("_")):
            if not hasattr(ours, n):
                continue
            a = getattr(inspect.getattr_static(theirs, n), "__func__", inspect.getattr_static(theirs, n))
            b = getattr(inspect.getattr_static(ours, n), "__func__", inspect.getattr_static(ours, n))
            if callable(a) and callable(b) and _signature(a) is not None and _signature(b) is not None:
                out.append((f"{label}.{n}", a, b))
    return out


@pytest.mark.parametrize("name,theirs,ours", common_callables(), ids=lambda v: v if isinstance(v, str) else "")
def test_dbos_calls_are_accepted_with_dbos_defaults(name: str, theirs: Any, ours: Any) -> None:
    if name in PENDING_ELSEWHERE:
        pytest.fail(f"{name} is on PENDING_ELSEWHERE but present")
    theirs_sig, ours_sig = inspect.signature(theirs), inspect.signature(ours)
    ours_params = ours_sig.parameters
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in ours_params.values())
    ours_positional = [p.name for p in ours_params.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    problems: List[str] = []
    for i, p in enumerate(x for x in theirs_sig.parameters.values() if x.kind in (x.POSITIONAL_ONLY, x.POSITIONAL_OR_KEYWORD)):
        if i >= len(ours_positional) or ours_positional[i] != p.name:
            if not any(q.kind is q.VAR_POSITIONAL for q in ours_params.values()):
                problems.append(f"positional {i} is {p.name!r} in DBOS")
    for p in theirs_sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        q = ours_params.get(p.name)
        if q is None:
            if not takes_kwargs:
                problems.append(f"{p.name!r} is not accepted")
            continue
        if q.default is not p.default and q.default != p.default:
            problems.append(f"{p.name!r} defaults to {q.default!r}, DBOS's to {p.default!r}")
    assert problems == []
