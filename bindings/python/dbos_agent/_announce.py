"""Late registration: workflow functions and queues declared after launch.

DBOS Python lets an application declare workflows, steps, queues and
scheduled workflows at any time, after ``DBOS.launch()`` too. The agent
learns a worker's functions and queues from its ``hello`` and, for those
declared later, from ``register`` (PROTOCOL.md, section 7). This module
sends those: a declaration after launch is announced on the live connection
before the declaration returns, so that a call right after it runs here.
Declarations made at once from several threads go out together, one
``register`` for all of them (a group commit).

Every ``hello`` announces everything declared so far, so a reconnection
needs nothing from here, except for one race: a declaration made after the
new connection's ``hello`` was built and before that connection was live
reaches neither. Each declaration takes a sequence number; a ``hello`` notes
the number it covers before it reads the registries, and once its connection
is live, what was declared after that number is sent with ``register`` on
it. (Registering a name twice is idempotent, so sending one too many is
harmless.)

A declaration that meets a lost connection is not an error: the connection
was live when it was sent, so the ``hello`` of the next one is built after
the loss, after the declaration, and carries it."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from typing import Any, Dict, List, Optional, Tuple

from . import _protocol as proto
from ._error import AgentErrorReply, DBOSAgentUnavailableError, DBOSException, map_agent_error
from ._transport import AgentLink, Connection

logger = logging.getLogger("dbos_agent")

#: How long a declaration waits for the agent's answer. It is answered
#: within milliseconds (a queue's row is one short transaction); past this
#: the agent is stuck, and the declaration says so rather than hang.
REGISTER_TIMEOUT_SEC = 30.0

#: The agent's bounds on one register (PROTOCOL.md section 16): a batch
#: never carries more, whatever was declared at once.
_MAX_WORKFLOWS_PER_REQUEST = 4096
_MAX_QUEUES_PER_REQUEST = 1000

# The catalog's code this module branches on.
_UNKNOWN_OP = 103


def workflow_form(name: str, max_recovery_attempts: Optional[int], class_name: Optional[str] = None) -> Dict[str, Any]:
    """A WorkflowRegistration as hello and register carry it."""
    form: Dict[str, Any] = {"name": name}
    if class_name:
        form["class_name"] = class_name
    if max_recovery_attempts is not None:
        form["max_recovery_attempts"] = max_recovery_attempts
    return form


_Key = Tuple[str, str]  # ("workflow" or "queue", name)


class _Declaration:
    """One declaration's registrations, and its outcome once sent."""

    __slots__ = ("workflows", "queues", "done", "error")

    def __init__(self, workflows: List[Dict[str, Any]], queues: List[Dict[str, Any]]):
        self.workflows = workflows
        self.queues = queues
        self.done = False
        self.error: Optional[BaseException] = None

    def forms(self) -> List[Tuple[_Key, Dict[str, Any]]]:
        return [(("workflow", w["name"]), w) for w in self.workflows] + [(("queue", q["name"]), q) for q in self.queues]


