"""Summarize a DBOS-suite run from pytest's JUnit XML: passed / failed / errored / skipped per
file and in total, the fraction passed with and without the files that cannot run through an
agent by nature, and the failures grouped by the first line of their exception message.

Usage: python summarize.py OUT_DIR LABEL JUNIT.xml...  (writes OUT_DIR/report.md and report.json)

With DBOS_SUITE_BASELINE naming an earlier report.json (default: baseline.json beside this
file), it also lists the tests whose outcome changed since, among those both runs ran.
"""

from __future__ import annotations

import json
import os
import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Dict, List, Tuple

# Files of DBOS's suite that test something other than the public API an application uses,
# or need what this machine lacks. They run, but are counted apart.
EXCLUDED: Dict[str, str] = {
    "test_kafka.py": "needs a Kafka broker (and confluent-kafka); DBOS's Kafka consumer",
    "test_cockroachdb.py": "needs a CockroachDB server",
    "test_pdm_build.py": "tests DBOS's build backend (pdm_build.py of its source tree)",
    "test_package.py": "builds and installs DBOS's wheel, runs its CLI and app templates",
    "test_cli.py": "DBOS's command-line tool and its project templates (dbos.cli)",
    "test_schema_migration.py": "DBOS's own system-database migrations and schema handling",
    "test_sqlite_threading.py": "DBOS's SQLite system-database engine internals",
    "test_db_retry.py": "DBOS's SystemDatabase retry decorator and pool internals",
    "test_outcome.py": "DBOS's internal Outcome monad (dbos._outcome)",
    "test_enterprise.py": "the seam to dbos-enterprise and its Conductor entitlement check",
    "test_auto_upgrade.py": "dbos-enterprise's auto-upgrade wiring inside DBOS's launch",
}

_OUTCOMES = ("passed", "failed", "errored", "skipped")


def _file_of(case: ET.Element) -> str:
    if case.get("file"):
        return Path(case.get("file", "").strip()).name
    classname = (case.get("classname") or "").strip()
    name = (case.get("name") or "").strip()
    parts = classname.split(".") if classname else name.split(".")
    for p in parts:
        if p.startswith("test_"):
            return p + ".py"
    return (parts[-1] if parts else "?") + ".py"


_SETUP = re.compile(r'^failed on (?:setup|teardown) with "(.*)"?$', re.S)
_DECLARED = re.compile(r"^(.*?)\b(workflow|step|queue) (\S+) was declared after DBOS\.launch\(\)")
_NOISE = [
    (re.compile(r"/\S*/dbos-suite-\w+/"), "<socket dir>/"),
    (re.compile(r"0x[0-9a-f]+"), "0x…"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"\d+\.\d+s\b"), "<t>s"),
]


def cause(message: str) -> str:
    """The failure's group: the first line of its exception message, less what varies by test."""
    msg = message.strip()
    m = _SETUP.match(msg)
    if m:
        msg = m.group(1).rstrip('"')
    line = msg.splitlines()[0].strip() if msg else "(no message)"
    m = _DECLARED.match(line)
    if m:
        return f"{m.group(1)}{m.group(2)} <name> was declared after DBOS.launch()"
    for pattern, repl in _NOISE:
        line = pattern.sub(repl, line)
    return line[:160]


def read(junit: Path) -> List[Tuple[str, str, str, str]]:
    """(file, test, outcome, message) of every test case."""
    rows = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome, message = "passed", ""
        for child in case:
            if child.tag == "failure":
                outcome, message = "failed", child.get("message") or (child.text or "")
            elif child.tag == "error" and outcome != "failed":
                outcome, message = "errored", child.get("message") or (child.text or "")
            elif child.tag == "skipped" and outcome == "passed":
                outcome, message = "skipped", child.get("message") or ""
        rows.append((_file_of(case), (case.get("name") or "").strip(), outcome, message))
    return rows


def _fraction(counts: Counter[str]) -> str:
    total = sum(counts[o] for o in _OUTCOMES)
    ran = total - counts["skipped"]
    if not total:
        return "no tests"
    return f"{counts['passed']}/{total} = {100.0 * counts['passed'] / total:.1f}% (of those not skipped: {counts['passed']}/{ran})"


