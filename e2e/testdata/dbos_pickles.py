"""Official DBOS Python writing pickled values, for e2e/cli_values_test.go.

    dbos_pickles.py DATABASE_URL SCHEMA

runs, on that system database and schema, a workflow whose step returns a
dict and which returns a tuple ("pickled-ok"), and one that raises
ValueError ("pickled-error"), with DBOS Python's default serializer (py_pickle).
"""

import sys

from dbos import DBOS, SetWorkflowID


def main() -> None:
    url, schema = sys.argv[1], sys.argv[2]
    DBOS(config={"name": "cli-values", "system_database_url": url, "dbos_system_schema": schema})

    @DBOS.step()
    def price(sku: str) -> dict:
        return {"sku": sku, "cents": 1250, "tags": ["new", None], "in_stock": True}

    @DBOS.workflow()
    def order(sku: str, quantity: int) -> tuple:
        p = price(sku)
        return (p["cents"] * quantity, "EUR")

    @DBOS.workflow()
    def fail(reason: str) -> None:
        raise ValueError(reason)

    DBOS.launch()
    try:
        with SetWorkflowID("pickled-ok"):
            print(order("A-1", 3))
        with SetWorkflowID("pickled-error"):
            try:
                fail("out of stock")
            except ValueError:
                pass
    finally:
        DBOS.destroy()


if __name__ == "__main__":
    main()
