"""The metrics and health endpoint (`[http] port`), over real HTTP against real engines on the
private MariaDB: `dblog run` as a process (reader process on), a supervisor in this process
(reader in-process) with writes inside an open window, a short outage of the database ridden
through by the binlog reader's reconnects (both reader modes), an unreachable database, the
lag over the limit, a stopping engine, the Iceberg sink's MERGEs."""

from __future__ import annotations

import itertools
import json
import signal
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest
from support.harness import EngineProcess, EngineThread, SupervisorInThread, config_data, iceberg_config
from support import eventually, hold_chunk_read
from support.metrics_workload import CHUNK, ITEMS, Scrape, get, make_items, write_item_changes

from dblog.core.events import Heartbeat, TableId, TransactionStart
from dblog.core.gtid import Gtid
from dblog.runtime.config import ConfigError, parse_config
from dblog.runtime.http_endpoint import serve
from dblog.runtime.engine_stats import EngineStats, Histogram
from dblog.runtime.metrics import Metrics



# --- helpers ---------------------------------------------------------------------------------


def get_json(url: str) -> tuple[int, dict]:
    status, content_type, body = get(url)
    assert content_type == "application/json", content_type
    return status, json.loads(body)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def make_tables(mariadb, database: str) -> None:
    make_items(mariadb, database)
    mariadb.execute(f"CREATE TABLE `{database}`.skipped (id INT PRIMARY KEY)")  # excluded: filtered


def write_changes(mariadb, database: str) -> None:
    """4 inserts into skipped, then write_item_changes: the skipped inserts come first in the
    binlog, so once the items' changes are counted they were filtered (a test waits on the former)."""
    with mariadb.connect() as connection, connection.cursor() as cursor:
        for i in range(4):
            cursor.execute(f"INSERT INTO `{database}`.skipped VALUES (%s)", (i,))
    write_item_changes(mariadb, database)


def metrics_config(mariadb, database: str, tmp_path, source: dict | None = None, **sections) -> dict:
    """Chunks of a fixed CHUNK rows (they do not grow while windows wait): 3 windows for ITEMS."""
    return config_data(mariadb, database, tmp_path, source={"exclude": [f"{database}\\.skipped"], **(source or {})},
                       snapshot={"chunk_size": CHUNK, "max_chunk_size": CHUNK}, **sections)


def check_after_writes(scrape: Scrape, database: str, dropped: int = 0) -> None:
    """What every engine of these tests must show once it streamed `write_changes` after the
    snapshot; `dropped`: rows of chunk 2 updated (one transaction each) while its window was open."""
    items = f"{database}.items"
    assert scrape.value("dblog_changes_total", table=items, op="r") == ITEMS - dropped
    assert scrape.value("dblog_changes_total", table=items, op="c") == 5
    assert scrape.value("dblog_changes_total", table=items, op="u") == 3 + dropped
    assert scrape.value("dblog_changes_total", table=items, op="d") == 2
    assert not [labels for labels in scrape.labelled("dblog_changes_total") if labels["table"].endswith(".skipped")]
    assert scrape.value("dblog_streaming_events_filtered_total") >= 4  # one rows event per skipped insert
    assert scrape.value("dblog_streaming_transactions_total") >= 14 + dropped
    assert scrape.value("dblog_streaming_connected") == 1
    assert scrape.value("dblog_streaming_reconnects_total") == 0
    assert 0 <= scrape.value("dblog_streaming_lag_seconds") < 30
    assert scrape.value("dblog_streaming_seconds_since_last_event") < 30
    info = scrape.labelled("dblog_streaming_binlog_info")
    assert len(info) == 1 and info[0]["file"] and int(info[0]["pos"]) > 0 and info[0]["gtid_set"]
    # the snapshot: one table of 300 rows in 3 chunks; the window drops the rows changed while open
    assert scrape.value("dblog_snapshot_rows_scanned", table=items) == ITEMS
    assert scrape.value("dblog_snapshot_tables") == 1 and scrape.value("dblog_snapshot_tables_remaining") == 0
    assert scrape.value("dblog_snapshot_running") == 0 and scrape.value("dblog_snapshot_paused") == 0
    assert scrape.value("dblog_snapshot_table_scans_total", status="SUCCEEDED") == 1
    assert scrape.value("dblog_snapshot_window_seconds_count") == ITEMS // CHUNK
    assert scrape.value("dblog_snapshot_window_seconds_sum") > 0
    assert scrape.value("dblog_snapshot_window_rows_dropped_count") == ITEMS // CHUNK
    assert scrape.value("dblog_snapshot_window_rows_dropped_sum") == dropped
    # the observations by bucket: every window dropped nothing, or one dropped `dropped` (1 < it <= 10)
    assert scrape.value("dblog_snapshot_window_rows_dropped_bucket", le="0.0") == ITEMS // CHUNK - (1 if dropped else 0)
    assert scrape.value("dblog_snapshot_window_rows_dropped_bucket", le="10.0") == ITEMS // CHUNK
    assert scrape.value("dblog_snapshot_visibility_wait_seconds_total") > 0  # checked before each read
    assert scrape.value("dblog_snapshot_visibility_waits_total") >= 0
    # the sink
    commits = scrape.value("dblog_sink_commits_total")
    assert commits > 0
    assert scrape.value("dblog_sink_commit_seconds_count") == commits
    assert scrape.value("dblog_sink_commit_rows_count") == commits
    assert scrape.value("dblog_sink_commit_rows_sum") <= ITEMS + 10 + dropped  # every change committed once at most
    assert scrape.value("dblog_sink_pending_rows") is not None
    assert scrape.value("dblog_start_time_seconds") <= time.time()
    assert scrape.value("dblog_engine_restarts_total") == 0
    assert scrape.value("process_resident_memory_bytes") > 0


