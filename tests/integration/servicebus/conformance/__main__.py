"""``python -m tests.integration.servicebus.conformance``: the conformance steps against the
emulator and, when ``SERVICEBUS_CONFORMANCE_CONNECTION_STRING`` is set, against that namespace too,
printed side by side (one line per step: passed, failed or skipped on each target).

Exit status 1 when a step fails on either target, or passes on one and fails on the other.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from xml.etree import ElementTree

from tests.integration.servicebus.conformance.conftest import CONNECTION_VARIABLE

STEPS = Path(__file__).parent  # test_steps.py (Python SDK) and test_js_steps.py (JavaScript SDK)


def run(target: str, environment: dict[str, str], report: Path) -> dict[str, str]:
    """Run the steps once; each step's outcome by name, from pytest's JUnit report."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        str(STEPS),
        "-q",
        "-p",
        "no:cacheprovider",
        f"--junitxml={report}",
    ]
    print(f"-- {target}", flush=True)
    subprocess.run(command, env=environment, check=False)
    outcomes: dict[str, str] = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):  # noqa: S314 - pytest's own report
        if case.find("skipped") is not None:
            outcome = "skipped"
        elif case.find("failure") is not None or case.find("error") is not None:
            outcome = "FAILED"
        else:
            outcome = "passed"
        outcomes[case.get("name", "?").removeprefix("test_")] = outcome
    return outcomes


def side_by_side(results: dict[str, dict[str, str]]) -> tuple[list[str], int]:
    """One line per step with its outcome on each target, marking those that differ; and how many do."""
    targets = list(results)
    steps = sorted({step for outcomes in results.values() for step in outcomes})
    width = max((len(step) for step in steps), default=4)
    lines = [(f"{'step':<{width}}  " + "  ".join(f"{target:<8}" for target in targets)).rstrip()]
    differing = 0
    for step in steps:
        row = [results[target].get(step, "missing") for target in targets]
        marker = "  <- differs" if len(set(row)) > 1 else ""
        differing += bool(marker)
        lines.append((f"{step:<{width}}  " + "  ".join(f"{outcome:<8}" for outcome in row)).rstrip() + marker)
    return lines, differing


def main() -> int:
    remote = os.environ.get(CONNECTION_VARIABLE, "").strip()
    local = {key: value for key, value in os.environ.items() if key != CONNECTION_VARIABLE}
    with tempfile.TemporaryDirectory() as work:
        results = {"emulator": run("emulator", local, Path(work, "emulator.xml"))}
        if remote:
            results["remote"] = run(
                "remote (SERVICEBUS_CONFORMANCE_CONNECTION_STRING)",
                dict(os.environ),
                Path(work, "remote.xml"),
            )
    lines, differing = side_by_side(results)
    print("\n" + "\n".join(lines))
    failed = any(outcome == "FAILED" for outcomes in results.values() for outcome in outcomes.values())
    if not remote:
        print(f"\n(set {CONNECTION_VARIABLE} to run the same steps against a namespace of yours)")
    return 1 if failed or differing else 0


if __name__ == "__main__":
    sys.exit(main())
