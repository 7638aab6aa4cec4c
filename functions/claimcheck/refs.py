"""Opaque payload references: ``ref_`` + 160 random bits, URL-safe, nothing readable inside.

A reference locates an object through the registry; it carries no tenant, name, path or
environment, and it authorizes nothing. Environment binding lives in the registry record.
"""

from __future__ import annotations

import re
import secrets

REF_PREFIX = "ref_"
_RANDOM_BYTES = 20  # 160 bits: well above the 128-bit floor, and 27 base64url characters
REF_PATTERN = re.compile(r"^ref_[A-Za-z0-9_-]{22,64}$")


def new_payload_ref() -> str:
    """A fresh, unguessable reference for one stored object (one version of one work item)."""
    return REF_PREFIX + secrets.token_urlsafe(_RANDOM_BYTES)


def is_well_formed_ref(value: str) -> bool:
    """True if ``value`` has the shape of a reference (says nothing about whether it exists)."""
    return REF_PATTERN.fullmatch(value) is not None
