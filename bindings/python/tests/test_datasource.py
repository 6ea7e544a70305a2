"""Data-source transactions (SQLAlchemyDatasource, AsyncSQLAlchemyDatasource)
on real application databases (Postgres and SQLite) and the real agent:
output recorded once in the transaction that made the effect, replayed
without running again, the step visible in the system database as DBOS
shows it, and a worker killed inside a transaction or between its commit and
its step's record leaving the effect and its checkpoint absent (then present
once) or present once."""

from __future__ import annotations

import asyncio
import base64
import os
import pickle
import secrets
import subprocess
import sys
from typing import Any, Dict, Iterator, List, Optional, Tuple

import psycopg
import pytest
import sqlalchemy as sa

from dbos_agent import (
    DBOS,
    AsyncSQLAlchemyDatasource,
    DBOSClient,
    DBOSException,
    SetWorkflowID,
    SQLAlchemyDatasource,
)

from dbos_agent import _datasource

from conftest import AgentEnv, Worker, database_url, gate, new_id, sqlalchemy_url, wait_until

APP_DATABASE = "datasource_app"
KINDS = ["sync-pg", "sync-sqlite", "async-pg", "async-sqlite"]


def app_pg_url() -> str:
    """The application database: a database of its own beside the system
    database's, on the same server."""
    base = sa.make_url(sqlalchemy_url())
    return base.set(database=APP_DATABASE).render_as_string(hide_password=False)


