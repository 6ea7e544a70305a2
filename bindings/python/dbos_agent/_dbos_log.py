"""The debug lines DBOS Python writes on its logger "dbos" as a workflow
runs or replays its operations ("Running step, id: 3, name: charge",
"Replaying recv, id: 4, topic: ..."), in its words, so code and tests that
read DBOS's debug log find them here too."""

from __future__ import annotations

import logging

dbos_logger = logging.getLogger("dbos")


def operation(replaying: bool, what: str, function_id: int, detail: str) -> None:
    """An operation of workflow code at ``function_id``: run anew, or
    replayed from the recorded history."""
    if dbos_logger.isEnabledFor(logging.DEBUG):
        dbos_logger.debug(f"{'Replaying' if replaying else 'Running'} {what}, id: {function_id}, {detail}")
