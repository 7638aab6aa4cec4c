"""The error types of `claimcheck-ops`."""


class OpsError(Exception):
    """An expected failure the CLI reports in one line (unknown entity, unreachable broker, 404...)."""


class Interrupted(Exception):
    """Ctrl-C during a command; the text says what it left behind (printed as `interrupted; <text>`,
    exit code 130 as for any SIGINT)."""


INTERRUPTED = 130  # 128 + SIGINT, the shell's code for a process a Ctrl-C ended
