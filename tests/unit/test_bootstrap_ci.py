"""scripts/bootstrap_ci.py: the CI identities' federated credentials and roles, printed or applied."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from scripts import bootstrap_ci

SUBSCRIPTION = "11111111-2222-4333-8444-555555555555"


def test_printed_script_federates_without_secrets(capsys: pytest.CaptureFixture[str]) -> None:
    """The preview identity trusts pull requests and reads; the deploy identity trusts the stacks'
    environments and may deploy; no command creates a client secret."""
    assert bootstrap_ci.main(["--repo", "my-org/claim-check", "--subscription", SUBSCRIPTION]) == 0
    out = capsys.readouterr().out
    preview, deploy = out.split("# claimcheck-ci-deploy")
    credentials = [
        json.loads(line.split("--parameters ", 1)[1].strip("'"))
        for line in out.splitlines()
        if "federated-credential create" in line
    ]
    assert {c["subject"] for c in credentials} == {
        "repo:my-org/claim-check:pull_request",
        "repo:my-org/claim-check:environment:dev",
        "repo:my-org/claim-check:environment:prod",
    }
    assert {c["issuer"] for c in credentials} == {"https://token.actions.githubusercontent.com"}
    assert {tuple(c["audiences"]) for c in credentials} == {("api://AzureADTokenExchange",)}
    assert "--role Reader" in preview
    assert "Contributor" not in preview
    assert "--role Contributor" in deploy
    assert "'User Access Administrator'" in deploy
    assert "secret" not in out.lower().replace("no secret", "")
    assert "permission" not in preview
    assert (
        "--api-permissions 18a4783c-866b-4cc7-a460-3d5e5662c884=Role "
        "06b708a9-e830-4db3-a914-8e69da51d44f=Role"
    ) in deploy
    assert "az ad app permission admin-consent" in deploy


def test_bad_repo_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        bootstrap_ci.main(["--repo", "claim-check", "--subscription", SUBSCRIPTION])
    assert "<owner>/<repo>" in capsys.readouterr().err


def test_apply_runs_az_with_the_ids_it_created(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--apply runs the commands, putting the created app id and service principal id into the rest."""
    log = tmp_path / "az.log"
    fake = tmp_path / "az"
    fake.write_text(f"""#!/bin/sh
echo "$*" >> {log}
case "$*" in
  "ad app create"*) echo app-123 ;;
  "ad sp create"*) echo sp-456 ;;
esac
""")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert (
        bootstrap_ci.main(["--repo", "o/r", "--subscription", SUBSCRIPTION, "--stacks", "dev", "--apply"])
        == 0
    )
    calls = log.read_text().splitlines()
    assert "ad sp create --id app-123 --query id --output tsv" in calls
    assert any(call.startswith("ad app federated-credential create --id app-123") for call in calls)
    assert any("--assignee-object-id sp-456" in call and "--role Contributor" in call for call in calls)
    assert not [call for call in calls if "$APP_ID" in call or "$SP_ID" in call]
