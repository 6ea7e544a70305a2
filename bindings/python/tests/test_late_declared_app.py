"""Issue 11's check: a DBOS Python 3.4 application that declares its
workflows inside a function after launch, posts with a SQLAlchemyDatasource
transaction on a Postgres application database, keeps its workflows on a
DBOSConfiguredInstance, guards one with required_roles under
DBOSContextSetAuth and awaits an async step with timeout_seconds, runs
unchanged but for its import; and survives a SIGKILL of its worker with its
transaction applied once.

tests/apps/late_declared_app.py is run with the official dbos package (on a
schema of its own) and, with `from dbos import` changed to `from dbos_agent
import`, against the agent; both must print the same."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

from conftest import TESTS, AgentEnv, LineWaiter, drop_schema, new_id, pg_connect, query, sqlalchemy_url

SOURCE = TESTS / "apps" / "late_declared_app.py"


def ported_app(tmp_path: Path) -> Path:
    source = SOURCE.read_text()
    assert source.count("from dbos import") == 1 and "import dbos" not in source.replace("from dbos import", "")
    ported = tmp_path / "late_declared_ported.py"
    ported.write_text(source.replace("from dbos import", "from dbos_agent import"))
    return ported


def app_env(schema: str, ledger: str, extra: Dict[str, str]) -> Dict[str, str]:
    env = dict(os.environ)
    env.update({
        "APP_DATABASE_URL": sqlalchemy_url(), "APP_SCHEMA": schema,
        "APP_LEDGER_DATABASE_URL": sqlalchemy_url(), "APP_LEDGER_TABLE": ledger,
        "PYTHONUNBUFFERED": "1",
    })
    env.update(extra)
    return env


def run_app(path: Path, mode: str, order: str, env: Dict[str, str]) -> List[str]:
    out = subprocess.run([sys.executable, str(path), mode, order], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.splitlines()


def drop_table(name: str) -> None:
    with pg_connect() as conn:
        conn.execute(f'DROP TABLE IF EXISTS "{name}"')


def test_the_late_declaring_app_runs_unchanged_but_for_its_import(agent_env: AgentEnv, tmp_path: Path) -> None:
    order = new_id("order")
    official_schema, official_ledger = agent_env.schema + "_official", new_id("ledger_official").replace("-", "_")
    ours_ledger = new_id("ledger_ours").replace("-", "_")
    try:
        official = run_app(SOURCE, "run", order, app_env(official_schema, official_ledger, {}))
        ours = run_app(ported_app(tmp_path), "run", order, app_env(
            agent_env.schema, ours_ledger, {"DBOS_AGENT_SOCKET": agent_env.socket}))
    finally:
        drop_schema(official_schema)
        drop_table(official_ledger)
        drop_table(ours_ledger)
    assert official[0] == "deposit {'holder': 'alice', 'balance': 150, 'note': 'settled at 150', 'user': 'alice'}"
    assert "refused DBOSNotAuthorizedError" in official
    assert f"ledger [('{order}-deposit', 150)]" in official
    assert ours == official


def test_the_late_declaring_app_survives_a_sigkill_with_its_transaction_applied_once(
    agent_env: AgentEnv, tmp_path: Path
) -> None:
    order = new_id("crash")
    ledger = new_id("ledger_crash").replace("-", "_")
    ported = ported_app(tmp_path)
    env = app_env(agent_env.schema, ledger, {"DBOS_AGENT_SOCKET": agent_env.socket})
    try:
        worker = subprocess.Popen([sys.executable, str(ported), "crash", order], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert worker.stdout is not None
        out = LineWaiter(worker.stdout)
        try:
            out.wait_for(f"parked {order}-deposit", timeout=120)
        finally:
            worker.send_signal(signal.SIGKILL)
            worker.wait(30)
        # The transaction committed before the kill: its row and its checkpoint are there once.
        assert query(f'SELECT order_id, cents FROM "{ledger}"') == [(f"{order}-deposit", 150)]

        recovered = run_app(ported, "recover", order, env)
    finally:
        drop_table(ledger)
    assert recovered[0] == "recovered {'holder': 'alice', 'balance': 150, 'note': 'settled at 150', 'user': 'alice'}"
    assert recovered[1] == ("row SUCCESS declare.<locals>.Account.deposit declare.<locals>.Account account-alice "
                            "alice teller ['teller', 'auditor']")
    assert recovered[2] == "steps ['declare.<locals>.post', 'declare.<locals>.settle']"
    # Recovery replayed the transaction from its checkpoint: one row, not two.
    assert recovered[3] == f"ledger [('{order}-deposit', 150)]"
