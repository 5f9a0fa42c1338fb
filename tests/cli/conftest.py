"""Fixtures shared by the CLI tests."""
from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend():
    """The MCP tests' async client runs on asyncio (the SDK's own loop)."""
    return "asyncio"
