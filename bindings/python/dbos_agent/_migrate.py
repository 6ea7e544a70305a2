"""DBOS's ``migrate``, ``run_dbos_database_migrations`` and
``reset_system_database``, done by the agent's own commands (``dbos-agent
migrate`` and ``reset``): the schema the agent serves is the one its
migrations create, and a deployment that migrates with a privileged role
before starting applications with a lesser one keeps that split, the
application role granted as DBOS grants it."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
from typing import Dict, List, Optional

from ._error import DBOSException

logger = logging.getLogger("dbos")

# The agent binary the binding runs for the calls that need its CLI; else the
# first `dbos-agent` on PATH.
AGENT_BINARY_ENV = "DBOS_AGENT_BINARY"


def agent_binary(purpose: str) -> str:
    path = os.environ.get(AGENT_BINARY_ENV) or shutil.which("dbos-agent")
    if not path:
        raise DBOSException(
            f"{purpose} runs the agent's own command, but no dbos-agent binary was found: "
            f"put it on PATH or name it in {AGENT_BINARY_ENV}"
        )
    return path


def agent_database_url(system_database_url: str) -> str:
    """A SQLAlchemy URL (``postgresql+psycopg://...``) as the agent reads it:
    the same URL without its driver."""
    scheme, sep, rest = system_database_url.partition("://")
    if not sep:
        raise DBOSException(f"Invalid system database URL: {system_database_url!r}")
    return scheme.split("+", 1)[0] + "://" + rest


def migrate_system_database(
    purpose: str, system_database_url: str, *, schema: str, application_role: Optional[str], sharding: bool
) -> None:
    if sharding:
        raise DBOSException(
            "A sharded system database is DBOS Enterprise's; the agent's system database is unsharded"
        )
    if system_database_url.startswith("sqlite") and application_role:
        raise DBOSException("application_role is only supported for Postgres system databases")
    args = ["migrate", "--schema", schema]
    if application_role:
        args += ["--app-role", application_role]
    _run_agent_command(purpose, "DBOS migrations failed", system_database_url, args)


def reset_system_database(purpose: str, system_database_url: str, *, schema: Optional[str], truncate: bool) -> None:
    args = ["reset", "--yes"]
    if schema:
        args += ["--schema", schema]
    if truncate:
        args.append("--truncate")
    _run_agent_command(purpose, "Error resetting PostgreSQL system database", system_database_url, args)


def _run_agent_command(purpose: str, failure: str, system_database_url: str, args: List[str]) -> None:
    if system_database_url.startswith("sqlite"):
        raise DBOSException(
            "The agent's system database is on Postgres: a SQLite system database is not supported yet"
        )
    # The URL (and its password) goes in the environment, which other users
    # cannot read, not on the command line, which they can.
    env: Dict[str, str] = dict(os.environ)
    env["DBOS_SYSTEM_DATABASE_URL"] = agent_database_url(system_database_url)
    done = subprocess.run(
        [agent_binary(purpose), *args], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    if done.returncode != 0:
        reason = (done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}").splitlines()[-1]
        raise DBOSException(f"{failure}: {reason}")
    for line in done.stdout.splitlines():
        logger.info(line)
