"""The binding's version, and how it names itself and its application's
version to the agent."""

from __future__ import annotations

import hashlib
import inspect
import logging
import os
from typing import Any, Callable, Dict, List, Optional

from . import _protocol as proto

logger = logging.getLogger("dbos_agent")

__version__ = "0.1.0"


def client_hello(app_name: Optional[str]) -> Dict[str, Any]:
    """The hello of a client connection (DBOSClient's): it takes no runs and
    announces no version, so it runs as the agent's default."""
    return {
        "min_version": proto.MIN_PROTOCOL_VERSION,
        "max_version": proto.PROTOCOL_VERSION,
        "role": proto.ROLE_CLIENT,
        "app_name": app_name,
        "language": "python",
        "binding_version": __version__,
        "pid": os.getpid(),
        "wake_time_format": proto.WAKE_TIME_FORMAT,
    }


def compute_app_version(app_name: str, workflows: List[Callable[..., Any]]) -> str:
    """The application version of a worker that was given none, as DBOS
    Python computes it (its registry's ``compute_app_version``): the MD5 hex
    digest of the workflows' source texts, sorted (so the order of
    declaration does not matter), then the library's own version (another
    release may run the same code differently) and the application's name
    (applications built from one source do not share a version). The source
    of a workflow includes its decorators; the bodies of the steps it calls
    are not part of it, as in DBOS. Where the source cannot be read (code
    built at run time, a frozen application), the version is
    ``DEFAULT_VERSION-<app name>``, as in DBOS."""
    try:
        sources = sorted(inspect.getsource(func) for func in workflows)
    except (OSError, TypeError):
        logger.warning(
            "dbos-agent: could not read the source of the workflows to compute an application version; "
            "using DEFAULT_VERSION-%s. Set one with the config's 'application_version'",
            app_name,
        )
        return f"DEFAULT_VERSION-{app_name}"
    sources.append(f"dbos-agent-python {__version__}")
    sources.append(app_name)
    hasher = hashlib.md5(usedforsecurity=False)
    for source in sources:
        hasher.update(source.encode("utf-8"))
    return hasher.hexdigest()
