"""State machines: only the moves in the tables are allowed, and the tables are coherent."""

from __future__ import annotations

import pytest
from claimcheck.errors import IllegalTransition
from claimcheck.states import (
    PAYLOAD_MOVES,
    WORK_ITEM_MOVES,
    PayloadState,
    WorkItemState,
    check_payload_move,
    check_work_item_move,
)
from hypothesis import given
from hypothesis import strategies as st


@given(st.sampled_from(PayloadState), st.sampled_from(PayloadState))
def test_payload_move_allowed_exactly_when_listed(current: PayloadState, target: PayloadState) -> None:
    """check_payload_move accepts a move if and only if the table lists it."""
    if target in PAYLOAD_MOVES[current]:
        check_payload_move(current, target)
    else:
        with pytest.raises(IllegalTransition):
            check_payload_move(current, target)


@given(st.lists(st.sampled_from(PayloadState), max_size=12))
def test_any_walk_from_preparing_stays_in_the_table(targets: list[PayloadState]) -> None:
    """A random walk applying only accepted moves never leaves the table, and removed is final."""
    state = PayloadState.PREPARING
    for target in targets:
        try:
            check_payload_move(state, target)
        except IllegalTransition:
            continue
        assert state is not PayloadState.REMOVED
        state = target


def test_every_payload_state_is_reachable_from_preparing() -> None:
    """No state in the enum is dead: each can be reached from preparing."""
    seen = {PayloadState.PREPARING}
    frontier = [PayloadState.PREPARING]
    while frontier:
        for target in PAYLOAD_MOVES[frontier.pop()]:
            if target not in seen:
                seen.add(target)
                frontier.append(target)
    assert seen == set(PayloadState)


def test_nothing_deletes_before_the_effect() -> None:
    """removed is reachable from available only through processed (never straight from a read state)."""
    assert PayloadState.REMOVED not in PAYLOAD_MOVES[PayloadState.AVAILABLE]
    assert PayloadState.REMOVED not in PAYLOAD_MOVES[PayloadState.REF_PUBLISHED]
    assert PAYLOAD_MOVES[PayloadState.INTEGRITY_FAILED] == frozenset()


@given(st.sampled_from(WorkItemState), st.sampled_from(WorkItemState))
def test_work_item_move_allowed_exactly_when_listed(current: WorkItemState, target: WorkItemState) -> None:
    """check_work_item_move accepts a move if and only if the table lists it."""
    if target in WORK_ITEM_MOVES[current]:
        check_work_item_move(current, target)
    else:
        with pytest.raises(IllegalTransition):
            check_work_item_move(current, target)
