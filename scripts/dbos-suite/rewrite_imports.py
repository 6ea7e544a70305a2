"""Point DBOS Python's tests at dbos_agent by rewriting their imports, and only those.

A name DBOS exports publicly comes from ``dbos_agent`` instead of ``dbos``:

- ``from dbos import X`` where X has no leading underscore (``error`` included);
- ``from dbos.<module> import X`` where the object is one DBOS also exports publicly
  (``dbos._dbos.WorkflowHandle`` is ``dbos.WorkflowHandle``), or the module is DBOS's public
  error module (``dbos._error`` is ``dbos.error``).

Everything else (``dbos._sys_db``, ``from dbos import _workflow_commands``,
``dbos._schemas...``) keeps pointing at the real ``dbos`` package: that is the tests' own
harness reaching into DBOS's internals, not the API under test.

A mixed statement is split in two. The replacement statements are written on the line of the
original and padded with blank lines to its length, so every other line of DBOS's files keeps
its text and its number (tracebacks point at the original source).

A public name dbos_agent lacks is bound to a placeholder that raises ImportError when used,
instead of failing the import: otherwise one absent name in conftest.py or at the top of a
file would fail every test in it, and the measure would say nothing about the tests that never
use that name.

Usage: python rewrite_imports.py DIR  (rewrites every .py under DIR in place; prints a summary)
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import Dict, List, Optional, Tuple

import dbos
import dbos_agent

ABSENT_MODULE = "dbos_suite_absent"

_MISSING = object()

# Private names that are process state rather than DBOS's machinery, mapped to
# the binding's same state: which DBOS instance this process runs (a helper module
# of the tests, client_collateral.py, registers its queues only once DBOS is
# launched; read from the real dbos it would always say "not launched").
# DBOS's private construction token for Queue (its own path for a queue read from or
# registered in the database, which DBOS's tests take to build a queue value object) is
# mapped to the binding's token, the one its Queue accepts for that path.
PROCESS_STATE = {
    ("dbos._dbos", "_dbos_global_instance"): "_dbos._dbos_global_instance",
    ("dbos._queue", "_INTERNAL_QUEUE_CONSTRUCTION"): "_queue._INTERNAL_QUEUE_CONSTRUCTION",
}


class Rewriter:
    def __init__(self) -> None:
        self.to_agent: Counter[str] = Counter()
        self.absent: Counter[str] = Counter()
        self.kept: Counter[str] = Counter()

    def _public_source(self, module: str, name: str) -> Optional[str]:
        """The dbos_agent attribute path a ``from <module> import <name>`` maps to, or None
        when the import stays on dbos."""
        if (module, name) in PROCESS_STATE:
            return PROCESS_STATE[(module, name)]
        if name.startswith("_"):
            return None
        if module == "dbos":
            return name
        try:
            mod = importlib.import_module(module)
        except ImportError:
            return None
        if mod is dbos.error:
            return "error." + name
        obj = getattr(mod, name, _MISSING)
        if obj is _MISSING:
            return None
        if isinstance(obj, ModuleType) and obj is getattr(dbos, name, None):
            return name
        if getattr(dbos, name, _MISSING) is obj:
            return name
        return None

    def _agent_import(self, path: str, asname: str) -> Optional[Tuple[str, str]]:
        """The dbos_agent module and the alias clause importing its ``path`` as ``asname``,
        or None when dbos_agent does not have it."""
        owner: object = dbos_agent
        *parents, leaf = path.split(".")
        for p in parents:
            owner = getattr(owner, p, None)
            if not isinstance(owner, ModuleType):
                return None
        if getattr(owner, leaf, _MISSING) is _MISSING:
            return None
        assert isinstance(owner, ModuleType)
        alias = leaf if asname == leaf else f"{leaf} as {asname}"
        return owner.__name__, alias

    def statements(self, node: ast.ImportFrom) -> Optional[List[str]]:
        """The statements replacing ``node``, or None to leave it as it is."""
        module = node.module or ""
        if node.level != 0 or not (module == "dbos" or module.startswith("dbos.")):
            return None
        kept: List[ast.alias] = []
        agent: Dict[str, List[str]] = {}
        absent: List[str] = []
        for alias in node.names:
            asname = alias.asname or alias.name
            path = None if alias.name == "*" else self._public_source(module, alias.name)
            if path is None:
                kept.append(alias)
                self.kept[f"{module}.{alias.name}"] += 1
                continue
            found = self._agent_import(path, asname)
            if found is None:
                absent.append(f"{asname} = _dbos_suite_absent({path!r})")
                self.absent[path] += 1
            else:
                agent.setdefault(found[0], []).append(found[1])
                self.to_agent[path] += 1
        if not agent and not absent:
            return None
        out: List[str] = []
        if kept:
            names = ", ".join(a.name if a.asname is None else f"{a.name} as {a.asname}" for a in kept)
            out.append(f"from {module} import {names}")
        out += [f"from {mod} import {', '.join(aliases)}" for mod, aliases in agent.items()]
        if absent:
            out.append(f"from {ABSENT_MODULE} import absent as _dbos_suite_absent")
            out += absent
        return out

    def rewrite(self, source: str) -> Tuple[str, int]:
        tree = ast.parse(source)
        lines = source.splitlines(keepends=True)
        edits: List[Tuple[ast.ImportFrom, List[str]]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                stmts = self.statements(node)
                if stmts is not None:
                    edits.append((node, stmts))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "dbos" or (alias.name.startswith("dbos.") and not alias.name.startswith("dbos._")):
                        # None in DBOS 3.4's tests; say so if a later release adds one.
                        print(f"rewrite: left `import {alias.name}` (line {node.lineno}) unchanged", file=sys.stderr)
        # Bottom-up, so earlier positions stay valid.
        for node, stmts in sorted(edits, key=lambda e: e[0].lineno, reverse=True):
            first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
            head, tail = lines[first][: node.col_offset], lines[last][node.end_col_offset or 0 :]
            if head.strip() or tail.strip():
                raise SystemExit(f"rewrite: an import shares its line with other code (line {node.lineno})")
            newline = "\n" if lines[last].endswith("\n") else ""
            replacement = [head + "; ".join(stmts) + newline] + ["\n"] * (last - first)
            lines[first : last + 1] = replacement
        return "".join(lines), len(edits)


def main() -> None:
    root = Path(sys.argv[1])
    rw = Rewriter()
    files = 0
    for path in sorted(root.rglob("*.py")):
        text, n = rw.rewrite(path.read_text())
        if n:
            path.write_text(text)
            files += 1
    print(f"rewrite: {files} files, {sum(rw.to_agent.values())} imports of public names now from dbos_agent")
    if rw.absent:
        listed = ", ".join(f"{k} ({v})" for k, v in sorted(rw.absent.items()))
        print(f"rewrite: public names dbos_agent lacks (a placeholder raises ImportError on use): {listed}")


if __name__ == "__main__":
    main()
