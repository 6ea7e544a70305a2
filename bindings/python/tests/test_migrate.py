"""DBOS.migrate and run_dbos_database_migrations, done by the agent's own
migrator: a database created and migrated with the privileged URL, an
application role granted the schema as DBOS grants it, and DBOS's errors for
what the agent's database is not."""

from __future__ import annotations

import secrets
from typing import Iterator

import psycopg
import pytest

from dbos_agent import DBOS, DBOSException, run_dbos_database_migrations

from conftest import AgentEnv, database_url, pg_connect, query

LATEST_SCHEMA_VERSION = 125


def _url_with(database: str, user: str = "", password: str = "") -> str:
    """The test database's URL on another database (and user), in the
    SQLAlchemy form DBOS's configurations use."""
    creds, _, rest = database_url().split("://", 1)[1].partition("@")
    host = rest.split("/", 1)[0]
    if user:
        creds = f"{user}:{password}"
    return f"postgresql+psycopg://{creds}@{host}/{database}"


@pytest.fixture
def fresh_database() -> Iterator[str]:
    name = "migrate_" + secrets.token_hex(4)
    yield name
    with pg_connect() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def application_role() -> Iterator[str]:
    role = "app_" + secrets.token_hex(4)
    with pg_connect() as conn:
        conn.execute(f"CREATE ROLE \"{role}\" LOGIN PASSWORD 'app-pw'")
    yield role
    with pg_connect() as conn:
        conn.execute(f'DROP ROLE IF EXISTS "{role}"')


@pytest.fixture
def binary_on_env(agent_binary: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DBOS_AGENT_BINARY", agent_binary)


def _schema_version(url: str, schema: str) -> int:
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql")) as conn:
        row = conn.execute(f'SELECT version FROM "{schema}".dbos_migrations').fetchone()
        assert row is not None
        return int(row[0])


def test_migrate_creates_the_database_and_grants_the_application_role(
    binary_on_env: None, fresh_database: str, application_role: str
) -> None:
    admin_url = _url_with(fresh_database)
    DBOS.migrate(admin_url, application_role=application_role)
    assert _schema_version(admin_url, "dbos") == LATEST_SCHEMA_VERSION

    # The application role, which creates nothing, reads and writes the tables.
    app_url = _url_with(fresh_database, application_role, "app-pw").replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(app_url, autocommit=True) as conn:
        conn.execute("INSERT INTO dbos.workflow_status (workflow_uuid, status) VALUES ('granted', 'PENDING')")
        row = conn.execute("SELECT status FROM dbos.workflow_status WHERE workflow_uuid = 'granted'").fetchone()
        assert row == ("PENDING",)
    # The grants live in the database; the role can be dropped once they go.
    with psycopg.connect(admin_url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as conn:
        conn.execute(f'DROP OWNED BY "{application_role}"')


def test_run_dbos_database_migrations_on_another_schema_is_idempotent(
    binary_on_env: None, fresh_database: str
) -> None:
    url = _url_with(fresh_database)
    run_dbos_database_migrations(url, schema="tenant_sys")
    run_dbos_database_migrations(url, schema="tenant_sys")
    assert _schema_version(url, "tenant_sys") == LATEST_SCHEMA_VERSION


def test_migrate_errors(
    binary_on_env: None, fresh_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(DBOSException, match="unsharded"):
        DBOS.migrate(_url_with(fresh_database), sharding=True)
    with pytest.raises(DBOSException, match="only supported for Postgres"):
        DBOS.migrate("sqlite:///app.sqlite", application_role="app")
    with pytest.raises(DBOSException, match="SQLite system database is not supported yet"):
        run_dbos_database_migrations("sqlite:///app.sqlite")

    wrong = _url_with(fresh_database, "postgres", "not-the-password-7f3a")
    with pytest.raises(DBOSException, match="DBOS migrations failed") as failed:
        DBOS.migrate(wrong)
    assert "password authentication failed" in str(failed.value)
    assert "not-the-password-7f3a" not in str(failed.value)

    monkeypatch.delenv("DBOS_AGENT_BINARY")
    monkeypatch.setenv("PATH", "")
    with pytest.raises(DBOSException, match="no dbos-agent binary was found"):
        DBOS.migrate(_url_with(fresh_database))


def test_reset_system_database_truncates_then_drops(binary_on_env: None, fresh_database: str) -> None:
    url = _url_with(fresh_database)
    run_dbos_database_migrations(url)
    plain = url.replace("postgresql+psycopg", "postgresql")
    with psycopg.connect(plain, autocommit=True) as conn:
        conn.execute("INSERT INTO dbos.workflow_status (workflow_uuid, status) VALUES ('before-reset', 'SUCCESS')")

    DBOS.reset_system_database(system_database_url=url, truncate=True)
    with psycopg.connect(plain, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM dbos.workflow_status").fetchone() == (0,)
    assert _schema_version(url, "dbos") == LATEST_SCHEMA_VERSION, "the migration record stays"

    DBOS.reset_system_database(system_database_url=url)
    with pg_connect() as conn:
        assert conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (fresh_database,)).fetchone() == (0,)
    DBOS.reset_system_database(system_database_url=url)  # a missing database is not an error


def test_reset_system_database_on_a_live_agent_empties_it(binary_on_env: None, agent_env: AgentEnv) -> None:
    """An agent serving the database sees its sessions ended, reconnects, and
    serves the emptied schema."""
    from dbos_agent import DBOSClient

    client = DBOSClient(agent_socket=agent_env.socket)
    try:
        options = {"workflow_name": "never_served", "queue_name": "reset_queue"}
        client.enqueue(options)
        table = f'"{agent_env.schema}".workflow_status'
        assert query(f"SELECT count(*) FROM {table}") == [(1,)]
        url = "postgresql+psycopg://" + database_url().split("://", 1)[1]
        DBOS.reset_system_database(system_database_url=url, schema=agent_env.schema, truncate=True)
        assert query(f"SELECT count(*) FROM {table}") == [(0,)]
        client.enqueue(options)
        assert query(f"SELECT count(*) FROM {table}") == [(1,)]
    finally:
        client.destroy()


def test_reset_system_database_refused_after_launch(dbos: type) -> None:
    with pytest.raises(DBOSException, match="cannot be reset after DBOS is launched"):
        DBOS.reset_system_database(truncate=True)
