"""The steps of the GitHub workflows, as tested code (`python -m scripts.ci <step>`).

The workflow files only call these steps; what a step runs, how its exit status is decided, what the
pull-request comment says and where tokens come from are here, tested with stand-in `pulumi`
executables and local stand-ins for GitHub's and Entra's endpoints (tests/unit/ci/). Standard library
only at import time: the preview job installs nothing but the Pulumi CLI.
"""
