"""Entry points a person runs: claimcheck-ops, claimcheck-mcp, the demo and their helpers.

The repository is used in place, and so is functions/ (the ``claimcheck`` package the Function App
deploys): it goes on ``sys.path`` here, where the Makefile's .pth file has not put it already, so the
ops CLI imports the app's own implementation of what the two share (the dead-letter replay, the error
types) wherever it runs. That includes CI's deploy job, which installs requirements-ops.txt alone;
it includes functions/requirements.txt, so the package's dependencies are there.
"""

import sys
from pathlib import Path

_FUNCTIONS = Path(__file__).resolve().parent.parent / "functions"
if (_FUNCTIONS / "claimcheck").is_dir() and str(_FUNCTIONS) not in sys.path:
    sys.path.append(str(_FUNCTIONS))