# --- units -----------------------------------------------------------------------------------


def test_histogram_buckets_are_cumulative_and_inclusive():
    histogram = Histogram((1, 10))
    for value in (0, 1, 1.5, 10, 11):
        histogram.observe(value)
    assert histogram.exposed() == ([("1.0", 2), ("10.0", 4), ("+Inf", 5)], 23.5)
    assert histogram.count == 5


def test_lag_comes_from_the_last_transaction_start_and_is_zero_after_a_heartbeat():
    stats = EngineStats()
    now = time.time()
    assert stats.lag_seconds(now) is None and stats.at() is None
    stats.transaction = TransactionStart(Gtid.parse("0-1-5"), ts_ms=int((now - 3) * 1000), file="b.1", pos=4)
    assert 2.5 < stats.lag_seconds(now) < 4.5 and stats.at().pos == 4
    stats.heartbeat(Heartbeat("b.1", 99))
    assert stats.lag_seconds(now) == 0 and stats.at().pos == 99
    stats.transaction = TransactionStart(Gtid.parse("0-1-6"), ts_ms=int((now - 10) * 1000), file="b.1", pos=120)
    assert 9.5 < stats.lag_seconds(now) < 11.5 and stats.at().pos == 120  # a transaction after the heartbeat


def test_the_last_event_time_follows_heartbeats_and_the_transaction_count():
    stats = EngineStats()
    metrics = Metrics(stats, lambda: None)
    assert metrics.last_event_time(100.0) is None
    stats.transactions = 3
    assert metrics.last_event_time(100.0) == 100.0  # first seen now
    assert metrics.last_event_time(130.0) == 100.0  # no transaction since
    stats.transactions = 4
    assert metrics.last_event_time(140.0) == 140.0
    stats.heartbeat_at = (150.0, Heartbeat("b.1", 4), None)
    assert metrics.last_event_time(160.0) == 150.0


def test_http_settings_are_validated():
    config = parse_config({})
    assert config.http.port is None and config.http.host == "127.0.0.1" and config.http.ready_max_lag_seconds == 60
    assert parse_config({"http": {"port": 0, "host": "::1"}}).http.port == 0
    for bad, message in (({"port": 70000}, "http.port"), ({"ready_max_lag_seconds": 0}, "http.ready_max_lag_seconds"),
                         ({"prot": 9000}, "http.prot")):
        with pytest.raises(ConfigError, match=message):
            parse_config({"http": bad})


def test_an_address_in_use_is_refused_by_name():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
            serve(Metrics(EngineStats(), lambda: None), "127.0.0.1", port)


