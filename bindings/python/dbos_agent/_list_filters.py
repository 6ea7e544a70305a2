"""The filters of ``list_workflows`` and ``list_queued_workflows`` (DBOS and
DBOSClient, sync and async) and the ``list_workflows`` request they make.

DBOS Python 3.4 applies each filter only when it is "given" by its own test
(``if name_list:``, ``if attributes:``, ``if was_forked_from is not None``,
...); the request below sends exactly the filters DBOS would apply, so an
empty list or dict filters nothing, as there.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Dict, FrozenSet, List, Optional, Union

from ._error import DBOSException

# DBOS 3.4's keyword arguments of list_workflows (DBOS and DBOSClient).
LIST_FILTERS: FrozenSet[str] = frozenset(
    {
        "workflow_ids", "status", "start_time", "end_time", "completed_after", "completed_before",
        "dequeued_after", "dequeued_before", "name", "app_version", "forked_from", "parent_workflow_id",
        "user", "queue_name", "limit", "offset", "sort_desc", "workflow_id_prefix", "load_input",
        "load_output", "executor_id", "queues_only", "was_forked_from", "is_fork", "has_parent",
        "attributes", "schedule_name", "application_name", "shard_key", "parent_shard_key",
    }
)
# list_queued_workflows takes the same but for these.
QUEUED_FILTERS: FrozenSet[str] = LIST_FILTERS - {"queues_only", "was_forked_from", "schedule_name"}


def check_filter_names(call: str, filters: Dict[str, Any], allowed: FrozenSet[str]) -> None:
    """A keyword DBOS's signature does not have is a TypeError, as calling
    DBOS's method with it would be."""
    for key in filters:
        if key not in allowed:
            raise TypeError(f"{call}() got an unexpected keyword argument '{key}'")


def queued_filters(call: str, filters: Dict[str, Any]) -> Dict[str, Any]:
    """list_queued_workflows' filters: list_workflows' on queued ones only
    (DBOS lists them with queues_only=True)."""
    check_filter_names(call, filters, QUEUED_FILTERS)
    return dict(filters, queues_only=True)


def _as_list(v: Union[None, str, List[str]]) -> Optional[List[str]]:
    if v is None:
        return None
    return [v] if isinstance(v, str) else list(v)


def _iso_to_ms(v: Optional[str]) -> Optional[int]:
    """As DBOS reads a time filter: ISO 8601, a naive time in local time;
    not ISO 8601 is fromisoformat's ValueError."""
    if not v:
        return None
    if v.endswith("Z"):  # fromisoformat takes "Z" only from Python 3.11
        v = v[:-1] + "+00:00"
    return int(datetime.fromisoformat(v).timestamp() * 1000)


def list_workflows_request(call: str, filters: Dict[str, Any], own_app: str = "") -> Dict[str, Any]:
    """The list_workflows request for DBOS Python's filter arguments.

    ``own_app`` is the caller's application: as DBOS's observability filter,
    a listing not by workflow id and naming no ``application_name`` sees the
    rows that application owns and the unclaimed ones (a caller with no
    application, or ``application_name=[]``, sees every application's)."""
    for key in ("shard_key", "parent_shard_key"):
        if filters.get(key) is not None:
            # DBOS's error on an unsharded database (the agent's).
            raise DBOSException("Filtering by shard key requires a sharded system database")
    workflow_ids = filters.get("workflow_ids")
    named = filters.get("application_name")
    apps = [] if named == "" else _as_list(named)  # DBOS: "" names every application
    if apps is None and not workflow_ids and own_app:
        apps = [own_app]
    attributes = filters.get("attributes")
    prefixes = _as_list(filters.get("workflow_id_prefix")) or []
    body: Dict[str, Any] = {
        "workflow_ids": list(workflow_ids) if workflow_ids else None,
        "workflow_id_prefixes": prefixes or None,
        "status": _as_list(filters.get("status")),
        "name": _as_list(filters.get("name")),
        "queue_name": _as_list(filters.get("queue_name")),
        "queues_only": bool(filters.get("queues_only")),
        "executor_id": _as_list(filters.get("executor_id")),
        "app_version": _as_list(filters.get("app_version")),
        "parent_workflow_id": _as_list(filters.get("parent_workflow_id")),
        "forked_from": _as_list(filters.get("forked_from")),
        "schedule_name": _as_list(filters.get("schedule_name")),
        "application_name": apps,
        "user": _as_list(filters.get("user")),
        "attributes": json.dumps(attributes) if attributes else None,
        "was_forked_from": filters.get("was_forked_from"),
        "is_fork": filters.get("is_fork"),
        "has_parent": filters.get("has_parent"),
        "start_time": _iso_to_ms(filters.get("start_time")),
        "end_time": _iso_to_ms(filters.get("end_time")),
        "completed_after": _iso_to_ms(filters.get("completed_after")),
        "completed_before": _iso_to_ms(filters.get("completed_before")),
        "dequeued_after": _iso_to_ms(filters.get("dequeued_after")),
        "dequeued_before": _iso_to_ms(filters.get("dequeued_before")),
        "limit": filters.get("limit") or None,
        "offset": filters.get("offset") or None,
        "sort_desc": bool(filters.get("sort_desc")),
        "load_input": filters.get("load_input", True) is not False,
        "load_output": filters.get("load_output", True) is not False,
    }
    # Empty lists filter nothing in DBOS ("if name_list:"); the agent would
    # read an empty list the same, but not sending it keeps requests small.
    return {k: v for k, v in body.items() if v is not None and v != []}