def ensure_app_database() -> None:
    with psycopg.connect(database_url(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (APP_DATABASE,)).fetchone() is None:
            try:
                conn.execute(f'CREATE DATABASE "{APP_DATABASE}"')
            except psycopg.errors.DuplicateDatabase:
                pass  # another session made it meanwhile


class AppDB:
    """One application database (a Postgres schema of its own, or a SQLite
    file), read from outside the data sources with a plain engine."""

    def __init__(self, kind: str, directory: str):
        self.kind = kind
        self.pg = kind.endswith("pg")
        if self.pg:
            self.schema: Optional[str] = f"ds_{secrets.token_hex(4)}"
            self.url = app_pg_url()
            self.engine = sa.create_engine(sa.make_url(self.url).set(drivername="postgresql+psycopg"))
            self.ledger = f'"{self.schema}".ledger'
            self.outputs = f'"{self.schema}".datasource_outputs'
        else:
            self.schema = None
            path = os.path.join(directory, f"{kind}-{secrets.token_hex(3)}.sqlite")
            self.url = f"sqlite:///{path}"
            self.engine = sa.create_engine(self.url)
            self.ledger = "ledger"
            self.outputs = "datasource_outputs"
        with self.engine.begin() as conn:
            if self.schema:
                conn.execute(sa.text(f'CREATE SCHEMA "{self.schema}"'))
            conn.execute(sa.text(f"CREATE TABLE {self.ledger} (workflow_id TEXT NOT NULL, n INTEGER NOT NULL)"))

    def effects(self, wid: str) -> List[int]:
        with self.engine.connect() as conn:
            q = sa.text(f"SELECT n FROM {self.ledger} WHERE workflow_id = :w ORDER BY n")
            return [r[0] for r in conn.execute(q, {"w": wid})]

    def checkpoints(self, wid: str) -> List[Tuple[int, Any, Optional[str], Optional[str]]]:
        """(step id, decoded output, error, serialization) of each checkpoint."""
        with self.engine.connect() as conn:
            q = sa.text(f"SELECT step_id, output, error, serialization FROM {self.outputs} WHERE workflow_id = :w ORDER BY step_id")
            rows = list(conn.execute(q, {"w": wid}))
        return [(r[0], pickle.loads(base64.b64decode(r[1])) if r[1] else None, r[2], r[3]) for r in rows]

    def close(self) -> None:
        if self.schema:
            with self.engine.begin() as conn:
                conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE'))
        self.engine.dispose()


class Sources:
    def __init__(self) -> None:
        self.db: Dict[str, AppDB] = {}
        self.ds: Dict[str, Any] = {}


SOURCES = Sources()


@pytest.fixture(scope="module")
def sources(agent_env: AgentEnv) -> Iterator[Sources]:
    """One data source of each kind, made before DBOS.launch() as DBOS
    requires, and DBOS launched on the module's agent."""
    ensure_app_database()
    DBOS.destroy()
    for kind in KINDS:
        db = AppDB(kind, agent_env.dir)
        SOURCES.db[kind] = db
        if kind == "sync-pg":
            # The caller's own engine.
            engine = sa.create_engine(sa.make_url(db.url).set(drivername="postgresql+psycopg"), pool_size=2)
            SOURCES.ds[kind] = SQLAlchemyDatasource.create(db.url, engine=engine, schema=db.schema)
        elif kind == "sync-sqlite":
            # Engine options; Postgres-only connect arguments are dropped for SQLite.
            sqlite_options: Dict[str, Any] = {"connect_args": {"timeout": 20, "application_name": "ignored"}}
            SOURCES.ds[kind] = SQLAlchemyDatasource.create(db.url, engine_kwargs=sqlite_options, schema=db.schema)
        else:
            url = db.url if db.pg else db.url.replace("sqlite://", "sqlite+aiosqlite://")
            options: Dict[str, Any] = {"pool_size": 3} if db.pg else {}
            SOURCES.ds[kind] = asyncio.run(AsyncSQLAlchemyDatasource.create(url, engine_kwargs=options, schema=db.schema))
    DBOS(config={"name": "pytest", "agent_socket": agent_env.socket})
    DBOS.launch()
    try:
        yield SOURCES
    finally:
        DBOS.destroy()
        # Out of the process's registry (DBOS.destroy(destroy_registry=True)
        # would also drop the other modules' workflows): a later module's
        # rewind must not reach for schemas dropped below.
        for ds in SOURCES.ds.values():
            _datasource._datasources.remove(ds)
        for kind, ds in SOURCES.ds.items():
            if kind.startswith("sync"):
                ds.engine.dispose()  # the caller's engine too: the test made it
            else:
                asyncio.run(ds.engine.dispose())
        for db in SOURCES.db.values():
            db.close()


# ---------------------------------------------------------------------------
# Workflows of the in-process tests. Each works on the data source its first
# argument names; the async ones on the async kinds.

seen: Dict[str, List[Any]] = {}


def credit(kind: str, n: int) -> int:
    ds = SOURCES.ds[kind]
    db = SOURCES.db[kind]
    ds.sql_session().execute(sa.text(f"INSERT INTO {db.ledger} (workflow_id, n) VALUES (:w, :n)"), {"w": DBOS.workflow_id, "n": n})
    return n * 10


def refund(kind: str, n: int) -> int:
    ds = SOURCES.ds[kind]
    db = SOURCES.db[kind]
    ds.sql_session().execute(sa.text(f"INSERT INTO {db.ledger} (workflow_id, n) VALUES (:w, :n)"), {"w": DBOS.workflow_id, "n": -n})
    raise ValueError(f"refund of {n} refused")


@DBOS.step()
def peek(kind: str) -> int:
    """What the application database holds for this workflow mid-run."""
    wid = DBOS.workflow_id or ""
    seen[wid] = SOURCES.db[kind].checkpoints(wid)
    return len(seen[wid])


def isolation(kind: str) -> Any:
    # SQLite knows SERIALIZABLE (and READ UNCOMMITTED) only.
    return "READ COMMITTED" if kind.endswith("pg") else "SERIALIZABLE"


@DBOS.workflow()
def ds_pair(kind: str, n: int) -> Tuple[int, int, int]:
    ds = SOURCES.ds[kind]
    first = ds.run_tx_step(None, credit, kind, n)
    second = ds.transaction(name="ds_named_credit", isolation_level=isolation(kind))(credit)(kind, n + 1)
    return first, second, peek(kind)


@DBOS.workflow()
def ds_failing(kind: str, n: int) -> str:
    ds = SOURCES.ds[kind]
    try:
        ds.transaction(refund)(kind, n)
    except ValueError as e:
        peek(kind)
        return f"caught {e}"
    return "not raised"


async def credit_async(kind: str, n: int) -> int:
    ds = SOURCES.ds[kind]
    db = SOURCES.db[kind]
    await ds.sql_session().execute(sa.text(f"INSERT INTO {db.ledger} (workflow_id, n) VALUES (:w, :n)"), {"w": DBOS.workflow_id, "n": n})
    return n * 10


async def refund_async(kind: str, n: int) -> int:
    ds = SOURCES.ds[kind]
    db = SOURCES.db[kind]
    await ds.sql_session().execute(sa.text(f"INSERT INTO {db.ledger} (workflow_id, n) VALUES (:w, :n)"), {"w": DBOS.workflow_id, "n": -n})
    raise ValueError(f"refund of {n} refused")


@DBOS.workflow()
async def ds_pair_async(kind: str, n: int) -> Tuple[int, int, int]:
    ds = SOURCES.ds[kind]
    first = await ds.run_tx_step_async(None, credit_async, kind, n)
    second = await ds.transaction(name="ds_named_credit", isolation_level=isolation(kind))(credit_async)(kind, n + 1)
    return first, second, peek(kind)


@DBOS.workflow()
async def ds_failing_async(kind: str, n: int) -> str:
    ds = SOURCES.ds[kind]
    try:
        await ds.transaction(refund_async)(kind, n)
    except ValueError as e:
        peek(kind)
        return f"caught {e}"
    return "not raised"


@DBOS.step()
def wait_for_test() -> None:
    gate(DBOS.workflow_id or "").wait(60)


@DBOS.workflow()
def interop_workflow(kind: str) -> int:
    out = SOURCES.ds[kind].transaction(name="interop_credit")(credit)(kind, 9)
    wait_for_test()
    return int(out)


def run_pair(kind: str, wid: str, n: int) -> Any:
    with SetWorkflowID(wid):
        if kind.startswith("sync"):
            return ds_pair(kind, n)
        return asyncio.run(ds_pair_async(kind, n))


def run_failing(kind: str, wid: str, n: int) -> Any:
    with SetWorkflowID(wid):
        if kind.startswith("sync"):
            return ds_failing(kind, n)
        return asyncio.run(ds_failing_async(kind, n))


@pytest.mark.parametrize("kind", KINDS)
def test_transaction_output_recorded_once_with_its_effect(sources: Sources, kind: str) -> None:
    db = sources.db[kind]
    wid = new_id(f"ds-{kind}")
    assert run_pair(kind, wid, 3) == (30, 40, 2)
    assert db.effects(wid) == [3, 4]
    # Mid-run, each transaction's output was in the application database,
    # under DBOS's key (workflow id, step id) and serialization.
    assert seen[wid] == [(1, 30, None, "py_pickle"), (2, 40, None, "py_pickle")]
    # The steps as DBOS shows them: the function's qualified name or name=.
    base = "credit_async" if kind.startswith("async") else "credit"
    steps = DBOS.list_workflow_steps(wid)
    assert [(s["function_id"], s["function_name"], s["output"], s["error"]) for s in steps] == [
        (1, base, 30, None), (2, "ds_named_credit", 40, None), (3, "peek", 2, None),
    ]
    # The workflow's outcome is recorded: its checkpoints are gone.
    assert db.checkpoints(wid) == []
    # Run again under its id: the recorded outcome, nothing applied again.
    assert run_pair(kind, wid, 3) == (30, 40, 2)
    assert db.effects(wid) == [3, 4]


@pytest.mark.parametrize("kind", KINDS)
def test_failed_transaction_rolls_back_and_records_its_error(sources: Sources, kind: str) -> None:
    db = sources.db[kind]
    wid = new_id(f"dsf-{kind}")
    assert run_failing(kind, wid, 5) == "caught refund of 5 refused"
    assert db.effects(wid) == []  # the insert rolled back with the failure
    [(step_id, output, error, serialization)] = seen[wid]
    assert (step_id, output, serialization) == (1, None, "py_pickle") and error is not None
    steps = DBOS.list_workflow_steps(wid)
    assert steps[0]["function_name"] == ("refund_async" if kind.startswith("async") else "refund")
    assert isinstance(steps[0]["error"], ValueError) and str(steps[0]["error"]) == "refund of 5 refused"
    assert db.checkpoints(wid) == []


def test_outside_a_workflow_and_inside_a_step_nothing_is_checkpointed(sources: Sources) -> None:
    kind = "sync-pg"
    ds, db = sources.ds[kind], sources.db[kind]

    def count() -> int:
        return int(ds.sql_session().execute(sa.text(f"SELECT count(*) FROM {db.outputs}")).scalar())

    assert ds.run_tx_step(None, count) == 0
    assert ds.transaction(name="n", isolation_level="REPEATABLE READ")(count)() == 0

    @DBOS.step()
    def step_with_a_transaction() -> int:
        return int(ds.transaction(count)())

    assert step_with_a_transaction() == 0
    with pytest.raises(AssertionError, match="within a sync datasource transaction"):
        ds.sql_session()
    with pytest.raises(AssertionError, match="within an async datasource transaction"):
        sources.ds["async-pg"].sql_session()

    async def coroutine() -> None:
        pass

    with pytest.raises(DBOSException, match="coroutine"):
        ds.transaction(coroutine)
    with pytest.raises(DBOSException, match="coroutine"):
        ds.run_tx_step(None, coroutine)
    with pytest.raises(DBOSException, match="is not"):
        sources.ds["async-pg"].transaction(count)
    with pytest.raises(DBOSException, match="before DBOS.launch"):
        SQLAlchemyDatasource.create(db.url, schema=db.schema)
    # The session factory must be the flavour's, and bind nothing elsewhere.
    from sqlalchemy.ext.asyncio import async_sessionmaker
    from sqlalchemy.orm import sessionmaker

    with pytest.raises(DBOSException, match="requires a sqlalchemy.orm.sessionmaker"):
        SQLAlchemyDatasource.create(db.url, schema=db.schema, sessionmaker=async_sessionmaker())  # type: ignore[arg-type]
    with pytest.raises(DBOSException, match="must not set binds="):
        SQLAlchemyDatasource.create(db.url, schema=db.schema, sessionmaker=sessionmaker(binds={object: ds.engine}))


def test_engine_options(sources: Sources) -> None:
    """create()'s engine= is used as given, engine_kwargs reach the engine it makes."""
    given = sources.ds["sync-pg"]
    assert not given.created_engine and given.engine.pool.size() == 2
    made = sources.ds["async-pg"]
    assert made.created_engine and made.engine.pool.size() == 3
    assert made.engine.url.drivername == "postgresql+psycopg"
    assert sources.ds["async-sqlite"].engine.url.drivername == "sqlite+aiosqlite"


flaky_attempts: List[int] = []


def flaky(kind: str) -> str:
    """Fails twice as a concurrent transaction would (SQLSTATE 40001), after its write."""
    db = SOURCES.db[kind]
    flaky_attempts.append(1)
    SOURCES.ds[kind].sql_session().execute(
        sa.text(f"INSERT INTO {db.ledger} (workflow_id, n) VALUES (:w, :n)"), {"w": DBOS.workflow_id, "n": len(flaky_attempts)}
    )
    if len(flaky_attempts) <= 2:
        raise sa.exc.OperationalError("INSERT", {}, psycopg.errors.SerializationFailure())
    return "committed"


@DBOS.workflow()
def ds_flaky_workflow(kind: str) -> Tuple[str, int]:
    return SOURCES.ds[kind].run_tx_step(None, flaky, kind), peek(kind)


def test_serialization_failure_is_retried_not_recorded(sources: Sources) -> None:
    kind = "sync-pg"
    db = sources.db[kind]
    wid = new_id("dsretry")
    with SetWorkflowID(wid):
        assert ds_flaky_workflow(kind) == ("committed", 1)
    assert len(flaky_attempts) == 3
    assert db.effects(wid) == [3]  # the failed attempts' inserts rolled back
    assert seen[wid] == [(1, "committed", None, "py_pickle")]


def fail_twice(attempts: List[int]) -> None:
    """The statement of a transaction that fails as a concurrent one would
    (SQLSTATE 40001) on its first two attempts, after its write."""
    attempts.append(1)
    if len(attempts) <= 2:
        raise sa.exc.OperationalError("INSERT", {}, psycopg.errors.SerializationFailure())


@pytest.mark.parametrize("kind", ["sync-pg", "async-pg"])
def test_serialization_failure_outside_a_workflow_is_retried(sources: Sources, kind: str) -> None:
    """With no run to pause, the backoff is a plain sleep, on the calling
    thread or the event loop."""
    ds, db = sources.ds[kind], sources.db[kind]
    key = new_id("dsretry-outside")
    attempts: List[int] = []
    insert = sa.text(f"INSERT INTO {db.ledger} (workflow_id, n) VALUES (:w, :n)")

    def sync_tx() -> str:
        ds.sql_session().execute(insert, {"w": key, "n": len(attempts) + 1})
        fail_twice(attempts)
        return "committed"

    async def async_tx() -> str:
        await ds.sql_session().execute(insert, {"w": key, "n": len(attempts) + 1})
        fail_twice(attempts)
        return "committed"

    if kind.startswith("sync"):
        assert ds.run_tx_step(None, sync_tx) == "committed"
    else:
        assert asyncio.run(ds.run_tx_step_async(None, async_tx)) == "committed"
    assert len(attempts) == 3
    assert db.effects(key) == [3]  # the failed attempts' inserts rolled back


class LostAcknowledgement:
    """A session factory whose first transaction commits and then reports
    its connection lost, as a commit whose acknowledgement never arrived
    does (``message`` says how: a retriable connection loss, or not). It
    acts through the transaction's context manager, which the data source
    must enter and leave as DBOS Python's ``with session.begin():`` does."""

    def __init__(self, real: Any, message: str) -> None:
        self.real, self.message, self.pending = real, message, True

    def __call__(self, **kw: Any) -> Any:
        session = self.real(**kw)
        begin, lost = session.begin, self

        class Transaction:
            def __init__(self) -> None:
                self.inner = begin()

            def _lose(self, exc: Any) -> None:
                if exc is None and lost.pending:
                    lost.pending = False
                    raise sa.exc.OperationalError("COMMIT", {}, psycopg.OperationalError(lost.message))

            def __enter__(self) -> Any:
                return self.inner.__enter__()

            def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
                handled = self.inner.__exit__(exc_type, exc, tb)
                self._lose(exc)
                return handled

            async def __aenter__(self) -> Any:
                return await self.inner.__aenter__()

            async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
                handled = await self.inner.__aexit__(exc_type, exc, tb)
                self._lose(exc)
                return handled

        session.begin = Transaction
        return session


@pytest.mark.parametrize("kind", ["sync-pg", "async-pg"])
@pytest.mark.parametrize(
    "message, attempts",
    [("server closed the connection unexpectedly", 2), ("consuming input failed: EOF detected", 1)],
    ids=["retriable", "not-retriable"],
)
def test_a_commit_whose_acknowledgement_is_lost_replays_its_own_checkpoint(
    sources: Sources, kind: str, message: str, attempts: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit landed: a retry (for a retriable loss) or the error's
    record (otherwise) meets this execution's own checkpoint, whose output
    is the step's; the retry's write rolls back."""
    ds, db = sources.ds[kind], sources.db[kind]
    monkeypatch.setattr(ds, "sessionmaker", LostAcknowledgement(ds.sessionmaker, message))
    wid = new_id("ds-lost-ack")
    tries: List[int] = []
    insert = sa.text(f"INSERT INTO {db.ledger} (workflow_id, n) VALUES (:w, :n)")

    def sync_tx() -> str:
        tries.append(1)
        ds.sql_session().execute(insert, {"w": wid, "n": len(tries)})
        return f"result-{len(tries)}"

    async def async_tx() -> str:
        tries.append(1)
        await ds.sql_session().execute(insert, {"w": wid, "n": len(tries)})
        return f"result-{len(tries)}"

    @DBOS.workflow(name=f"ds_lost_ack_{kind}_{attempts}")
    def sync_workflow() -> str:
        return str(ds.run_tx_step(None, sync_tx))

    @DBOS.workflow(name=f"ds_lost_ack_async_{kind}_{attempts}")
    async def async_workflow() -> str:
        return str(await ds.run_tx_step_async(None, async_tx))

    with SetWorkflowID(wid):
        out = sync_workflow() if kind.startswith("sync") else asyncio.run(async_workflow())
    assert out == "result-1"
    assert len(tries) == attempts
    assert db.effects(wid) == [1]  # the committed attempt's write only
    steps = DBOS.list_workflow_steps(wid)
    assert [(s["function_name"], s["output"], s["error"]) for s in steps] == [
        ((sync_tx if kind.startswith("sync") else async_tx).__qualname__, "result-1", None)
    ]


class _Pending:
    """An awaitable that is not a coroutine (no 'never awaited' warning)."""

    def __await__(self) -> Any:
        yield


def test_a_sync_transaction_returning_an_awaitable_fails(sources: Sources) -> None:
    ds = sources.ds["sync-pg"]

    def returns_an_awaitable() -> Any:
        return _Pending()

    with pytest.raises(DBOSException, match="returns_an_awaitable returned an awaitable to a sync caller"):
        ds.run_tx_step(None, returns_an_awaitable)


def test_official_dbos_reads_the_checkpoint_and_the_step(sources: Sources, agent_env: AgentEnv) -> None:
    """A DBOS Python process on the same databases: its data source adopts
    the table this binding made (its migrations find nothing to do) and reads
    the checkpoint as its replay would; its client lists the step."""
    import dbos
    from dbos._datasource import _replay_recorded, _row_to_result

    def official_read(wid: str) -> Any:
        # What its replay reads (its _check_execution, whose checkpoint key
        # needs a launched DBOS: with no sharding it is the workflow id).
        t = official_ds._outputs_table
        with official_ds.engine.connect() as conn:
            q = sa.select(t.c.output, t.c.error, t.c.serialization).where(t.c.workflow_id == wid, t.c.step_id == 1)
            return _row_to_result(conn.execute(q).first())

    kind = "sync-pg"
    ds, db = sources.ds[kind], sources.db[kind]
    wid = new_id("dsinterop")
    release = gate(wid)

    official_ds = dbos.SQLAlchemyDatasource.create(db.url.replace("postgresql://", "postgresql+psycopg://"), schema=db.schema, run_migrations=False)
    official_client = dbos.DBOSClient(system_database_url=sqlalchemy_url(), dbos_system_schema=agent_env.schema)
    try:
        with SetWorkflowID(wid):
            handle = DBOS.start_workflow(interop_workflow, kind)
        client = DBOSClient(agent_socket=agent_env.socket)
        try:
            wait_until(lambda: len(client.list_workflow_steps(wid)) >= 1, "the transaction's step recorded")
        finally:
            client.destroy()
        recorded = official_read(wid)
        assert recorded is not None
        assert _replay_recorded(recorded, official_ds.serializer) == 90
        steps = official_client.list_workflow_steps(wid)
        assert [(s["function_id"], s["function_name"], s["output"]) for s in steps[:1]] == [(1, "interop_credit", 90)]
        release.set()
        assert handle.get_result() == 90
        assert db.effects(wid) == [9]
        assert official_read(wid) is None  # dropped at completion
    finally:
        release.set()
        official_client.destroy()
        official_ds.engine.dispose()


def test_a_table_official_dbos_made_is_used_as_is(sources: Sources, agent_env: AgentEnv) -> None:
    """The other way round: DBOS Python migrates a fresh schema, and a data
    source of this binding verifying it (run_migrations=False) accepts it."""
    import dbos

    schema = f"ds_official_{secrets.token_hex(3)}"
    url = app_pg_url()
    dbos.SQLAlchemyDatasource.migrate(url.replace("postgresql://", "postgresql+psycopg://"), schema=schema)
    engine = sa.create_engine(sa.make_url(url).set(drivername="postgresql+psycopg"))
    try:
        with engine.connect() as conn:
            _datasource._verify_migrated(conn, schema)
            assert _datasource._recorded_version(conn, schema) == 1
            cols = [r[0] for r in conn.execute(sa.text(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = :s AND table_name = 'datasource_outputs' ORDER BY ordinal_position"
            ), {"s": schema})]
        assert cols == ["workflow_id", "step_id", "output", "error", "serialization", "created_at"]
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()


# ---------------------------------------------------------------------------
# Worker processes killed mid-transaction


def worker_env(env: AgentEnv, db: AppDB, flavour: str, **extra: str) -> Dict[str, str]:
    url = db.url
    if flavour == "async" and not db.pg:
        url = url.replace("sqlite://", "sqlite+aiosqlite://")
    out = {"DBOS_AGENT_SOCKET": env.socket, "APP_DB_URL": url, "APP_SCHEMA": db.schema or "", "FLAVOUR": flavour}
    out.update(extra)
    return out


def tx_runs(w: Worker, wid: str) -> int:
    return sum(1 for line in w.out.lines if line.startswith(f"tx {wid} "))


CRASH_CASES = [
    pytest.param("sync-pg", id="sync-postgres"),
    pytest.param("sync-sqlite", id="sync-sqlite"),
    pytest.param("async-pg", id="async-postgres"),
    pytest.param("async-sqlite", id="async-sqlite"),
]


@pytest.fixture
def crash_db(agent_env: AgentEnv, request: pytest.FixtureRequest) -> Iterator[AppDB]:
    # Asked for before ``workers``, so that the workers (one may hold a
    # transaction open) are killed before the schema is dropped.
    ensure_app_database()
    db = AppDB(request.param, agent_env.dir)
    try:
        yield db
    finally:
        db.close()


class Crash:
    """``ds_credit(n)`` (or its async twin) enqueued onto a worker holding at
    ``hold`` (its handshake printed) until the test kills it, then recovered
    by a second worker that stops at its gate, after the transaction."""

    def __init__(self, env: AgentEnv, workers: List[Worker], db: AppDB, hold: str, n: int):
        self.env, self.workers, self.db, self.n = env, workers, db, n
        self.flavour = db.kind.split("-")[0]
        self.tx_name = "credit" if self.flavour == "sync" else "credit_async"
        first = self.worker(HOLD=hold)
        first.out.wait_for("ready")
        self.client = DBOSClient(agent_socket=env.socket)
        name = "ds_credit" if self.flavour == "sync" else "ds_credit_async"
        self.handle = self.client.enqueue({"workflow_name": name, "queue_name": "ds_queue", "app_version": f"ds-{self.flavour}"}, n)
        self.wid = self.handle.workflow_id
        first.out.wait_for(("before-record " if hold == "before_record" else "in-tx ") + self.wid)
        self.first = first

    def worker(self, **env: str) -> Worker:
        w = Worker("datasource_worker.py", worker_env(self.env, self.db, self.flavour, **env))
        self.workers.append(w)
        return w

    def steps(self) -> List[Tuple[int, str, Any]]:
        return [(s["function_id"], s["function_name"], s["output"]) for s in self.client.list_workflow_steps(self.wid)]

    def recover(self) -> Worker:
        second = self.worker(GATE="1")
        second.out.wait_for(f"gate {self.wid}")
        return second

    def finish(self, second: Worker) -> None:
        second.send("go")
        assert self.handle.get_result() == (self.n * 10, "after")
        assert self.db.effects(self.wid) == [self.n]
        # Dropped by the worker once the outcome is recorded, just after.
        wait_until(lambda: self.db.checkpoints(self.wid) == [], "the checkpoints dropped")


@pytest.mark.parametrize("crash_db", [c.values[0] for c in CRASH_CASES], indirect=True, ids=[c.id for c in CRASH_CASES])
def test_worker_killed_inside_its_transaction(agent_env: AgentEnv, crash_db: AppDB, workers: List[Worker]) -> None:
    """SIGKILL between the transaction's write and its commit: neither the
    effect nor its checkpoint is there; the workflow's recovery applies
    both, once, and records the step."""
    crash = Crash(agent_env, workers, crash_db, "in_tx", 7)
    wid = crash.wid
    try:
        assert crash_db.effects(wid) == []  # written, not committed
        crash.first.kill()
        assert crash_db.effects(wid) == [] and crash_db.checkpoints(wid) == []
        assert crash.steps() == []

        second = crash.recover()
        # Committed together: the effect and the checkpoint, once each.
        assert crash_db.effects(wid) == [7]
        assert crash_db.checkpoints(wid) == [(1, 70, None, "py_pickle")]
        assert crash.steps() == [(1, crash.tx_name, 70)]
        crash.finish(second)
        assert tx_runs(second, wid) == 1
    finally:
        crash.client.destroy()


@pytest.mark.parametrize("crash_db", ["sync-pg", "async-sqlite"], indirect=True, ids=["sync-postgres", "async-sqlite"])
def test_worker_killed_between_commit_and_step_record(agent_env: AgentEnv, crash_db: AppDB, workers: List[Worker]) -> None:
    """SIGKILL after the transaction committed but before its step reached
    the system database: the recovered run returns the output recorded in
    the application database without running the transaction again, and
    records the step."""
    crash = Crash(agent_env, workers, crash_db, "before_record", 4)
    wid = crash.wid
    try:
        crash.first.kill()
        assert crash_db.effects(wid) == [4]
        assert crash_db.checkpoints(wid) == [(1, 40, None, "py_pickle")]
        assert crash.steps() == []

        second = crash.recover()
        assert crash.steps() == [(1, crash.tx_name, 40)]
        crash.finish(second)
        assert tx_runs(second, wid) == 0  # replayed from its checkpoint
    finally:
        crash.client.destroy()


def test_importing_without_sqlalchemy_works_and_use_raises() -> None:
    """SQLAlchemy is an optional dependency: the package imports without it,
    and a data source then refuses with how to install it."""
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'sqlalchemy' or name.startswith('sqlalchemy.'):\n"
        "            raise ImportError('blocked: ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import dbos_agent\n"
        "from dbos_agent import SQLAlchemyDatasource\n"
        "try:\n"
        "    SQLAlchemyDatasource.create('sqlite://')\n"
        "except ImportError as e:\n"
        "    print('refused:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "refused: SQLAlchemyDatasource needs SQLAlchemy" in out.stdout
    assert "dbos-agent[sqlalchemy]" in out.stdout


def test_a_dbos_python_app_with_a_datasource_runs_unchanged_but_for_its_import(agent_env: AgentEnv, tmp_path: Any) -> None:
    """tests/apps/dbos_datasource_app.py run with the official dbos package
    (on a system schema and an application schema of its own) and, with its
    import changed to dbos_agent, against the agent: both print the same."""
    from conftest import TESTS, drop_schema

    ensure_app_database()
    source = (TESTS / "apps" / "dbos_datasource_app.py").read_text()
    assert source.count("from dbos import") == 1
    ported = tmp_path / "ported_ds_app.py"
    ported.write_text(source.replace("from dbos import", "from dbos_agent import"))
    ds_url = app_pg_url().replace("postgresql://", "postgresql+psycopg://")
    official_schema = agent_env.schema + "_official"
    ds_schemas = [f"ds_app_{secrets.token_hex(3)}" for _ in range(2)]

    def run(path: Any, env: Dict[str, str]) -> List[str]:
        full = dict(os.environ)
        full.update(env)
        out = subprocess.run([sys.executable, str(path), "ds-order-1"], env=full, capture_output=True, text=True, timeout=180)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout.splitlines()

    engine = sa.create_engine(sa.make_url(app_pg_url()).set(drivername="postgresql+psycopg"))
    try:
        official = run(TESTS / "apps" / "dbos_datasource_app.py", {
            "APP_DATABASE_URL": sqlalchemy_url(), "APP_SCHEMA": official_schema, "DS_URL": ds_url, "DS_SCHEMA": ds_schemas[0],
        })
        ours = run(ported, {
            "APP_DATABASE_URL": sqlalchemy_url(), "APP_SCHEMA": agent_env.schema, "DBOS_AGENT_SOCKET": agent_env.socket,
            "DS_URL": ds_url, "DS_SCHEMA": ds_schemas[1],
        })
    finally:
        drop_schema(official_schema)
        with engine.begin() as conn:
            for schema in ds_schemas:
                conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()
    assert official[0] == "result {'order': 1, 'note': 'order 1 placed', 'refused': 'no order 101', 'id': 'ds-order-1'}"
    assert official[2].startswith("steps [(1, 'place_order', 1, 'None'), (2, 'notify', 'order 1 placed', 'None'), (3, 'cancel_order', None, \"ValueError('no order 101')\")")
    assert official[3:5] == ["orders [(1, 'widget', 2)]", "checkpoints left 0"]
    assert ours == official


def test_rewind_drops_the_rewound_steps_checkpoints_first(sources: Sources) -> None:
    kind = "sync-pg"
    db = sources.db[kind]
    wid = new_id("dsrewind")
    assert run_pair(kind, wid, 6) == (60, 70, 2)
    # A checkpoint left behind for step 2 (by a run whose cleanup never ran),
    # with an output the step never returned.
    with db.engine.begin() as conn:
        conn.execute(
            sa.text(f"INSERT INTO {db.outputs} (workflow_id, step_id, output, serialization) VALUES (:w, 2, :o, 'py_pickle')"),
            {"w": wid, "o": base64.b64encode(pickle.dumps(999)).decode()},
        )
    # Rewound from step 2: step 1 replays from the system database, step 2
    # runs again instead of replaying the stale checkpoint.
    assert DBOS.rewind_workflow(wid, start_step=2).get_result() == (60, 70, 1)
    assert db.effects(wid) == [6, 7, 7]
    assert seen[wid] == [(2, 70, None, "py_pickle")]

    # A workflow still running is refused, its checkpoints untouched.
    running = new_id("dsrewind-running")
    with SetWorkflowID(running):
        handle = DBOS.start_workflow(interop_workflow, kind)
    try:
        wait_until(lambda: db.checkpoints(running) != [], "the running workflow's transaction committed")
        with pytest.raises(DBOSException, match="only a workflow in a terminal state can be rewound"):
            DBOS.rewind_workflow(running)
        assert db.checkpoints(running) == [(1, 90, None, "py_pickle")]
    finally:
        gate(running).set()
    assert handle.get_result() == 90


@pytest.mark.parametrize("crash_db", ["sync-pg", "async-pg"], indirect=True, ids=["sync-postgres", "async-postgres"])
def test_run_cut_off_from_its_agent_rolls_its_transaction_back(agent_env: AgentEnv, crash_db: AppDB, workers: List[Worker]) -> None:
    """The agent dies while a transaction is open: the run has lost its
    workflow, so the transaction rolls back instead of committing (nothing
    of it is in the application database); the restarted agent hands the
    workflow back and it commits once. (Last in the module: it restarts the
    module's agent.)"""
    crash = Crash(agent_env, workers, crash_db, "in_tx_until_go", 5)
    wid = crash.wid
    try:
        agent_env.agent.kill()
        crash.first.out.wait_for("connection to")  # the binding noticed the drop
        crash.first.send("go")
        crash.first.out.wait_for(f"workflow {wid} stopped here")
        assert crash_db.effects(wid) == [] and crash_db.checkpoints(wid) == []

        agent_env.start_agent()
        assert crash.handle.get_result() == (50, "after")
        assert crash_db.effects(wid) == [5]
        assert tx_runs(crash.first, wid) == 2  # the rolled-back attempt, then the committed one
        assert crash.steps()[0] == (1, crash.tx_name, 50)
        wait_until(lambda: crash_db.checkpoints(wid) == [], "the checkpoints dropped")
    finally:
        crash.client.destroy()