# --- against real engines --------------------------------------------------------------------


def test_dblog_run_serves_metrics_and_health(mariadb, database, tmp_path):
    """`dblog run` with [http] port (the reader process on, as by default on 2 cores): the counts
    match what was written and snapshotted; ready once caught up; SIGTERM still exits 0."""
    make_tables(mariadb, database)
    port = free_port()
    engine = EngineProcess(metrics_config(mariadb, database, tmp_path, http={"port": port}), tmp_path)
    base = f"http://127.0.0.1:{port}"
    engine.start()
    try:
        def snapshot_done() -> bool:
            try:
                scrape = Scrape(base)
            except urllib.error.URLError:
                return False  # not listening yet
            return scrape.value("dblog_snapshot_table_scans_total", status="SUCCEEDED") == 1

        engine.eventually(snapshot_done, timeout=120, message="the snapshot seen through /metrics")
        assert get_json(base + "/healthz") == (200, {"status": "alive"})
        write_changes(mariadb, database)
        engine.eventually(lambda: Scrape(base).value("dblog_changes_total", table=f"{database}.items", op="d") == 2,
                          timeout=60, message="the deletes counted")
        engine.eventually(lambda: get(base + "/readyz")[0] == 200, timeout=30, message="ready")
        status, body = get_json(base + "/readyz")
        assert status == 200 and body["ready"] is True and body["connected"] is True and body["lag_seconds"] < 30
        scrape = Scrape(base)
        check_after_writes(scrape, database)
        assert "# TYPE dblog_streaming_lag_seconds gauge" in scrape.text
        assert "# TYPE dblog_changes_total counter" in scrape.text
        assert "# TYPE dblog_snapshot_window_seconds histogram" in scrape.text
        # OpenMetrics when the scraper asks for it; unknown paths are 404
        status, content_type, body = get_openmetrics(base + "/metrics")
        assert status == 200 and content_type.startswith("application/openmetrics-text") and body.endswith(b"# EOF\n")
        assert get(base + "/nothing")[0] == 404
        engine.process.send_signal(signal.SIGTERM)
        assert engine.process.wait(30) == 0, engine.log.read_text()[-3000:]
    finally:
        engine.kill()
    with pytest.raises(urllib.error.URLError):  # the endpoint went with the process
        urllib.request.urlopen(base + "/healthz", timeout=5)


def get_openmetrics(url: str) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.status, response.headers.get("Content-Type", ""), response.read()


class SupervisorThread(SupervisorInThread):
    """`dblog run`'s supervisor in a thread, with the endpoint `dblog run` serves for it."""

    def __init__(self, data: dict) -> None:
        super().__init__(data)
        self.endpoint = serve(Metrics.of_supervisor(self.supervisor, self.config.http.ready_max_lag_seconds),
                              "127.0.0.1", 0)
        self.base = self.endpoint.url
        self.start()

    def scrape(self) -> Scrape:
        self.check_running()
        return Scrape(self.base)

    def stop(self) -> None:
        super().stop()
        self.endpoint.close()


