"""`make package`: the Function App's deployable zip, byte-identical for the same sources.

The zip holds exactly function_app.py, upload_routes.py, host.json, openapi.json, requirements.txt and
the claimcheck/ package's source files: no tests, local/, virtualenvs, local.settings*.json or caches.
Dependencies are not vendored: the code deployment asks Flex Consumption for a remote build, which
installs requirements.txt on the platform's own Linux x86-64 CPython 3.11 (docs/deploy.md says why).

Reproducible: entries in sorted order, a fixed timestamp and fixed permissions, a fixed compression
level and no extra fields, so only file contents (and the zlib implementation) decide the bytes.
Standard library only, so CI can run it before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_DIR = REPO_ROOT / "functions"
DEFAULT_OUTPUT = REPO_ROOT / "dist" / "claimcheck-functions.zip"

TOP_LEVEL_FILES = ("function_app.py", "upload_routes.py", "host.json", "openapi.json", "requirements.txt")
PACKAGE_DIR = "claimcheck"
PACKAGE_SUFFIXES = (".py", ".typed")  # source files; py.typed if the package ever ships one
# 1980-01-01 00:00:00 is the earliest time a zip entry can hold, so no clock or mtime leaks in.
FIXED_TIMESTAMP = (1980, 1, 1, 0, 0, 0)
FILE_MODE = 0o100644  # a regular file, rw-r--r--
COMPRESS_LEVEL = 9


@dataclass(frozen=True)
class Package:
    path: Path
    sha256: str
    size: int
    entries: tuple[str, ...]


def package_entries(functions_dir: Path = FUNCTIONS_DIR) -> list[tuple[str, Path]]:
    """(name in the zip, source file), sorted by name: the fixed top-level files and claimcheck/'s sources."""
    entries = []
    for name in TOP_LEVEL_FILES:
        source = functions_dir / name
        if not source.is_file():
            raise FileNotFoundError(f"{source} is missing; the package needs it")
        entries.append((name, source))
    for source in (functions_dir / PACKAGE_DIR).rglob("*"):
        relative = source.relative_to(functions_dir)
        if source.is_file() and source.suffix in PACKAGE_SUFFIXES and "__pycache__" not in relative.parts:
            entries.append((relative.as_posix(), source))
    return sorted(entries)


def build_package(output: Path = DEFAULT_OUTPUT, functions_dir: Path = FUNCTIONS_DIR) -> Package:
    """Writes the zip (atomically: a temporary file renamed into place) and returns its digest."""
    output.parent.mkdir(parents=True, exist_ok=True)
    partial = output.with_name(output.name + ".partial")
    entries = package_entries(functions_dir)
    with zipfile.ZipFile(partial, "w") as archive:
        for name, source in entries:
            info = zipfile.ZipInfo(name, date_time=FIXED_TIMESTAMP)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # Unix, so the mode below is read as permissions
            info.external_attr = FILE_MODE << 16
            archive.writestr(info, source.read_bytes(), compresslevel=COMPRESS_LEVEL)
    partial.replace(output)
    data = output.read_bytes()
    return Package(
        path=output,
        sha256=hashlib.sha256(data).hexdigest(),
        size=len(data),
        entries=tuple(name for name, _ in entries),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="where to write the zip")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    package = build_package(args.output)
    elapsed = time.perf_counter() - started
    shown = package.path.relative_to(REPO_ROOT) if package.path.is_relative_to(REPO_ROOT) else package.path
    print(
        f"{shown}: {len(package.entries)} files, {package.size} bytes, "
        f"sha256 {package.sha256} ({elapsed:.2f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
