"""Pulumi entry point (Pulumi.yaml: `main: infra/`).

Pulumi runs this file with infra/ itself on sys.path, not the repository root, so `import infra...`
and `import claimcheck...` would fail there. The repository root and functions/ are put on sys.path
first; from the repo root (tests, `python -m infra.emulator_config`) they are already importable.
"""

from __future__ import annotations

import sys
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parent.parent
for _path in (_REPO_ROOT, _REPO_ROOT / "functions"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from infra.entrypoint import run  # noqa: E402  (needs the sys.path set above)

run()
