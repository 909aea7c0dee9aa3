"""The toy sink registers itself for the tests of this folder, and is forgotten after each."""

import pytest
from toy_sink import PLUGIN

from dblog.sinks.registry import register, unregister


@pytest.fixture(autouse=True)
def toy_sink_registered():
    register(PLUGIN)
    try:
        yield PLUGIN
    finally:
        unregister(PLUGIN.name)
