"""Reconnection without end (source.reconnect_timeout_seconds = "forever"), and health and
metrics that say the engine waits for its source and since when (issue 40, Deliver 2)."""

from __future__ import annotations

import threading
import time

import pytest
from support import eventually
from support.harness import SupervisorInThread, config_data

from dblog.runtime.config import parse_config
from dblog.runtime.http_endpoint import HttpEndpoint
from dblog.runtime.metrics import Metrics
from dblog.runtime.status import ask_engine
from dblog.runtime.supervisor import Supervisor


@pytest.mark.parametrize("limit, gives_up", [(300, True), ("forever", False)])
def test_forever_never_gives_up_however_long_the_source_is_gone(limit, gives_up):
    supervisor = Supervisor(parse_config({"source": {"reconnect_timeout_seconds": limit}}))
    supervisor._failing_since = time.monotonic() - 10 * 365 * 24 * 3600  # failing for ten years
    assert supervisor._given_up(None) is gives_up


def _metric(metrics: Metrics, name: str) -> float:
    return metrics.registry.get_sample_value(name)


@pytest.mark.server
def test_health_and_metrics_say_since_when_the_engine_waits_for_its_source(own_mariadb, tmp_path):
    own_mariadb.execute("CREATE DATABASE shop")
    data = config_data(own_mariadb, "shop", tmp_path, snapshot={"startup": "never"},
                       source={"reconnect_timeout_seconds": "forever", "binlog_reconnects": 0})
    runner = SupervisorInThread(data)
    metrics = Metrics.of_supervisor(runner.supervisor)
    endpoint = HttpEndpoint(metrics).start()  # what `dblog status` asks (http.port)
    runner.start()
    try:
        eventually(lambda: metrics.readiness()[0], 60, message="the engine streaming")
        assert metrics.readiness()[1]["waiting_for_source_since"] is None
        assert _metric(metrics, "dblog_source_waiting_since_seconds") == 0
        assert ask_engine(endpoint.host, endpoint.port).startswith("engine: streaming")
        # Watched from another thread while this one restarts the server (the server dies with
        # the thread that launched it).
        seen: list = []

        def watch() -> None:
            deadline = time.monotonic() + 60
            while not seen and time.monotonic() < deadline:
                if runner.supervisor.waiting_for_source_since is not None:
                    seen.append((metrics.readiness(), _metric(metrics, "dblog_source_waiting_since_seconds"),
                                 runner.supervisor.waiting_for_source_since, ask_engine(endpoint.host, endpoint.port)))
                time.sleep(0.05)

        watcher = threading.Thread(target=watch)
        watcher.start()
        own_mariadb.restart(down_seconds=6)
        watcher.join()
        assert seen, "the supervisor never said it waits for the source"
        (ready, body), gauge, since, status = seen[0]
        assert not ready and body["waiting_for_source_since"], body
        assert any("waiting for the source database since" in reason for reason in body["reasons"]), body
        assert gauge == since
        waiting = f"engine: WAITING for the source database since {body['waiting_for_source_since']}"
        assert status.startswith(waiting), status
        runner.check_running()
    finally:
        runner.stop()
        endpoint.close()


def test_dblog_status_says_when_no_engine_answers_on_its_http_port():
    endpoint = HttpEndpoint(Metrics.of_supervisor(Supervisor(parse_config({}))))
    port = endpoint.port
    endpoint.close()  # nothing listens there any more
    assert ask_engine("0.0.0.0", port).startswith(f"engine: no answer from http://127.0.0.1:{port}/readyz")
