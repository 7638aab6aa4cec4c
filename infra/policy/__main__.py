"""The `claimcheck-security` policy pack: `pulumi preview --policy-pack infra/policy`.

Pulumi runs this file with infra/policy/ on sys.path; the repository root is added so the rules
(infra/policy/rules.py, unit-tested on their own) import the same way as in tests.
"""

from __future__ import annotations

import sys
from pathlib import Path

_REPO_ROOT = Path(__file__).resolve().parent.parent.parent
if str(_REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(_REPO_ROOT))

from infra.policy.pack import build_policy_pack  # noqa: E402  (needs the sys.path set above)

build_policy_pack()
