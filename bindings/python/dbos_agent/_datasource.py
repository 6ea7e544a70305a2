"""Data-source transactions: DBOS Python's ``SQLAlchemyDatasource`` and
``AsyncSQLAlchemyDatasource``.

A transaction runs the caller's function in a SQLAlchemy session on the
application database, in this process, and records its output in the same
transaction, in the table DBOS Python uses (``datasource_outputs``, keyed by
workflow id and step id): its effects and its checkpoint commit together or
not at all. The step is then recorded in the system database through the
agent like any step, under DBOS's name (the function's qualified name, or
``name=``). A replay takes the system database's record first; a step that
committed in the application database but whose system-database record was
lost (the process died between the two) returns the output recorded there
without running again. Once the workflow's outcome is recorded, its
checkpoints are deleted: the system database's steps cover them.

The algorithm is one operation of the binding's op interpreter for both
flavours (a call on a SQLAlchemy session, connection or the user's function is
a ``Local``, whose result the async driver awaits), driven on the calling
thread for ``SQLAlchemyDatasource`` and on the event loop for
``AsyncSQLAlchemyDatasource``.

SQLAlchemy is an optional dependency (``dbos-agent[sqlalchemy]``): this
module imports without it, and creating a data source then raises.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hashlib
import inspect
import logging
import sys
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Coroutine,
    Dict,
    List,
    Literal,
    Optional,
    Tuple,
    TypedDict,
    TypeVar,
    Union,
    cast,
    overload,
)

from . import _classes
from . import _tracing as tracing
from ._context import _Ctx, _current
from ._core import (
    NEW_STEP,
    Engine,
    Local,
    Op,
    Pause,
    WorkflowRun,
    _now_ms,
    _record_body,
    begin_step,
    drive,
    drive_async,
    record_call,
)
from ._error import (
    DBOSException,
    DBOSInitializationError,
    DBOSWorkflowCancelledError,
    DBOSWorkflowConflictIDError,
)
from ._serialization import (
    DBOSDefaultSerializer,
    Serializer,
    deserialize_exception,
    deserialize_value,
    serialize_exception,
    serialize_value,
)

try:
    import sqlalchemy as sa
    from sqlalchemy.exc import DBAPIError

    _sqlalchemy_missing: Optional[ImportError] = None
except ImportError as _e:  # the extra is not installed: refused at use
    sa = None  # type: ignore[assignment]
    DBAPIError = None  # type: ignore[assignment,misc]
    _sqlalchemy_missing = _e

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker
    from sqlalchemy.orm import Session, sessionmaker

logger = logging.getLogger("dbos_agent")

R = TypeVar("R")

IsolationLevel = Literal["SERIALIZABLE", "REPEATABLE READ", "READ COMMITTED"]

# DBOS Python's names: the checkpoint table, its migrations' version table,
# the default schema on Postgres, and the advisory lock its migrators take
# (the same key, so a DBOS process and this binding never migrate at once).
OUTPUTS_TABLE = "datasource_outputs"
MIGRATIONS_TABLE = "dbos_datasource_migrations"
DEFAULT_SCHEMA = "dbos"
_MIGRATION_IDLE_TIMEOUT = "30s"

# A transient failure's retries back off as DBOS Python's do.
_FIRST_RETRY_WAIT = 0.001
_RETRY_BACKOFF = 1.5
_MAX_RETRY_WAIT = 2.0

# The session of the transaction running in this thread or task, for
# sql_session(); one per flavour, as DBOS keeps them.
_sync_session: "contextvars.ContextVar[Optional[Session]]" = contextvars.ContextVar("dbos_agent_ds_session", default=None)
_async_session: "contextvars.ContextVar[Optional[AsyncSession]]" = contextvars.ContextVar(
    "dbos_agent_ds_async_session", default=None
)

# Every data source made in this process.
_datasources: "List[Union[SQLAlchemyDatasource, AsyncSQLAlchemyDatasource]]" = []


def forget_datasources() -> None:
    """DBOS.destroy(destroy_registry=True): the data sources made so far are
    no longer this application's (a rewind leaves their checkpoints alone)."""
    _datasources.clear()


class DatasourceOptions(TypedDict, total=False):
    name: Optional[str]
    isolation_level: Optional[IsolationLevel]


class RecordedResult(TypedDict):
    output: Optional[str]
    error: Optional[str]
    serialization: Optional[str]


class _StepAlreadyRecorded(Exception):
    """Another execution's checkpoint for this step committed first: this
    attempt's transaction is rolled back and that checkpoint is the step's
    outcome."""


