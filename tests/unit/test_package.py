"""`make package`: the deployable zip holds exactly what the Function App needs, byte-identical for the
same sources; unpacked into a clean virtualenv with its own requirements, the app indexes its functions."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from scripts.package import FUNCTIONS_DIR, REPO_ROOT, build_package

FUNCTIONS = {"submit_document", "get_work_item", "consume_document", "reconcile"}


def _copy_functions(target: Path) -> Path:
    shutil.copytree(FUNCTIONS_DIR, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def test_same_sources_give_a_byte_identical_zip(tmp_path: Path) -> None:
    """Two builds from copies with other mtimes and permissions give the same bytes and sha256."""
    first = build_package(tmp_path / "a.zip", _copy_functions(tmp_path / "one"))
    other = _copy_functions(tmp_path / "two")
    for path in other.rglob("*.py"):
        os.utime(path, (1_000_000_000, 1_000_000_000))
        path.chmod(0o600)
    second = build_package(tmp_path / "b.zip", other)
    assert first.path.read_bytes() == second.path.read_bytes()
    assert first.sha256 == second.sha256
    (other / "host.json").write_text((other / "host.json").read_text() + "\n")
    assert build_package(tmp_path / "c.zip", other).sha256 != first.sha256


def test_zip_holds_the_app_and_nothing_else(tmp_path: Path) -> None:
    """function_app.py, host.json, openapi.json, requirements.txt and claimcheck/ sources; nothing else."""
    functions = _copy_functions(tmp_path / "functions")
    (functions / "local.settings.json").write_text('{"Values": {"secret": "x"}}')
    (functions / "claimcheck" / "__pycache__").mkdir()
    (functions / "claimcheck" / "__pycache__" / "settings.cpython-311.pyc").write_bytes(b"\0")
    (functions / ".venv").mkdir()
    (functions / ".venv" / "junk.py").write_text("")
    (functions / "tests").mkdir()
    (functions / "tests" / "test_x.py").write_text("")
    package = build_package(tmp_path / "app.zip", functions)
    with zipfile.ZipFile(package.path) as archive:
        infos = archive.infolist()
    names = [info.filename for info in infos]
    assert names == sorted(names)
    expected_sources = sorted(
        path.relative_to(FUNCTIONS_DIR).as_posix()
        for path in (FUNCTIONS_DIR / "claimcheck").rglob("*.py")
        if "__pycache__" not in path.parts
    )
    top_level = ["function_app.py", "upload_routes.py", "host.json", "openapi.json", "requirements.txt"]
    assert names == sorted([*top_level, *expected_sources])
    assert {info.date_time for info in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert {info.external_attr >> 16 for info in infos} == {0o100644}


@pytest.mark.slow
def test_unpacked_package_installs_and_indexes_its_functions(tmp_path: Path) -> None:
    """The package's own requirements.txt installs into a clean virtualenv, and function_app imports
    from the unpacked package and indexes the same functions as the source tree (the four of the app)."""
    package = build_package(tmp_path / "app.zip")
    unpacked = tmp_path / "wwwroot"
    with zipfile.ZipFile(package.path) as archive:
        archive.extractall(unpacked)
    environment = tmp_path / "venv"
    venv.create(environment, with_pip=True)
    python = environment / "bin" / "python"
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            str(unpacked / "requirements.txt"),
        ],
        check=True,
        timeout=600,
    )
    indexed = _indexed_functions(python, unpacked, isolated=True)
    assert indexed == _indexed_functions(Path(sys.executable), FUNCTIONS_DIR, isolated=False)
    assert set(indexed) >= FUNCTIONS


_INDEX = """
import json, function_app
print(json.dumps({f.get_function_name(): sorted(b["type"] for b in f.get_bindings_dict()["bindings"])
                  for f in function_app.app.get_functions()}))
"""


def _indexed_functions(python: Path, app_dir: Path, *, isolated: bool) -> dict[str, list[str]]:
    """Function name -> binding types, as the worker's indexing sees them, from a fresh interpreter.

    Isolated: only the app directory and the virtualenv on the path (no repo, no .pth of the dev venv).
    """
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}
    if not isolated:
        env["PYTHONPATH"] = f"{app_dir}{os.pathsep}{REPO_ROOT}"
    result = subprocess.run(
        [str(python), "-c", _INDEX],
        cwd=app_dir,
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    indexed: dict[str, list[str]] = json.loads(result.stdout.splitlines()[-1])
    return indexed
