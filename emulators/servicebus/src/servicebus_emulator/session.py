"""One AMQP session (channel): link handles, delivery ids, flow fields, coalesced dispositions."""

from __future__ import annotations

import itertools
from typing import Any

from servicebus_emulator.amqp_types import UInt
from servicebus_emulator.attach import Attacher
from servicebus_emulator.fastframes import (
    ACCEPTED_STATE,
    accepted_echo_frame,
    disposition_frame,
    flow_frame,
    transfer_frame,
)
from servicebus_emulator.frames import composite, composite_name
from servicebus_emulator.links import IncomingLink, Link, OutgoingLink
from servicebus_emulator.ports import LinkIdentity, SessionHost
from servicebus_emulator.receiver import ReceiverLink

SESSION_WINDOW = 1 << 20


class Session:
    """One AMQP session (channel): links by handle, delivery ids, dispositions to coalesce."""

    def __init__(self, host: SessionHost, attacher: Attacher, channel: int, begin: dict[str, Any]) -> None:
        self.host = host
        self.attacher = attacher
        self.channel = channel
        self.remote_channel = channel
        self.next_incoming_id = int(begin.get("next_outgoing_id") or 0)
        self.next_outgoing_id = 0
        # How many more transfers the client accepts on this session (its incoming window).
        self.remote_incoming_window = int(begin.get("incoming_window") or 0)
        self.by_remote_handle: dict[int, Link] = {}
        self.outgoing_by_handle: dict[int, OutgoingLink] = {}
        self._accepted: list[int] = []
        self._handles = itertools.count()  # the broker's link handles, never reused in a session

    def send(self, body: Any, payload: bytes = b"") -> None:
        self.host.send_frame(self.channel, body, payload)

    def _session_flow_fields(self) -> dict[str, Any]:
        return {
            "next_incoming_id": UInt(self.next_incoming_id),
            "incoming_window": UInt(SESSION_WINDOW),
            "next_outgoing_id": UInt(self.next_outgoing_id),
            "outgoing_window": UInt(SESSION_WINDOW),
        }

    def send_flow(self, handle: int, *, delivery_count: int, link_credit: int, drain: bool = False) -> None:
        self.host.send_encoded(
            flow_frame(
                self.channel,
                next_incoming_id=self.next_incoming_id,
                window=SESSION_WINDOW,
                next_outgoing_id=self.next_outgoing_id,
                handle=handle,
                delivery_count=delivery_count & 0xFFFFFFFF,
                link_credit=link_credit,
                drain=drain,
            )
        )

    def send_disposition(self, delivery_id: int, state: bytes) -> None:
        """Settle a delivery the broker sent (``state`` encoded, see ``fastframes``)."""
        if state is ACCEPTED_STATE:
            self.host.send_encoded(accepted_echo_frame(self.channel, delivery_id))
            return
        self.host.send_encoded(
            disposition_frame(
                self.channel, role=False, first=delivery_id, last=None, settled=True, state=state
            )
        )

    def transfer(self, handle: int, tag: bytes, payload: bytes, *, settled: bool) -> int:
        """Send one delivery, split into frames that fit the client's max frame size."""
        delivery_id = self.next_outgoing_id
        self.next_outgoing_id += 1
        self.remote_incoming_window -= 1
        room = self.host.remote_max_frame_size - 128 - len(tag)
        if len(payload) <= room:  # the usual case: one frame, the payload not sliced (copied)
            self.host.send_encoded(
                transfer_frame(
                    self.channel, handle, delivery_id, tag, settled=settled, more=False, payload=payload
                )
            )
            return delivery_id
        offset = 0
        while True:
            chunk = payload[offset : offset + room]
            offset += len(chunk)
            more = offset < len(payload)
            self.host.send_encoded(
                transfer_frame(
                    self.channel, handle, delivery_id, tag, settled=settled, more=more, payload=chunk
                )
            )
            if not more:
                return delivery_id

    def settle_incoming(self, delivery_id: int, outcome: Any) -> None:
        if composite_name(outcome) == "accepted":
            self._accepted.append(delivery_id)
            self.host.schedule_flush()
        else:
            self.send(
                composite("disposition", role=True, first=UInt(delivery_id), settled=True, state=outcome)
            )

    def flush_dispositions(self) -> None:
        """One disposition per run of consecutive accepted deliveries."""
        if not self._accepted:
            return
        ids, self._accepted = sorted(self._accepted), []
        start = 0
        for i in range(1, len(ids) + 1):
            if i == len(ids) or ids[i] != ids[i - 1] + 1:
                self.host.send_encoded(
                    disposition_frame(
                        self.channel,
                        role=True,
                        first=ids[start],
                        last=ids[i - 1] if i - 1 > start else None,
                        settled=True,
                        state=ACCEPTED_STATE,
                    )
                )
                start = i

    def forget(self, link: LinkIdentity) -> None:
        self.by_remote_handle.pop(link.remote_handle, None)
        self.outgoing_by_handle.pop(link.handle, None)

    def close_links(self) -> None:
        for link in list(self.by_remote_handle.values()):
            link.closed = True
            link.on_closed()
        self.by_remote_handle.clear()
        self.outgoing_by_handle.clear()

    # --- frames from the client ------------------------------------------------------------------

    def on_frame(self, name: str, fields: dict[str, Any], payload: memoryview) -> None:
        if name == "transfer":
            if fields.get("delivery_id") is not None:
                self.next_incoming_id = int(fields["delivery_id"]) + 1
            link = self.by_remote_handle.get(fields["handle"])
            if isinstance(link, IncomingLink):
                link.on_transfer(fields, payload)
        elif name == "flow":
            self._on_session_flow(fields)
            link = self.by_remote_handle.get(fields["handle"]) if fields.get("handle") is not None else None
            if isinstance(link, OutgoingLink):
                link.on_flow(fields)
            elif fields.get("echo"):
                self.send(composite("flow", **self._session_flow_fields()))
        elif name == "disposition":
            self._on_disposition(fields)
        elif name == "attach":
            link = self.attacher.create(self, fields, next(self._handles))
            self.by_remote_handle[link.remote_handle] = link
            if isinstance(link, OutgoingLink):
                self.outgoing_by_handle[link.handle] = link
            self.attacher.open(link)
        elif name == "detach":
            link = self.by_remote_handle.get(fields["handle"])
            if link is not None and not link.closed:
                link.detach()
        elif name == "end":
            self.close_links()
            self.send(composite("end"))
            self.host.end_session(self.remote_channel)

    def _on_session_flow(self, fields: dict[str, Any]) -> None:
        was_closed = self.remote_incoming_window <= 0
        next_incoming = int(fields.get("next_incoming_id") or 0)
        self.remote_incoming_window = (
            next_incoming + int(fields.get("incoming_window") or 0) - self.next_outgoing_id
        )
        if was_closed and self.remote_incoming_window > 0:
            for link in list(self.outgoing_by_handle.values()):
                link.resume()

    def on_accepted(self, first: int, last: int, settled: bool) -> None:
        """A receiver's disposition accepting first..last (the steady state's completion, read by
        ``fastframes.accepted_disposition``): what ``on_frame`` does with it, without the fields."""
        for link in list(self.outgoing_by_handle.values()):
            if isinstance(link, ReceiverLink) and link.unsettled:
                link.on_accepted(first, last, settled)

    def _on_disposition(self, fields: dict[str, Any]) -> None:
        if not fields.get("role"):  # only a receiver settles what the broker sent
            return
        first = int(fields["first"])
        last = int(fields["last"]) if fields.get("last") is not None else first
        settled, state = bool(fields.get("settled")), fields.get("state")
        for link in list(self.outgoing_by_handle.values()):
            if isinstance(link, ReceiverLink) and link.unsettled:
                link.on_disposition(first, last, settled, state)  # settles what it sent of first..last