def _require_sqlalchemy(what: str) -> None:
    if _sqlalchemy_missing is not None:
        raise ImportError(
            f"{what} needs SQLAlchemy, an optional dependency of dbos-agent: "
            f"pip install 'dbos-agent[sqlalchemy]' ({_sqlalchemy_missing})"
        ) from _sqlalchemy_missing


# ---------------------------------------------------------------------------
# Schema


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def _sqlite_now_ms() -> str:
    # unixepoch('subsec') needs SQLite 3.42, which Python 3.12's builds have.
    return "(unixepoch('subsec') * 1000)" if sys.version_info >= (3, 12) else "(strftime('%s','now') * 1000)"


def _postgres_migrations(schema: str) -> List[str]:
    # The first is IF NOT EXISTS so that a table made before versioning is adopted.
    return [
        f"""CREATE TABLE IF NOT EXISTS {_quote(schema)}.{OUTPUTS_TABLE} (
            workflow_id TEXT NOT NULL,
            step_id INT4 NOT NULL,
            output TEXT,
            error TEXT,
            serialization TEXT,
            created_at BIGINT NOT NULL DEFAULT (EXTRACT(EPOCH FROM now())*1000)::bigint,
            PRIMARY KEY (workflow_id, step_id)
        )""",
    ]


def _sqlite_migrations() -> List[str]:
    return [
        f"""CREATE TABLE IF NOT EXISTS {OUTPUTS_TABLE} (
            workflow_id TEXT NOT NULL,
            step_id INTEGER NOT NULL,
            output TEXT,
            error TEXT,
            serialization TEXT,
            created_at INTEGER NOT NULL DEFAULT {_sqlite_now_ms()},
            PRIMARY KEY (workflow_id, step_id)
        )""",
    ]


def _outputs_table(schema: Optional[str]) -> "sa.Table":
    return sa.Table(
        OUTPUTS_TABLE,
        sa.MetaData(schema=schema),
        sa.Column("workflow_id", sa.Text),
        sa.Column("step_id", sa.Integer),
        sa.Column("output", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("serialization", sa.Text, nullable=True),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("workflow_id", "step_id"),
    )


def _pg_has_table(conn: "sa.Connection", schema: str, table: str) -> bool:
    # pg_catalog rather than information_schema, which hides tables the role has no grant on.
    q = sa.text("SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = :s AND tablename = :t")
    return conn.execute(q, {"s": schema, "t": table}).first() is not None


def _recorded_version(conn: "sa.Connection", schema: Optional[str]) -> int:
    if conn.dialect.name == "sqlite":
        q = sa.text("SELECT name FROM sqlite_master WHERE type = 'table' AND name = :t")
        if conn.execute(q, {"t": MIGRATIONS_TABLE}).first() is None:
            return 0
        table = MIGRATIONS_TABLE
    else:
        assert schema is not None
        if not _pg_has_table(conn, schema, MIGRATIONS_TABLE):
            return 0
        table = f"{_quote(schema)}.{MIGRATIONS_TABLE}"
    row = conn.execute(sa.text(f"SELECT version FROM {table}")).first()
    return int(row[0]) if row else 0


def _latest_version(conn: "sa.Connection", schema: Optional[str]) -> int:
    return len(_sqlite_migrations() if conn.dialect.name == "sqlite" else _postgres_migrations(schema or DEFAULT_SCHEMA))


def _migration_lock_key(schema: str) -> int:
    digest = hashlib.sha256(f"dbos.datasource_migrations.{schema}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _migrate(conn: "sa.Connection", schema: Optional[str]) -> None:
    """Bring the checkpoint table to the latest version inside ``conn``'s
    transaction, as DBOS Python does (so either may create it first): under
    a lock, checking the version again once it is held."""
    latest = _latest_version(conn, schema)
    if _recorded_version(conn, schema) >= latest:
        return
    if conn.dialect.name == "sqlite":
        driver_conn = conn.connection.driver_connection
        if driver_conn is not None and not getattr(driver_conn, "in_transaction", True):
            # pysqlite would begin only at the first write: take the write lock now.
            conn.execute(sa.text("BEGIN IMMEDIATE"))
        migrations = _sqlite_migrations()
        version_table = MIGRATIONS_TABLE
        create_version = f"CREATE TABLE IF NOT EXISTS {version_table} (version INTEGER NOT NULL PRIMARY KEY)"
    else:
        assert schema is not None
        migrations = _postgres_migrations(schema)
        version_table = f"{_quote(schema)}.{MIGRATIONS_TABLE}"
        create_version = f"CREATE TABLE IF NOT EXISTS {version_table} (version BIGINT NOT NULL PRIMARY KEY)"
        if conn.dialect.name != "cockroachdb":
            # A migrator that stalls holding the lock is ended by the server.
            conn.execute(sa.text(f"SET LOCAL idle_in_transaction_session_timeout = '{_MIGRATION_IDLE_TIMEOUT}'"))
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _migration_lock_key(schema)})
        # Checked first: CREATE SCHEMA IF NOT EXISTS needs the CREATE privilege even when it exists.
        q = sa.text("SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = :s")
        if conn.execute(q, {"s": schema}).first() is None:
            conn.execute(sa.text(f"CREATE SCHEMA {_quote(schema)}"))
    current = _recorded_version(conn, schema)
    if current >= latest:
        return
    conn.execute(sa.text(create_version))
    for i, statement in enumerate(migrations, 1):
        if i > current:
            logger.info("applying data source schema migration %d", i)
            conn.execute(sa.text(statement))
    if current == 0:
        conn.execute(sa.text(f"INSERT INTO {version_table} (version) VALUES (:v)"), {"v": latest})
    else:
        conn.execute(sa.text(f"UPDATE {version_table} SET version = :v"), {"v": latest})


