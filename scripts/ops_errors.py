"""The one error type of `claimcheck-ops`."""


class OpsError(Exception):
    """An expected failure the CLI reports in one line (unknown entity, unreachable broker, 404...)."""
