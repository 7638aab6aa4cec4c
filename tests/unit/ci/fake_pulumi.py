"""A stand-in `pulumi` executable for the workflow-step tests: put on PATH as `pulumi` by
`install_fake_pulumi`, it records each call and answers as the scenario in $FAKE_PULUMI_SCENARIO says.

As strict as the real CLI where the steps depend on it:
- `login` accepts only `azblob://<container>?storage_account=<name>` (or AZURE_STORAGE_ACCOUNT set) and
  `https://api.pulumi.com` with PULUMI_ACCESS_TOKEN set ("PULUMI_ACCESS_TOKEN must be set for login
  during non-interactive CLI sessions"); the login is kept in $PULUMI_HOME/credentials.json, and
  `preview`, `up` and `stack output` refuse to run without one (exit 255, as the CLI exits on error);
- `--policy-pack DIR` must name a folder holding PulumiPolicy.yaml;
- a mandatory policy violation prints the engine's "Policies:" report and ends with
  "error: preview failed" / "error: update failed" and exit code 255, as the CLI does.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

VIOLATION_REPORT = """Policies:
    ❌ claimcheck@v0.0.1 (local: infra/policy)
        - [mandatory]  functions-no-secrets-in-app-settings  (azure-native:web:WebApp: app)
          An app setting holds a secret.
"""


def fail(message: str) -> None:
    sys.stderr.write(f"error: {message}\n")
    raise SystemExit(255)


def main() -> None:
    argv = sys.argv[1:]
    home = Path(os.environ["PULUMI_HOME"])
    scenario = json.loads(os.environ.get("FAKE_PULUMI_SCENARIO", "{}"))
    with (home / "calls.jsonl").open("a", encoding="utf-8") as calls:
        calls.write(json.dumps(argv) + "\n")
    command = argv[0] if argv else ""
    credentials = home / "credentials.json"
    if command == "login":
        url = argv[1] if len(argv) > 1 else ""
        if url.startswith("azblob://"):
            if "storage_account=" not in url and not os.environ.get("AZURE_STORAGE_ACCOUNT"):
                fail("azblob:// needs storage_account=<name> or AZURE_STORAGE_ACCOUNT")
        elif url == "https://api.pulumi.com":
            if not os.environ.get("PULUMI_ACCESS_TOKEN"):
                fail("PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI sessions")
        else:
            fail(f"unsupported backend {url!r}")
        credentials.write_text(json.dumps({"current": url}), encoding="utf-8")
        print(f"Logged in to {url}")
        return
    if command in ("preview", "up", "stack") and not credentials.exists():
        fail("no current backend: run `pulumi login` first")
    if "--policy-pack" in argv:
        pack = Path(argv[argv.index("--policy-pack") + 1])
        if not (pack / "PulumiPolicy.yaml").is_file():
            fail(f"{pack} is not a policy pack (no PulumiPolicy.yaml)")
    answer = scenario.get(command, {})
    if command == "stack" and argv[1:2] == ["output"]:
        print(json.dumps(scenario.get("outputs", {})))
        return
    print(answer.get("output", f"fake pulumi {command}: ok"))
    if answer.get("violation"):
        print(VIOLATION_REPORT)
        fail(f"{'preview' if command == 'preview' else 'update'} failed")
    raise SystemExit(int(answer.get("exit", 0)))


if __name__ == "__main__":
    main()
