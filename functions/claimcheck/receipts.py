"""Write receipts (docs/architecture.md §8): what an accepted write returns and what its work item keeps.

``WriteReceipt`` is the receipt as the work item keeps it (the last ones, in its row) and as the status
API shows it; ``IntakeReceipt`` is what intake answers: the same receipt and the ETag of the work-item
row that confirmed it. Both are typed end to end; dictionaries exist only at the JSON edges
(``to_dict``/``from_dict``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from claimcheck.timestamps import format_timestamp


@dataclass(frozen=True)
class WriteReceipt:
    """One accepted write: enough to read the same object back at a version ≥ this one."""

    work_item_id: str
    version: int
    transport: str  # "inline" | "reference"
    payload_ref: str | None
    object_etag: str | None
    request_id: str
    message_id: str
    accepted_at: datetime
    visibility_deadline: datetime
    content_length: int
    sha256: str
    # The sha256 of the message intake published for this version (claimcheck.provenance): its envelope,
    # session id and routing properties. The consumer accepts only a message with this digest. None in
    # receipts kept before it was recorded: their fields alone are compared.
    message_sha256: str | None = field(default=None, kw_only=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "work_item_id": self.work_item_id,
            "version": self.version,
            "transport": self.transport,
            "payload_ref": self.payload_ref,
            "object_etag": self.object_etag,
            "request_id": self.request_id,
            "message_id": self.message_id,
            "accepted_at": format_timestamp(self.accepted_at),
            "visibility_deadline": format_timestamp(self.visibility_deadline),
            "content_length": self.content_length,
            "sha256": self.sha256,
            "message_sha256": self.message_sha256,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WriteReceipt:
        return cls(**_fields(data))


@dataclass(frozen=True)
class IntakeReceipt(WriteReceipt):
    """What intake answers: the kept receipt and the ETag of the work-item row that confirmed it."""

    record_etag: str

    @classmethod
    def confirmed(cls, receipt: WriteReceipt, record_etag: str) -> IntakeReceipt:
        return cls(**asdict(receipt), record_etag=record_etag)

    def to_dict(self) -> dict[str, Any]:
        kept = super().to_dict()
        return {key: kept[key] for key in _BEFORE_ETAG} | {"record_etag": self.record_etag} | kept

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IntakeReceipt:
        return cls(**_fields(data), record_etag=data["record_etag"])


_BEFORE_ETAG = ("work_item_id", "version", "transport", "payload_ref", "object_etag")


def _fields(data: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "work_item_id": data["work_item_id"],
        "version": int(data["version"]),
        "transport": data["transport"],
        "payload_ref": data["payload_ref"],
        "object_etag": data["object_etag"],
        "request_id": data["request_id"],
        "message_id": data["message_id"],
        "accepted_at": datetime.fromisoformat(data["accepted_at"]),
        "visibility_deadline": datetime.fromisoformat(data["visibility_deadline"]),
        "content_length": int(data["content_length"]),
        "sha256": data["sha256"],
        "message_sha256": data.get("message_sha256"),
    }