def compare(before: Dict[str, Any], after: Dict[str, str]) -> List[str]:
    """The report's section on what changed since ``before`` (an earlier report.json)."""
    was: Dict[str, str] = before.get("outcomes", {})
    both = sorted(set(was) & set(after))
    gained = [t for t in both if after[t] == "passed" and was[t] != "passed"]
    lost = [t for t in both if was[t] == "passed" and after[t] != "passed"]
    out = [
        f"## Since {before.get('label') or 'the baseline'}",
        "",
        f"- of {len(both)} tests both runs ran: {len(gained)} pass now that did not, "
        f"{len(lost)} no longer pass",
    ]
    if lost:
        out += ["", "No longer passing:", ""] + [f"- {t} ({after[t]})" for t in lost]
    return out


def main() -> None:
    out_dir, label = Path(sys.argv[1]), sys.argv[2]
    rows = [row for junit in sys.argv[3:] for row in read(Path(junit))]
    per_file: Dict[str, Counter[str]] = defaultdict(Counter)
    causes: Counter[str] = Counter()
    cause_files: Dict[str, Counter[str]] = defaultdict(Counter)
    for file, _, outcome, message in rows:
        per_file[file][outcome] += 1
        if outcome in ("failed", "errored") and file not in EXCLUDED:
            c = cause(message)
            causes[c] += 1
            cause_files[c][file] += 1
    api: Counter[str] = Counter()
    excluded: Counter[str] = Counter()
    for file, counts in per_file.items():
        (excluded if file in EXCLUDED else api).update(counts)
    everything = api + excluded
    for o in _OUTCOMES:  # Counter addition drops zeros; keep the keys
        everything.setdefault(o, 0)

    lines = [f"# DBOS Python 3.4 suite through dbos-agent{': ' + label if label else ''}", ""]
    lines += [
        f"- public-API files: {_fraction(api)}",
        f"- all files: {_fraction(everything)}",
        "",
        "| file | passed | failed | errored | skipped | total |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for file in sorted(per_file):
        c = per_file[file]
        mark = " (excluded)" if file in EXCLUDED else ""
        lines.append(f"| {file}{mark} | " + " | ".join(str(c[o]) for o in _OUTCOMES) + f" | {sum(c.values())} |")
    for name, c in (("public-API total", api), ("excluded total", excluded), ("total", everything)):
        lines.append(f"| **{name}** | " + " | ".join(str(c[o]) for o in _OUTCOMES) + f" | {sum(c.values())} |")
    lines += ["", "## Excluded files (run, counted apart)", ""]
    lines += [f"- {f}: {why}" for f, why in EXCLUDED.items()]
    lines += ["", "## Top failure causes (public-API files; first line of the message)", ""]
    lines += ["| tests | cause | files |", "|---:|---|---|"]
    for c, n in causes.most_common(40):
        files = ", ".join(f"{f} {k}" for f, k in cause_files[c].most_common(4))
        lines.append(f"| {n} | `{c.replace('|', '/')}` | {files} |")
    outcomes = {f"{file}::{test}": outcome for file, test, outcome, _ in rows}
    baseline = Path(os.environ.get("DBOS_SUITE_BASELINE") or Path(__file__).with_name("baseline.json"))
    if baseline.is_file():
        lines += ["", *compare(json.loads(baseline.read_text()), outcomes)]
    report = "\n".join(lines) + "\n"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "report.md").write_text(report)
    data: Dict[str, Any] = {
        "label": label,
        "public_api": dict(api),
        "excluded": dict(excluded),
        "total": dict(everything),
        "per_file": {f: dict(c) for f, c in sorted(per_file.items())},
        "excluded_files": EXCLUDED,
        "causes": [{"tests": n, "cause": c, "files": dict(cause_files[c])} for c, n in causes.most_common()],
        "passed_tests": sorted(t for t, o in outcomes.items() if o == "passed"),
        "outcomes": outcomes,
    }
    (out_dir / "report.json").write_text(json.dumps(data, indent=2) + "\n")
    print(report)


if __name__ == "__main__":
    main()