class EndpointWatcher:
    """Scrapes `connected` and asks /readyz every 20 ms in a thread of its own, keeping what it
    saw (a scrape that fails, as while the engine restarts, is skipped)."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.seen: list[tuple[float | None, tuple[int, dict]]] = []  # (connected, /readyz's status and body)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            try:
                connected = Scrape(self.base).value("dblog_streaming_connected")
                self.seen.append((connected, get_json(self.base + "/readyz")))
            except (OSError, AssertionError):
                continue

    def connected(self) -> list[float | None]:
        return [connected for connected, _ in list(self.seen)]

    def eventually_sees(self, condition, message: str, timeout: float = 60) -> None:
        """Until `condition(the connected values seen, from the first to differ from 1 on)` holds."""
        def seen() -> list:
            values = self.connected()
            first = next((index for index, value in enumerate(values) if value != 1), len(values))
            return values[first:]

        def runs() -> str:  # 1, 1, 1, 0, 0, 1 -> "1 x3, 0 x2, 1 x1"
            values = [(value, len(list(group))) for value, group in itertools.groupby(self.connected())]
            return ", ".join(f"{value:g} x{count}" if value is not None else f"none x{count}" for value, count in values)

        eventually(lambda: seen() and condition(seen()), timeout, message=lambda: f"{message}; seen {runs()}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


def test_supervised_engine_in_process_drops_rows_changed_in_a_window_then_stops(
        mariadb, database, tmp_path, monkeypatch):
    """The binlog read in this process: rows of chunk 2 updated while its window is open are
    dropped from it (the histogram's sum and buckets show it, the updates count as `u`);
    /readyz 503 "stopping" from stop() on."""
    make_tables(mariadb, database)
    updated = range(CHUNK + 1, CHUNK + 8)  # 7 keys of chunk 2 (fixed-size chunks of CHUNK rows)

    def update_inside_the_window() -> bool:
        # Called by the engine's thread after chunk 2's low watermark, before its SELECT: the
        # SELECT sees these updates and the reader reads them after it, inside the window.
        with mariadb.connect() as connection, connection.cursor() as cursor:
            for key in updated:  # one transaction each
                cursor.execute(f"UPDATE `{database}`.items SET v = 'in the window' WHERE id = %s", (key,))
        return True

    held = hold_chunk_read(monkeypatch, TableId(database, "items"), 2, update_inside_the_window)
    run = SupervisorThread(metrics_config(mariadb, database, tmp_path, source={"reader_process": False}))
    try:
        eventually(lambda: run.scrape().value("dblog_snapshot_table_scans_total", status="SUCCEEDED") == 1,
                   timeout=120, message="the snapshot")
        assert held["held"]
        write_changes(mariadb, database)
        eventually(lambda: run.scrape().value("dblog_changes_total", table=f"{database}.items", op="d") == 2,
                   timeout=60, message="the deletes counted")
        eventually(lambda: get(run.base + "/readyz")[0] == 200, timeout=30, message="ready")
        check_after_writes(run.scrape(), database, dropped=len(updated))
        run.supervisor.stop()
        status, body = get_json(run.base + "/readyz")
        assert status == 503 and body["ready"] is False and "stopping" in body["reasons"]
        assert get_json(run.base + "/healthz")[0] == 200
    finally:
        run.stop()
    assert run.error is None


@pytest.mark.parametrize("reader_process", [False, True], ids=["reader-in-process", "reader-process"])
def test_connected_goes_to_0_during_a_short_outage_and_back_to_1(mariadb, database, tmp_path, reader_process):
    """The database down for a second: the binlog reader rides through on its own reconnects
    (no engine restart), `connected` is 0 and /readyz 503 meanwhile, 1 and 200 after; the stream
    goes on."""
    make_tables(mariadb, database)
    run = SupervisorThread(metrics_config(mariadb, database, tmp_path, source={"reader_process": reader_process}))
    try:
        eventually(lambda: run.scrape().value("dblog_snapshot_table_scans_total", status="SUCCEEDED") == 1,
                   timeout=120, message="the snapshot")
        eventually(lambda: get(run.base + "/readyz")[0] == 200, timeout=30, message="ready")
        assert run.scrape().value("dblog_streaming_connected") == 1
        # Watched over HTTP from another thread while this one restarts the server (from this
        # thread: the server dies with the thread that started it). The default
        # source.binlog_reconnects (10, ~13 s of retries) outlast the outage.
        watcher = EndpointWatcher(run.base)
        try:
            mariadb.restart(down_seconds=1.0)
            watcher.eventually_sees(lambda seen: seen[0] == 0 and 1 in seen, "connected 0, then 1 again")
        finally:
            watcher.stop()
        readyz = [body for _, (status, body) in watcher.seen if not body["connected"]]
        assert readyz, f"/readyz never said not connected: {watcher.seen}"
        assert all(not body["ready"] and "the binlog reader is not connected to the source database" in body["reasons"]
                   for body in readyz), readyz
        assert all(status == 503 for _, (status, body) in watcher.seen if not body["connected"])
        scrape = run.scrape()
        assert scrape.value("dblog_streaming_reconnects_total") >= 1
        assert scrape.value("dblog_engine_restarts_total") == 0  # ridden through, not restarted
        write_changes(mariadb, database)
        eventually(lambda: run.scrape().value("dblog_changes_total", table=f"{database}.items", op="d") == 2,
                   timeout=60, message="the deletes after the outage counted")
        eventually(lambda: get(run.base + "/readyz")[0] == 200, timeout=30, message="ready again")
        assert run.scrape().value("dblog_engine_restarts_total") == 0
    finally:
        run.stop()
    assert run.error is None


def test_an_unreachable_database_is_not_ready_and_counts_restarts(mariadb, database, tmp_path):
    data = metrics_config(mariadb, database, tmp_path)
    data["source"]["port"] = free_port()  # nothing listens there
    run = SupervisorThread(data)
    try:
        eventually(lambda: run.scrape().value("dblog_engine_restarts_total") >= 1, timeout=30,
                   message="a restart by the supervisor")
        status, body = get_json(run.base + "/readyz")
        assert status == 503 and body["ready"] is False and body["connected"] is False
        assert any("not" in reason and "last error" in reason and "Can't connect" in reason
                   for reason in body["reasons"]), body
        scrape = run.scrape()
        assert scrape.value("dblog_streaming_connected") == 0
        assert get_json(run.base + "/healthz") == (200, {"status": "alive"})
    finally:
        run.stop()


def test_readiness_follows_the_lag_and_a_stopping_engine(mariadb, database, tmp_path):
    """An engine whose last transaction is older than http.ready_max_lag_seconds is not ready;
    a heartbeat (caught up) makes it ready again; from Engine.stop() on it is "stopping"."""
    make_tables(mariadb, database)
    # Heartbeats every 3 s: the lag set below stands until the next one.
    config = parse_config(metrics_config(mariadb, database, tmp_path, http={"ready_max_lag_seconds": 5},
                                         source={"reader_process": False, "heartbeat_seconds": 3}))
    engine = EngineThread(config)
    endpoint = serve(Metrics.of_engine(engine.engine, config.http.ready_max_lag_seconds), "127.0.0.1", 0)
    try:
        engine.wait_for("COMPLETED")
        engine.eventually(lambda: get(endpoint.url + "/readyz")[0] == 200, timeout=30, message="ready")
        stats = engine.engine.stats
        # as when the loop reads a transaction committed 42 s before
        stats.transaction = TransactionStart(Gtid.parse("0-1-1"), ts_ms=int((time.time() - 42) * 1000))
        status, body = get_json(endpoint.url + "/readyz")
        assert status == 503 and len(body["reasons"]) == 1, body
        assert body["reasons"][0].startswith("the stream is 4") and "behind the source" in body["reasons"][0]
        assert body["reasons"][0].endswith("(http.ready_max_lag_seconds = 5)")
        engine.eventually(lambda: get(endpoint.url + "/readyz")[0] == 200, timeout=30, message="ready after a heartbeat")
        engine.engine.stop()
        status, body = get_json(endpoint.url + "/readyz")
        assert status == 503 and "stopping" in body["reasons"], body
    finally:
        engine.stop()
        endpoint.close()
    assert engine.error is None


def test_iceberg_merge_durations_per_table(mariadb, database, tmp_path, spark):
    make_tables(mariadb, database)
    config = iceberg_config(mariadb, database, tmp_path, spark, source={"exclude": [f"{database}\\.skipped"]},
                            snapshot={"chunk_size": CHUNK})
    engine = EngineThread(config)
    endpoint = serve(Metrics.of_engine(engine.engine), "127.0.0.1", 0)
    try:
        engine.wait_for("COMPLETED", timeout=300)
        engine.until_caught_up(timeout=300)
        scrape = Scrape(endpoint.url)
    finally:
        endpoint.close()
    target = f"lake.{TableId(database, 'items')}"
    assert scrape.value("dblog_iceberg_merge_seconds_count", table=target) >= 1
    assert scrape.value("dblog_iceberg_merge_seconds_sum", table=target) > 0
    # commits run on pool threads (dblog.runtime.table_commits): still counted and timed
    commits = scrape.value("dblog_sink_commits_total")
    assert commits >= 1 and scrape.value("dblog_sink_commit_seconds_sum") > 0
    assert scrape.value("dblog_sink_commit_rows_sum") >= ITEMS
    assert scrape.value("dblog_changes_total", table=f"{database}.items", op="r") == ITEMS
