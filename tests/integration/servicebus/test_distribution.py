"""The emulator as another project gets it: its wheel, built from emulators/servicebus alone, installed
into a clean virtual environment (its dependencies from the package index), serving the sample
project's tests through the pytest plugin with the real azure-servicebus SDK."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest

DISTRIBUTION = Path(__file__).resolve().parents[3] / "emulators" / "servicebus"
SAMPLE = DISTRIBUTION / "samples" / "pytest-project"
# Nothing of this repository may leak into the clean environment.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"}}
IGNORED = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist", ".pytest_cache")


def _run(command: list[str | Path], cwd: Path) -> str:
    done = subprocess.run(command, cwd=cwd, env=CLEAN_ENV, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{command[:3]} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from a copy of the distribution's directory (the checkout stays clean)."""
    work = tmp_path_factory.mktemp("build")
    source = work / "servicebus"
    shutil.copytree(DISTRIBUTION, source, ignore=IGNORED)
    pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet"]
    _run([*pip, "--wheel-dir", work / "dist", source], work)
    (built,) = (work / "dist").glob("servicebus_emulator-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_holds_the_package_its_plugin_and_console_script(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "servicebus_emulator/pytest_plugin.py" in names
    assert "servicebus_emulator/py.typed" in names
    assert not [name for name in names if name.startswith(("tests/", "samples/", "local/"))]
    (entry_points,) = (name for name in names if name.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "servicebus-emulator = servicebus_emulator.__main__:main" in text
    assert "[pytest11]" in text


@pytest.mark.slow
def test_a_sample_project_tests_with_the_installed_wheel(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv], tmp_path)
    python = venv / "bin" / "python"
    # The sample's own test tools at the versions this repository pins; the wheel's runtime
    # dependencies are whatever the index resolves for its requirements.
    tools = [f"azure-servicebus=={version('azure-servicebus')}", f"pytest=={version('pytest')}"]
    _run([python, "-m", "pip", "install", "--quiet", wheel, *tools], tmp_path)
    assert "usage: servicebus-emulator" in _run([venv / "bin" / "servicebus-emulator", "--help"], tmp_path)

    project = tmp_path / "project"
    shutil.copytree(SAMPLE, project, ignore=IGNORED)
    output = _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider"], project)
    assert "6 passed" in output, output