def _verify_migrated(conn: "sa.Connection", schema: Optional[str]) -> None:
    current, latest = _recorded_version(conn, schema), _latest_version(conn, schema)
    if current < latest:
        url = conn.engine.url.render_as_string(hide_password=True)
        raise DBOSInitializationError(
            f"Datasource database {url} is at datasource schema version {current}, but this "
            f"version of DBOS requires {latest}. This datasource was created with run_migrations "
            f"disabled, so it will not migrate it: either migrate it out of band "
            f"(the datasource class's `migrate`) or create it with run_migrations enabled."
        )


def _grants(schema: str, role: str) -> List[str]:
    s, r = _quote(schema), _quote(role)
    return [
        f"GRANT USAGE ON SCHEMA {s} TO {r}",
        f"GRANT SELECT, INSERT, DELETE ON {s}.{OUTPUTS_TABLE} TO {r}",
        f"GRANT SELECT ON {s}.{MIGRATIONS_TABLE} TO {r}",
    ]


def _is_sqlite(database_url: str) -> bool:
    return database_url.startswith("sqlite")


def _postgres_url(database_url: str) -> "sa.URL":
    # DBOS Python's data sources speak psycopg 3 to Postgres, sync and async.
    return sa.make_url(database_url).set(drivername="postgresql+psycopg")


def _migrate_database(database_url: str, schema: Optional[str], application_role: Optional[str]) -> None:
    _require_sqlalchemy("Datasource.migrate")
    sqlite = _is_sqlite(database_url)
    if sqlite and application_role:
        raise DBOSException("application_role is only supported for Postgres datasources")
    url = sa.make_url(database_url).set(drivername="sqlite") if sqlite else _postgres_url(database_url)
    resolved = None if sqlite else (schema or DEFAULT_SCHEMA)
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            _migrate(conn, resolved)
            if application_role:
                assert resolved is not None
                for statement in _grants(resolved, application_role):
                    conn.execute(sa.text(statement))
    finally:
        engine.dispose()


# ---------------------------------------------------------------------------
# Errors worth another attempt


def _sqlstate(error: BaseException) -> str:
    orig = getattr(error, "orig", None)
    return str(getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None) or "")


def _is_retriable(error: BaseException, sqlite: bool) -> bool:
    """A transient failure of the attempt (it rolled back, so it runs again):
    a lost or refused connection, a lack of resources, an idle-in-transaction
    timeout, a serialization failure or deadlock; on SQLite, a lock."""
    if DBAPIError is None or not isinstance(error, DBAPIError):
        return False
    if sqlite:
        text = str(error.orig).lower()
        return "database is locked" in text or "database table is locked" in text
    if error.connection_invalidated:
        return True
    code = _sqlstate(error)
    if code in ("40001", "40P01", "25P03") or code.startswith("08") or code.startswith("53"):
        return True
    text = str(error.orig)
    return (
        "connection failed" in text
        or "server closed the connection unexpectedly" in text
        or type(error.orig).__name__ == "ConnectionTimeout"
    )


# ---------------------------------------------------------------------------
# The transaction, written once for both flavours
#
# An operation of the binding's op interpreter: it yields a Local (a call on
# a session, connection or the user's function, whose result the async
# driver awaits), a Call to the agent, or a Pause (of a run, or a plain sleep
# outside one), and gets each answer back.


def _next_wait(wait: float) -> float:
    return min(wait * _RETRY_BACKOFF, _MAX_RETRY_WAIT)


Datasource = Union["SQLAlchemyDatasource", "AsyncSQLAlchemyDatasource"]


