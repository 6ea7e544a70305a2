"""The configuration of an official DBOS Python process (the `dbos` package)
on the agent's system database, from the environment the tests set:
APP_DATABASE_URL, APP_SCHEMA, APP_NAME, APP_VERSION (the executor id is
DBOS__VMID, which DBOS reads itself)."""

import os
from typing import Any, Dict


def official_config() -> Dict[str, Any]:
    return {
        "name": os.environ["APP_NAME"],
        "system_database_url": os.environ["APP_DATABASE_URL"],
        "dbos_system_schema": os.environ["APP_SCHEMA"],
        "application_version": os.environ["APP_VERSION"],
        "run_admin_server": False,
    }
