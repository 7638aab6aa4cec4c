"""The one error type of the filter engine."""


class FilterError(ValueError):
    """A SQL filter, rule action or rule definition that Service Bus would refuse.

    The message says where (character position, rule name) and why; it never echoes message data.
    """