def _on_connection(ds: Datasource, statement: Any, *, write: bool) -> "Op[Any]":
    """``statement`` on a connection of its own (in a transaction of its
    own when ``write``): the buffered result."""
    conn = yield Local(ds.engine.connect)
    try:
        if write:
            yield Local(conn.begin)
        result = yield Local(conn.execute, statement, execution_options=ds._pin)
        rows = result.fetchall() if result.returns_rows else None
        if write:
            yield Local(conn.commit)
        return rows
    finally:
        yield Local(conn.close)


def _read_checkpoint(ds: Datasource, workflow_id: str, step_id: int, run: Optional[WorkflowRun]) -> "Op[Optional[RecordedResult]]":
    t = ds._outputs_table
    q = sa.select(t.c.output, t.c.error, t.c.serialization).where(t.c.workflow_id == workflow_id, t.c.step_id == step_id)
    wait = _FIRST_RETRY_WAIT
    while True:
        try:
            rows = yield from _on_connection(ds, q, write=False)
        except Exception as e:
            if not _is_retriable(e, ds._sqlite):
                raise
            yield Pause(wait, run)
            wait = _next_wait(wait)
            continue
        if not rows:
            return None
        return {"output": rows[0][0], "error": rows[0][1], "serialization": rows[0][2]}


def _insert_checkpoint(
    ds: Datasource, workflow_id: str, step_id: int, output: Optional[str], error: Optional[str], tag: Optional[str],
) -> Any:
    t = ds._outputs_table
    return (
        ds._dialect.insert(t)
        .values(workflow_id=workflow_id, step_id=step_id, output=output, error=error, serialization=tag)
        .on_conflict_do_nothing(index_elements=[t.c.workflow_id, t.c.step_id])
        # No row back: another execution's checkpoint was there first (above
        # READ COMMITTED this can be a serialization failure instead, whose
        # retry comes back here).
        .returning(t.c.workflow_id)
    )


def _replay_checkpoint(recorded: RecordedResult, serializer: Serializer) -> Any:
    if recorded["error"]:
        err = deserialize_exception(recorded["error"], recorded["serialization"], serializer)
        assert err is not None
        raise err
    if recorded["output"] is not None:
        return deserialize_value(recorded["output"], recorded["serialization"], serializer)
    raise DBOSException("Datasource recorded output and error are both None")


def _attempts(
    ds: Datasource, isolation_level: str, func: Callable[..., Any], args: Tuple[Any, ...], kwargs: Dict[str, Any],
    at: Optional[Tuple[WorkflowRun, int]],
) -> "Op[Any]":
    """Run ``func`` in a transaction until an attempt commits or fails for
    good; ``at`` (a workflow's run and step) checkpoints it in the same
    transaction, and a failure in one of its own."""
    run = at[0] if at is not None else None
    session_var: "contextvars.ContextVar[Any]" = ds._session_var
    on_loop = isinstance(ds, AsyncSQLAlchemyDatasource)
    wait = _FIRST_RETRY_WAIT
    while True:
        session = ds.sessionmaker(bind=ds.engine)
        token = session_var.set(session)
        try:
            # The session's transaction as a context manager, entered and
            # left as DBOS's ``with session.begin():`` does (a session made
            # by a sessionmaker whose transactions do more on exit, such as
            # report a lost acknowledgement of the commit, behaves the
            # same). Making it does no I/O; entering and leaving do.
            transaction = session.begin()
            exit_transaction = transaction.__aexit__ if on_loop else transaction.__exit__
            yield Local(transaction.__aenter__ if on_loop else transaction.__enter__)
            try:
                yield Local(session.connection, execution_options={"isolation_level": isolation_level})
                output = yield Local(func, *args, **kwargs)
                if at is not None:
                    # Flushed first, so the checkpoint holds generated keys and
                    # defaults as the caller sees them.
                    yield Local(session.flush)
                    data, tag = serialize_value(output, None, ds.serializer)
                    stmt = _insert_checkpoint(ds, run.workflow_id, at[1], data, None, tag)  # type: ignore[union-attr]
                    result = yield Local(session.execute, stmt, execution_options=ds._pin)
                    if result.first() is None:
                        raise _StepAlreadyRecorded()
                    # A run that lost its workflow (its connection dropped, it was
                    # cancelled) commits nothing.
                    run.raise_if_stopped()  # type: ignore[union-attr]
            except BaseException as e:
                try:
                    yield Local(exit_transaction, type(e), e, e.__traceback__)  # rolls back
                except Exception as rollback_error:
                    if rollback_error is not e:
                        logger.debug("data source rollback failed: %s", rollback_error)
                raise
            yield Local(exit_transaction, None, None, None)  # commits
            return output
        except (_StepAlreadyRecorded, DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError):
            raise  # another execution's outcome, or a stopped run: nothing of this one is recorded
        except Exception as e:
            if _is_retriable(e, ds._sqlite):
                logger.debug("data source transaction failed (%s); retrying in %.3fs", e, wait)
                tracing.add_event("Transaction Failure", {"retry_wait_seconds": wait})
                yield Pause(wait, run)
                wait = _next_wait(wait)
                continue
            if at is not None:
                data, tag = serialize_exception(e, None, ds.serializer)
                stmt = _insert_checkpoint(ds, at[0].workflow_id, at[1], None, data, tag)
                rows = yield from _on_connection(ds, stmt, write=True)
                if not rows:
                    raise _StepAlreadyRecorded() from None
            raise
        finally:
            session_var.reset(token)
            yield Local(session.close)


