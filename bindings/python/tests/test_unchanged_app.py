"""The issue's check: a DBOS Python application runs unchanged but for its
import. tests/apps/dbos_python_app.py is run with the official dbos package
(on its own schema) and, with `from dbos import` changed to `from dbos_agent
import`, against the agent; both print the same."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import TESTS, AgentEnv, drop_schema, sqlalchemy_url


def run_app(path: Path, env: dict) -> list:
    full = dict(os.environ)
    full.update(env)
    out = subprocess.run(
        [sys.executable, str(path), "unchanged-order-1"], env=full, capture_output=True, text=True, timeout=180
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.splitlines()


def test_a_dbos_python_app_runs_unchanged_but_for_its_import(agent_env: AgentEnv, tmp_path: Path) -> None:
    source = (TESTS / "apps" / "dbos_python_app.py").read_text()
    assert source.count("from dbos import") == 1
    ported = tmp_path / "ported_app.py"
    ported.write_text(source.replace("from dbos import", "from dbos_agent import"))

    official_schema = agent_env.schema + "_official"
    try:
        official = run_app(TESTS / "apps" / "dbos_python_app.py", {"APP_DATABASE_URL": sqlalchemy_url(), "APP_SCHEMA": official_schema})
    finally:
        drop_schema(official_schema)
    ours = run_app(ported, {
        "APP_DATABASE_URL": sqlalchemy_url(), "APP_SCHEMA": agent_env.schema, "DBOS_AGENT_SOCKET": agent_env.socket,
    })
    assert official[0].startswith("direct {'sku': 'widget', 'reservation': '2xwidget'")
    assert ours == official
