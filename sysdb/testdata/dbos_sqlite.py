"""DBOS Python 3.4 on a SQLite system database, for sysdb/sqlite_parity_test.go.

    dbos_sqlite.py migrate PATH[:VERSION]...  DBOS's own migrations on each PATH,
                                              stopping after VERSION when given
    dbos_sqlite.py workflow PATH              launch DBOS on PATH and run a workflow
                                              with a step and an event; prints
                                              "<result> <event> <status>"
"""

import sys

import dbos._sys_db_sqlite as sys_db_sqlite
from dbos import DBOS

ALL_MIGRATIONS = list(sys_db_sqlite.sqlite_migrations)


def migrate(target: str) -> None:
    path, _, version = target.rpartition(":")
    if not path or not version.isdigit():
        path, version = target, ""
    # DBOS numbers its SQLite migrations by their place in this list and
    # records its length once all are applied: truncating it stops there.
    sys_db_sqlite.sqlite_migrations = (
        ALL_MIGRATIONS[: int(version)] if version else ALL_MIGRATIONS
    )
    DBOS.migrate(f"sqlite:///{path}")


def workflow(path: str) -> None:
    DBOS(config={"name": "sqlite-parity", "system_database_url": f"sqlite:///{path}"})

    @DBOS.step()
    def double(x: int) -> int:
        return 2 * x

    @DBOS.workflow()
    def work(x: int) -> int:
        y = double(x)
        DBOS.set_event("doubled", y)
        return y + 1

    DBOS.launch()
    try:
        handle = DBOS.start_workflow(work, 20)
        result = handle.get_result()
        event = DBOS.get_event(handle.workflow_id, "doubled", timeout_seconds=0)
        status = handle.get_status().status
        print(f"{result} {event} {status}")
    finally:
        DBOS.destroy()


def main() -> None:
    if len(sys.argv) >= 3 and sys.argv[1] == "migrate":
        for target in sys.argv[2:]:
            migrate(target)
    elif len(sys.argv) == 3 and sys.argv[1] == "workflow":
        workflow(sys.argv[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