def _transaction_op(
    ds: Datasource, options: Optional[DatasourceOptions], func: Callable[..., Any], args: Tuple[Any, ...], kwargs: Dict[str, Any]
) -> "Op[Any]":
    name = (options or {}).get("name") or func.__qualname__
    isolation_level = (options or {}).get("isolation_level") or "SERIALIZABLE"
    ctx = _current.get()
    if ctx is None or ctx.step_id is not None:
        # Outside a workflow, or inside a step: a transaction, checkpointed nowhere.
        return (yield from _attempts(ds, isolation_level, func, args, kwargs, None))
    engine, run = ctx.engine, ctx.run
    if ds not in run.datasources:
        # Even on replay: the run's completion drops an earlier execution's checkpoints too.
        run.datasources.append(ds)
    fid, replayed = begin_step(run, name, engine.serializer)
    if replayed is not NEW_STEP:
        return replayed
    started = _now_ms()
    output: Any = None
    error: Optional[BaseException] = None
    token = _current.set(_Ctx(engine, run, fid))
    span = tracing.step_span(run, name)
    try:
        recorded = yield from _read_checkpoint(ds, run.workflow_id, fid, run)
        if recorded is None:
            try:
                output = yield from _attempts(ds, isolation_level, func, args, kwargs, (run, fid))
            except _StepAlreadyRecorded:
                # Another execution's commit, or this one's whose acknowledgement
                # was lost: either way that checkpoint is this step's outcome.
                run.raise_if_stopped()
                recorded = yield from _read_checkpoint(ds, run.workflow_id, fid, run)
                if recorded is None:
                    raise DBOSException(
                        f"Datasource step {fid} of workflow {run.workflow_id} conflicted with a "
                        "concurrent execution, but no recorded result was found"
                    ) from None
        if recorded is not None:
            logger.debug("data source step %d (%s) of workflow %s replayed from its checkpoint", fid, name, run.workflow_id)
            output = _replay_checkpoint(recorded, ds.serializer)
    except (DBOSWorkflowCancelledError, DBOSWorkflowConflictIDError):
        raise
    except Exception as e:
        error = e
    finally:
        span.end(error)
        _current.reset(token)
    if run.stop_reason is not None:
        raise run.stop_error()
    yield record_call(run, _record_body(run, fid, name, started, output, error, engine.serializer))
    if error is not None:
        raise error
    return output


def _delete_op(ds: Datasource, workflow_id: str, start_step: int) -> "Op[None]":
    t = ds._outputs_table
    yield from _on_connection(ds, sa.delete(t).where(t.c.workflow_id == workflow_id, t.c.step_id >= start_step), write=True)


def _drop_completed(ds: "Datasource", workflow_id: str) -> Any:
    """Once a run's outcome is recorded, the system database's steps cover
    every transaction, so the run's checkpoints go. Called where the engine
    records the outcome: on a run's event loop it returns an awaitable (the
    async driver awaits it; a sync data source's deletes go to a thread), on
    a plain thread it deletes here (an async data source's connections
    belong to a loop this thread does not run: they are left). Best effort:
    a checkpoint left behind is harmless."""
    on_loop = _running_loop() is not None

    async def delete_async() -> None:
        try:
            if isinstance(ds, AsyncSQLAlchemyDatasource):
                await drive_async(None, _delete_op(ds, workflow_id, 1))
            else:
                await asyncio.to_thread(drive, None, _delete_op(ds, workflow_id, 1))
        except Exception as e:
            logger.warning("Failed to delete datasource checkpoints of workflow %s: %s", workflow_id, e)

    if on_loop:
        return delete_async()
    if isinstance(ds, AsyncSQLAlchemyDatasource):
        return None
    try:
        drive(None, _delete_op(ds, workflow_id, 1))
    except Exception as e:
        logger.warning("Failed to delete datasource checkpoints of workflow %s: %s", workflow_id, e)
    return None


# ---------------------------------------------------------------------------
# The two classes


