"""Runs workflows with opentelemetry unimportable (an import of it fails),
as for an application installed without it: OTLP is off by default, so
nothing on the workflow execution path may need it. Prints "OK" and the
opentelemetry modules loaded (none expected). The agent's socket comes from
env DBOS_AGENT_SOCKET."""

import sys
from typing import Any, Optional, Sequence


class _BlockOtel:
    """Makes any opentelemetry import fail, as if it were not installed."""

    def find_spec(self, name: str, path: Optional[Sequence[str]] = None, target: Any = None) -> None:
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)")
        return None


def main() -> None:
    sys.meta_path.insert(0, _BlockOtel())
    from dbos_agent import DBOS, PropagateOtelContext, Queue, SetWorkflowAttributes

    DBOS(config={"name": "otel-absent-test", "enable_otlp": False})

    @DBOS.step()
    def a_step() -> str:
        return "stepped"

    @DBOS.workflow()
    def a_workflow() -> str:
        return a_step()

    queue = Queue("otel_absent_queue")
    DBOS.launch()
    assert DBOS.start_workflow(a_workflow).get_result() == "stepped"
    assert queue.enqueue(a_workflow).get_result() == "stepped"
    # A carrier written by a process that has opentelemetry.
    carrier = {"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"}
    with SetWorkflowAttributes({"dbos.otelContext": carrier}):
        assert queue.enqueue(a_workflow).get_result() == "stepped"
    with PropagateOtelContext():
        assert a_workflow() == "stepped"
    DBOS.destroy()
    print("OK", [m for m in sys.modules if m.startswith("opentelemetry")], flush=True)


if __name__ == "__main__":
    main()