class Announcer:
    """Sends the declarations made after launch (see the module)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._link: Optional[AgentLink] = None
        self._seq = 0
        # The latest declaration of each name, with its number: connected()
        # sends those a hello may have missed. One entry per name, so that
        # a function that declares the same workflow at every call keeps
        # this from growing.
        self._declared: Dict[_Key, Tuple[int, Dict[str, Any]]] = {}
        # What the latest hello covered (noted by hello_begins, read by
        # connected: one connection is opened at a time).
        self._hello_seq = 0
        # What the agent acknowledged on _sent_conn: declaring it again, in
        # the same form, sends nothing.
        self._sent_conn: Optional[Connection] = None
        self._sent: Dict[_Key, Dict[str, Any]] = {}
        # The group commit: declarations waiting for the next register, and
        # whether one is being sent.
        self._batch: List[_Declaration] = []
        self._sending = False

    def attach(self, link: AgentLink) -> None:
        """Send declarations on link's connections from now on (launch)."""
        with self._cond:
            self._link = link

    def detach(self) -> None:
        """Stop announcing (destroy): the next launch's hello carries all."""
        with self._cond:
            self._link = None
            self._declared.clear()
            self._sent_conn = None
            self._sent.clear()

    def forget_queue(self, name: str) -> None:
        """A deleted queue: the agent no longer serves it for this process,
        so declaring it again must be sent, not taken as already known."""
        with self._cond:
            self._sent.pop(("queue", name), None)
            self._declared.pop(("queue", name), None)

    def hello_begins(self) -> None:
        """A hello is being built: note what it covers. Called before the
        registries are read, so that a declaration numbered up to this is
        in them (a declaration updates the registry, then takes its
        number)."""
        with self._cond:
            self._hello_seq = self._seq

    def connected(self, conn: Connection) -> None:
        """conn is live: send on it what its hello may have missed."""
        with self._cond:
            covered = self._hello_seq
            missed = {k: f for k, (seq, f) in self._declared.items() if seq > covered}
            # Any later hello is built after this one: it covers the rest.
            self._declared = {k: v for k, v in self._declared.items() if v[0] > covered}
        if not missed:
            return
        try:
            _send_on(conn, [f for (kind, _), f in missed.items() if kind == "workflow"],
                     [f for (kind, _), f in missed.items() if kind == "queue"])
        except DBOSAgentUnavailableError:
            return  # lost again: the next hello carries them
        except BaseException as e:
            logger.error("dbos-agent: could not register %d declarations made while reconnecting: %s", len(missed), e)
            return
        self._acknowledged(conn, list(missed.items()))

    def announce(
        self, workflows: Optional[List[Dict[str, Any]]] = None, queues: Optional[List[Dict[str, Any]]] = None
    ) -> None:
        """Register these with the agent now if this process is launched
        (else its launch's hello carries them). Call it after the registry
        holds them (see hello_begins). Raises what the agent refuses: a
        registration that breaks its rules, a bound reached."""
        mine = _Declaration(list(workflows or ()), list(queues or ()))
        with self._cond:
            link = self._link
            if link is None:
                return
            self._seq += 1
            for key, form in mine.forms():
                self._declared[key] = (self._seq, form)
            conn = link.current()
            if conn is not None and conn is self._sent_conn and all(self._sent.get(k) == f for k, f in mine.forms()):
                return  # declared again as before: the agent has it
            self._batch.append(mine)
            batch: Optional[List[_Declaration]] = None
            while not mine.done:
                if not self._sending:
                    # Lead the next register: everything that waits goes in it.
                    self._sending = True
                    batch, self._batch = self._batch, []
                    break
                self._cond.wait()
        if batch is not None:
            try:
                self._send_batch(link, batch)
            finally:
                with self._cond:
                    for d in batch:
                        d.done = True
                    self._sending = False
                    self._cond.notify_all()
        if mine.error is not None:
            raise mine.error

    def _acknowledged(self, conn: Connection, forms: List[Tuple[_Key, Dict[str, Any]]]) -> None:
        with self._cond:
            if conn is not self._sent_conn:
                self._sent_conn, self._sent = conn, {}
            self._sent.update(forms)

    def _send_batch(self, link: AgentLink, batch: List[_Declaration]) -> None:
        conn = link.current()
        if conn is None:
            # Between connections: the next one's hello, or connected(),
            # carries these.
            return
        if len(batch) > 1:
            workflows = _merge([w for d in batch for w in d.workflows])
            queues = _merge([q for d in batch for q in d.queues])
            if len(workflows) <= _MAX_WORKFLOWS_PER_REQUEST and len(queues) <= _MAX_QUEUES_PER_REQUEST:
                try:
                    _send_on(conn, workflows, queues)
                    self._acknowledged(conn, [kf for d in batch for kf in d.forms()])
                    return
                except DBOSAgentUnavailableError:
                    return  # the next hello carries them (see the module)
                except DBOSException:
                    pass  # the agent refused one of them: each alone says which
        for d in batch:
            try:
                _send_on(conn, _merge(d.workflows), _merge(d.queues))
                self._acknowledged(conn, d.forms())
            except DBOSAgentUnavailableError:
                return
            except BaseException as err:
                d.error = err


def _merge(forms: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """One registration per name, the latest declared (a request names
    each once)."""
    by_name: Dict[str, Dict[str, Any]] = {}
    for f in forms:
        by_name.pop(f["name"], None)
        by_name[f["name"]] = f
    return list(by_name.values())


def _send_on(conn: Connection, workflows: List[Dict[str, Any]], queues: List[Dict[str, Any]]) -> None:
    body: Dict[str, Any] = {}
    if workflows:
        body["workflows"] = workflows
    if queues:
        body["queues"] = queues
    if not body:
        return
    try:
        _request(conn, proto.OP_REGISTER, body)
    except AgentErrorReply as e:
        if e.code != _UNKNOWN_OP:
            raise map_agent_error(e) from None
        # An agent older than register takes late queues, not workflows.
        if workflows:
            raise DBOSException(
                "this dbos-agent predates late registration (register): declare workflows before "
                "DBOS.launch(), or upgrade the agent"
            ) from None
        try:
            _request(conn, proto.OP_REGISTER_QUEUES, {"queues": queues})
        except AgentErrorReply as e2:
            raise map_agent_error(e2) from None


def _request(conn: Connection, op: str, body: Dict[str, Any]) -> None:
    fut = conn.request(op, body)
    try:
        fut.result(REGISTER_TIMEOUT_SEC)
    except concurrent.futures.TimeoutError:
        fut.cancel()
        raise DBOSException(f"{op}: the dbos-agent did not answer within {REGISTER_TIMEOUT_SEC:g}s") from None


#: The process's announcer: the registries it announces are the process's.
announcer = Announcer()
