"""The pure choice between the broker's delivery number and the app's own count."""

from __future__ import annotations

from claimcheck.deliveries import attempts_key, delivery_number


def test_the_brokers_number_wins_and_the_count_is_not_consulted() -> None:
    def must_not_count() -> int:
        raise AssertionError("the app's count was consulted although the broker reported the number")

    assert delivery_number(3, must_not_count) == 3
    assert delivery_number(1, must_not_count) == 1


def test_without_the_brokers_number_the_apps_count_is_used() -> None:
    assert delivery_number(None, lambda: 4) == 4


def test_a_replayed_copy_is_counted_apart_from_the_original() -> None:
    assert attempts_key("m-1", 7) != attempts_key("m-1", 8)
    assert attempts_key("m-1", 7) == attempts_key("m-1", 7)
