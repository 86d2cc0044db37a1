"""Stopping the web tier as an operator does (Ctrl-C in `make serve`'s terminal: SIGINT to the
master and its workers at once) ends it quickly with a clean exit and says nothing alarming."""

from __future__ import annotations

import os
import signal
import time

import pytest
import requests

from tests.conftest import wait_until

STOP_S = 10  # what an operator waits for a Ctrl-C at most


@pytest.mark.slow
def test_ctrl_c_stops_the_web_tier_at_once_with_no_error_in_its_log(asgi_server):
    server = asgi_server(workers=2)
    assert requests.get(f"{server.url}/login/", timeout=30).status_code == 200
    wait_until(lambda: server.log().count("Started server process") == 2, timeout=60)

    stopping = time.monotonic()
    os.killpg(server.process.pid, signal.SIGINT)
    server.process.wait(STOP_S)
    took = time.monotonic() - stopping

    log = server.log()
    assert server.process.returncode == 0, log[-3000:]
    assert took < STOP_S
    assert "Shutting down: Master" in log
    assert "Error while closing socket" not in log, log[-3000:]
    assert "Perhaps out of memory" not in log, log[-3000:]
    assert "was sent SIGINT" not in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