class _Base:
    """What both flavours share: the engine, the checkpoint table, the
    session factory, registration."""

    _session_var: "contextvars.ContextVar[Any]"
    _flavour = ""

    def drop_completed_checkpoints(self, workflow_id: str) -> Any:
        """The engine's call once a workflow's outcome is recorded (see
        ``_drop_completed``)."""
        return _drop_completed(cast("Datasource", self), workflow_id)

    def __init__(
        self, *, database_url: str, engine_kwargs: Dict[str, Any], engine: Any, schema: Optional[str],
        serializer: Serializer, sessionmaker: Any,
    ) -> None:
        from sqlalchemy.dialects import postgresql, sqlite

        self._sqlite = _is_sqlite(database_url)
        maker_class, _ = self._api()
        if sessionmaker is not None:
            if not isinstance(sessionmaker, maker_class):
                raise DBOSException(
                    "AsyncSQLAlchemyDatasource requires an async_sessionmaker"
                    if isinstance(self, AsyncSQLAlchemyDatasource)
                    else "SQLAlchemyDatasource requires a sqlalchemy.orm.sessionmaker"
                )
            if sessionmaker.kw.get("binds"):
                # A mapper's own bind outranks bind=engine: its writes would
                # commit apart from the checkpoint.
                raise DBOSException(
                    "A datasource sessionmaker must not set binds=: every statement in a datasource "
                    "transaction must use the datasource's engine so it commits atomically with the "
                    "step checkpoint"
                )
        if _classes.is_launched():
            raise DBOSException("Datasources must be created before DBOS.launch()")
        if engine is not None:
            logger.info("Initializing %s with custom engine", self._flavour)
        else:
            logger.info("Initializing DBOS %s with URL: %s", self._flavour, sa.make_url(database_url).render_as_string(hide_password=True))
        self._dialect: Any = sqlite if self._sqlite else postgresql
        self.schema: Optional[str] = None if self._sqlite else (schema or DEFAULT_SCHEMA)
        self.created_engine = engine is None
        self.engine: Any = engine if engine is not None else self._create_engine(database_url, engine_kwargs)
        self._outputs_table = _outputs_table(self.schema)
        # Pinned on this binding's own statements, so a caller engine's
        # schema_translate_map does not move the checkpoints.
        self._pin: Dict[str, Any] = {"schema_translate_map": {self.schema: self.schema}}
        # Not expired on commit: returned ORM objects outlive the session.
        self.sessionmaker: Any = sessionmaker if sessionmaker is not None else maker_class(expire_on_commit=False)
        self.serializer = serializer
        _datasources.append(self)  # type: ignore[arg-type]

    @classmethod
    def _made(
        cls, database_url: str, engine_kwargs: Optional[Dict[str, Any]], engine: Any, schema: Optional[str],
        serializer: Optional[Serializer], sessionmaker: Any,
    ) -> "_Base":
        _require_sqlalchemy(cls.__name__)
        return cls(
            database_url=database_url, engine_kwargs=engine_kwargs or {}, engine=engine, schema=schema,
            serializer=serializer or DBOSDefaultSerializer, sessionmaker=sessionmaker,
        )

    def _decorator(self, func: Optional[Callable[..., Any]], name: Optional[str], isolation_level: IsolationLevel) -> Any:
        options: DatasourceOptions = {"isolation_level": isolation_level}
        if name is not None:
            options["name"] = name
        if func is not None:
            return self._wrap(func, options)
        return lambda f: self._wrap(f, options)

    def _wrap(self, f: Callable[..., Any], options: DatasourceOptions) -> Callable[..., Any]:
        raise NotImplementedError

    def _api(self) -> Tuple[Any, Callable[..., Any]]:
        """The flavour's session factory class and engine constructor."""
        raise NotImplementedError

    def _create_engine(self, database_url: str, engine_kwargs: Dict[str, Any]) -> Any:
        _, create_engine = self._api()
        if not self._sqlite:
            return create_engine(_postgres_url(database_url), **engine_kwargs)
        from sqlalchemy import event

        url = sa.make_url(database_url)
        if url.drivername == "sqlite" and isinstance(self, AsyncSQLAlchemyDatasource):
            url = url.set(drivername="sqlite+aiosqlite")  # the sync driver cannot serve an async engine
        engine = create_engine(url, **_sqlite_engine_kwargs(engine_kwargs))
        # An async engine's connection events are its sync engine's.
        event.listen(getattr(engine, "sync_engine", engine), "connect", _sqlite_pragmas)
        return engine


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    # As DBOS Python does: writers serialize (BEGIN IMMEDIATE) and wait out
    # each other's locks rather than failing at once.
    dbapi_conn.isolation_level = "IMMEDIATE"
    dbapi_conn.execute("PRAGMA busy_timeout=30000")
    dbapi_conn.execute("PRAGMA foreign_keys=ON")


