"""An official DBOS Python process (the `dbos` package, not this binding)
that runs the workflows of tests/class_defs.py, imported with the official
package, under the workflow ids ID_PREFIX-<call>, on the agent's system
database, then exits: the test compares the rows it writes with the
binding's for the same calls. Settings from the environment:
APP_DATABASE_URL, APP_SCHEMA, APP_NAME, APP_VERSION, ID_PREFIX (the executor
id is DBOS__VMID)."""

import os
import sys

os.environ["CLASS_DEFS_SDK"] = "dbos"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from dbos import DBOS  # noqa: E402

from class_defs import Warehouse, compared_calls  # noqa: E402
from official_env import official_config  # noqa: E402

if __name__ == "__main__":
    DBOS(config=official_config())
    north = Warehouse("north", 10)
    DBOS.launch()
    compared_calls(os.environ["ID_PREFIX"], north)
    print("done", flush=True)
    DBOS.destroy()
