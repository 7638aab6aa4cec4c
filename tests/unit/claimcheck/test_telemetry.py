"""claimcheck.telemetry's pure parts: the W3C tracestate check and propagation when no SDK records."""

from __future__ import annotations

import pytest
from claimcheck import telemetry
from claimcheck.telemetry import Telemetry, check_tracestate
from opentelemetry.trace import NoOpTracerProvider


@pytest.mark.parametrize(
    "value",
    [
        "vendor=abc",
        "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7",
        "tenant1@system=value with spaces inside",
        "a=b , c=d",  # optional whitespace around members
        ",".join(f"k{index}=v" for index in range(32)),
    ],
)
def test_well_formed_tracestates_pass(value: str) -> None:
    assert check_tracestate(value) == value


@pytest.mark.parametrize(
    "value",
    [
        "",
        "Vendor=abc",  # keys are lowercase
        "vendor",  # no value
        "vendor=",  # empty value
        "vendor=a,b",  # a member without '='
        "k=tab\tinside",
        "vendor=x=y",  # '=' inside a value
        "a=1,,b=2",  # an empty member
        "a=1,a=2",  # a repeated key
        ",".join(f"k{index}=v" for index in range(33)),
        "k=" + "v" * 257,  # a value over 256 characters
        "k=" + "v" * 255 + ",j=" + "w" * 255,  # over 512 characters in all
        "k=caf\u00e9",  # not ASCII
        "k=line\nbreak",
    ],
)
def test_malformed_tracestates_are_refused(value: str) -> None:
    with pytest.raises(ValueError, match="tracestate"):
        check_tracestate(value)


def test_without_an_sdk_the_callers_trace_context_passes_through_unchanged() -> None:
    """Nothing records spans: the message still carries the caller's traceparent and tracestate."""
    previous = telemetry.use(Telemetry(NoOpTracerProvider()))
    try:
        parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        with telemetry.intake(parent, "vendor=abc"), telemetry.stage(telemetry.Stage.PUBLISH):
            carried = telemetry.message_context()
        with telemetry.intake(None, None), telemetry.stage(telemetry.Stage.PUBLISH):
            nothing = telemetry.message_context()
    finally:
        telemetry.use(previous)
    assert carried == {"traceparent": parent, "tracestate": "vendor=abc"}
    assert nothing == {}