def _sqlite_engine_kwargs(engine_kwargs: Dict[str, Any]) -> Dict[str, Any]:
    # Postgres-only connect arguments a shared configuration may carry.
    kwargs = dict(engine_kwargs)
    if kwargs.get("connect_args"):
        kwargs["connect_args"] = {k: v for k, v in kwargs["connect_args"].items() if k not in ("application_name", "connect_timeout")}
    return kwargs


class SQLAlchemyDatasource(_Base):
    """Transactions on an application database with a sync SQLAlchemy
    engine (Postgres through psycopg 3, or SQLite), exactly once inside a
    workflow. Make one with ``SQLAlchemyDatasource.create(url)`` before
    ``DBOS.launch()``."""

    _session_var = _sync_session
    _flavour = "SyncDatasource"

    def _api(self) -> Tuple[Any, Callable[..., Any]]:
        from sqlalchemy.orm import sessionmaker

        return sessionmaker, sa.create_engine

    @staticmethod
    def create(
        database_url: str,
        engine_kwargs: Optional[Dict[str, Any]] = None,
        engine: "Optional[sa.Engine]" = None,
        schema: Optional[str] = None,
        serializer: Optional[Serializer] = None,
        sessionmaker: "Optional[sessionmaker[Any]]" = None,
        run_migrations: bool = True,
    ) -> "SQLAlchemyDatasource":
        ds = cast(SQLAlchemyDatasource, SQLAlchemyDatasource._made(database_url, engine_kwargs, engine, schema, serializer, sessionmaker))
        if run_migrations:
            ds.run_migrations()
        else:
            ds.verify_migrations()
        return ds

    @staticmethod
    def migrate(database_url: str, *, schema: Optional[str] = None, application_role: Optional[str] = None) -> None:
        """Create or migrate a data source's tables (with a role allowed to),
        and grant ``application_role`` what it needs to use them."""
        _migrate_database(database_url, schema, application_role)

    def run_migrations(self) -> None:
        with self.engine.begin() as conn:
            _migrate(conn, self.schema)

    def verify_migrations(self) -> None:
        with self.engine.connect() as conn:
            _verify_migrated(conn, self.schema)

    def sql_session(self) -> "Session":
        session = _sync_session.get()
        assert session is not None, "sql_session() must be called within a sync datasource transaction"
        return session

    def run_tx_step(self, ds_options: Optional[DatasourceOptions], func: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        if inspect.iscoroutinefunction(func):
            name = (ds_options or {}).get("name") or func.__qualname__
            raise DBOSException(f"Function {name} is a coroutine; use AsyncDatasource.run_tx_step_async instead")
        ctx = _current.get()
        return cast(R, drive(ctx.engine if ctx is not None else None, _transaction_op(self, ds_options, func, args, kwargs)))

    def _delete_checkpoints(self, workflow_id: str, start_step: int) -> None:
        """Delete a workflow's checkpoints from ``start_step`` on."""
        drive(None, _delete_op(self, workflow_id, start_step))

    @overload
    def transaction(self, func: Callable[..., R]) -> Callable[..., R]: ...

    @overload
    def transaction(
        self, func: None = None, *, name: Optional[str] = None, isolation_level: IsolationLevel = "SERIALIZABLE"
    ) -> Callable[[Callable[..., R]], Callable[..., R]]: ...

    def transaction(
        self, func: Optional[Callable[..., Any]] = None, *, name: Optional[str] = None, isolation_level: IsolationLevel = "SERIALIZABLE"
    ) -> Any:
        """Decorate a function: each call runs it in a transaction of this
        data source (``sql_session()`` inside it), exactly once in a workflow."""
        return self._decorator(func, name, isolation_level)

    def _wrap(self, f: Callable[..., Any], options: DatasourceOptions) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(f):
            raise DBOSException(f"SyncDatasource.transaction requires a non-coroutine function, but {f.__qualname__} is a coroutine")

        @functools.wraps(f)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return self.run_tx_step(options, f, *args, **kwargs)

        return wrapper


class AsyncSQLAlchemyDatasource(_Base):
    """The async twin of ``SQLAlchemyDatasource``: an ``AsyncEngine``
    (Postgres through psycopg 3's async mode, SQLite through aiosqlite) and
    coroutine transactions. Make one with
    ``await AsyncSQLAlchemyDatasource.create(url)`` before ``DBOS.launch()``."""

    _session_var = _async_session
    _flavour = "AsyncDatasource"

    def _api(self) -> Tuple[Any, Callable[..., Any]]:
        from sqlalchemy.ext.asyncio import async_sessionmaker, create_async_engine

        return async_sessionmaker, create_async_engine

    @staticmethod
    async def create(
        database_url: str,
        engine_kwargs: Optional[Dict[str, Any]] = None,
        engine: "Optional[AsyncEngine]" = None,
        schema: Optional[str] = None,
        serializer: Optional[Serializer] = None,
        sessionmaker: "Optional[async_sessionmaker[Any]]" = None,
        run_migrations: bool = True,
    ) -> "AsyncSQLAlchemyDatasource":
        made = AsyncSQLAlchemyDatasource._made(database_url, engine_kwargs, engine, schema, serializer, sessionmaker)
        ds = cast(AsyncSQLAlchemyDatasource, made)
        if run_migrations:
            await ds.run_migrations()
        else:
            await ds.verify_migrations()
        return ds

    @staticmethod
    async def migrate(database_url: str, *, schema: Optional[str] = None, application_role: Optional[str] = None) -> None:
        await asyncio.to_thread(_migrate_database, database_url, schema, application_role)

    async def run_migrations(self) -> None:
        async with self.engine.begin() as conn:
            await conn.run_sync(_migrate, self.schema)

    async def verify_migrations(self) -> None:
        async with self.engine.connect() as conn:
            await conn.run_sync(_verify_migrated, self.schema)

    def sql_session(self) -> "AsyncSession":
        session = _async_session.get()
        assert session is not None, "sql_session() must be called within an async datasource transaction"
        return session

    async def run_tx_step_async(
        self, ds_options: Optional[DatasourceOptions], func: Callable[..., Coroutine[Any, Any, R]], *args: Any, **kwargs: Any
    ) -> R:
        if not inspect.iscoroutinefunction(func):
            name = (ds_options or {}).get("name") or func.__qualname__
            raise DBOSException(f"Function {name} must be a coroutine function for AsyncDatasource")
        ctx = _current.get()
        return cast(R, await drive_async(ctx.engine if ctx is not None else None, _transaction_op(self, ds_options, func, args, kwargs)))

    async def _delete_checkpoints(self, workflow_id: str, start_step: int) -> None:
        await drive_async(None, _delete_op(self, workflow_id, start_step))

    @overload
    def transaction(self, func: Callable[..., Awaitable[R]]) -> Callable[..., Awaitable[R]]: ...

    @overload
    def transaction(
        self, func: None = None, *, name: Optional[str] = None, isolation_level: IsolationLevel = "SERIALIZABLE"
    ) -> Callable[[Callable[..., Awaitable[R]]], Callable[..., Awaitable[R]]]: ...

    def transaction(
        self, func: Optional[Callable[..., Any]] = None, *, name: Optional[str] = None, isolation_level: IsolationLevel = "SERIALIZABLE"
    ) -> Any:
        return self._decorator(func, name, isolation_level)

    def _wrap(self, f: Callable[..., Any], options: DatasourceOptions) -> Callable[..., Any]:
        if not inspect.iscoroutinefunction(f):
            raise DBOSException(f"AsyncDatasource.transaction requires a coroutine function, but {f.__qualname__} is not")

        @functools.wraps(f)
        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            return await self.run_tx_step_async(options, f, *args, **kwargs)

        return wrapper


# ---------------------------------------------------------------------------
# Rewind: the rewound steps' checkpoints go first (a checkpoint left behind
# would replay the old output instead of running the step again), and only
# for a workflow that has ended, whose checkpoints no run still needs.

def drop_before_rewind_op(engine: Engine, workflow_id: str, start_step: Optional[int]) -> "Op[None]":
    """Before a rewind (of a workflow that has ended): every data source's
    checkpoints of the steps from ``start_step`` on go (they would replay
    otherwise)."""
    start = 1 if start_step is None else start_step
    for ds in list(_datasources):
        yield Local(_delete_where_called, engine, ds, workflow_id, start)


def _delete_where_called(engine: Engine, ds: Datasource, workflow_id: str, start: int) -> Any:
    """A data source's deletes, for whichever driver runs the rewind: on an
    event loop an awaitable (the async driver awaits it, and a sync data
    source's blocking calls go to a thread), on a plain thread done here (an
    async data source's on the loop its connections belong to)."""
    on_loop = _running_loop() is not None
    if isinstance(ds, AsyncSQLAlchemyDatasource):
        if on_loop:
            return ds._delete_checkpoints(workflow_id, start)
        loop = engine.background_loop
        if loop is None:
            raise DBOSException("An async datasource cannot be rewound from sync code here; use the async rewind")
        return asyncio.run_coroutine_threadsafe(ds._delete_checkpoints(workflow_id, start), loop).result()
    if on_loop:
        return asyncio.to_thread(ds._delete_checkpoints, workflow_id, start)
    return ds._delete_checkpoints(workflow_id, start)


def _running_loop() -> Optional[asyncio.AbstractEventLoop]:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
