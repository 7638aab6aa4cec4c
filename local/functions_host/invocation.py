"""Call a user function the way the Python worker does: arguments by parameter name, async allowed."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any


def invoke(handler: Callable[..., Any], arguments: dict[str, Any]) -> Any:
    """Run ``handler`` with ``arguments`` (keyword, by binding name) and return its result.

    Coroutine functions run to completion on a fresh event loop in the calling thread, which is what
    each of our listener threads is: one invocation at a time per thread.
    """
    result = handler(**arguments)
    if inspect.iscoroutine(result):
        return asyncio.run(result)
    return result
