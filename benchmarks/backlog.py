"""`scale` part `backlog` (issue 29, item 3): a restart after a long outage.

A database `backlog` gets `accounts` (`--backlog-accounts` rows, the table a snapshot reads) and
an empty `events`. A `dblog run` process capturing it starts, commits its position and stops:
the outage. Then a stored procedure writes `--backlog-transactions` transactions server-side
(no client round trip per transaction, so the backlog is written in a fraction of the time it
takes to read): in turn an UPDATE of an account, an INSERT of an event, an INSERT of an event
with an UPDATE of its account, a DELETE of the event inserted two transactions before. Half-way,
DDL: `ALTER TABLE accounts ADD COLUMN note` (written from then on) and `CREATE TABLE added`
(an insert every 16th transaction from then on). Then, over the very same binlog range:

- the decoder alone, the baseline: dblog's `BinlogSource` iterated in this process from the
  range's start to its end, as the `oltp` section measures it (first event to last);
- catch-up: `dblog run` restarted from the committed position (JSON-lines sink, the engine's
  defaults, reader process as `--reader-process`) until its stream position holds the range's
  end; the rate runs from the first transaction the engine counted to the end, both seen in
  its `/metrics` scraped once a second, with the RSS (VmRSS) and CPU seconds of the engine
  process and of its binlog reader process read from `/proc` every 0.25 s: the peak RSS, and
  how the RSS of the last quarter of the catch-up compares with the first (flat or growing
  with the backlog), and rows per CPU-second against the decoder's;
- the same catch-up in the other mode of `source.reader_process` (in one process when the
  first ran with a reader process, as it does by default on two cores; and the reverse);
- with `--backlog-kafka`, the same catch-up into the Kafka sink (a private Apache Kafka broker);
- catch-up with a snapshot: the same restart by a second process whose signal table is
  `backlog.dblog_signal`, into which the backlog wrote an `execute-snapshot` of `accounts` in
  its 1,000th transaction. The engine meets the signal right after it starts: its first chunk
  is read at the server's present position, far ahead of the reader, and its window must stay
  open until the reader has caught up. Measured: the catch-up rate, the windows' open times
  (`dblog_snapshot_window_seconds`), chunks and rows, when the snapshot completed against
  when the reader caught up, and the RSS as above; checked: every change counted, and the
  replay of `accounts` from the sink equals the table.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client.parser import text_string_to_metric_families

from benchmarks.dataset import BinlogRange, executed_gtids
from benchmarks.figures import Figure, rate
from benchmarks.oltp import dblog_decode
from benchmarks.scale import DblogProcess
from dblog.core.events import TableId
from dblog.core.gtid import GtidSet
from dblog.demo.localstack import LocalMariaDB
from dblog.demo.verify import Comparison, compare_with_source
from dblog.mysql.binlog.process import reader_process_wanted
from dblog.mysql.source_connection import SourceConnection
from dblog.sinks.envelope import materialize
from dblog.sinks.jsonl.sink import read_json_lines

if TYPE_CHECKING:
    from benchmarks.context import BenchContext

DATABASE = "backlog"
ACCOUNTS = TableId(DATABASE, "accounts")
EVENTS = TableId(DATABASE, "events")
ADDED = TableId(DATABASE, "added")  # created half-way through the backlog
SIGNALS = TableId(DATABASE, "dblog_signal")  # read by the snapshot run only
NO_SIGNALS = TableId(DATABASE, "no_signals")  # the plain catch-up's signal table: never written
SIGNAL_AT = 1_000  # the backlog's transaction that writes the execute-snapshot signal
SAMPLE_SECONDS = 0.25  # RSS and CPU, from /proc: nothing asked of the engine
SCRAPE_SECONDS = 1.0  # /metrics once the stream runs (a scrape costs the engine ~2 ms of its thread)
_KINDS = 4  # the procedure's transaction kinds, in turn


def _procedure(name: str, after_ddl: bool) -> str:
    """`name(first, count, accounts)`: transactions `first` … `first + count - 1`, each of the
    kind `i MOD 4` (see the module's docstring); after the DDL the account's `note` is written
    and every 16th transaction also inserts into `added`."""
    note = ", note = CONCAT('n', i)" if after_ddl else ""
    added = ("IF i MOD 16 = 5 THEN INSERT INTO added (id, label) VALUES (i, CONCAT('added ', i)); END IF;"
             if after_ddl else "")
    return f"""
CREATE PROCEDURE {name}(IN first BIGINT, IN count BIGINT, IN accounts INT)
BEGIN
  DECLARE i BIGINT DEFAULT first;
  WHILE i < first + count DO
    START TRANSACTION;
    CASE i MOD {_KINDS}
      WHEN 0 THEN UPDATE accounts SET balance = balance + 1, updated = NOW(){note} WHERE id = 1 + (i * 7919) MOD accounts;
      WHEN 1 THEN INSERT INTO events (id, account, kind, amount) VALUES (i, 1 + i MOD accounts, 'deposit', i MOD 1000);
      WHEN 2 THEN
        INSERT INTO events (id, account, kind, amount) VALUES (i, 1 + i MOD accounts, 'withdrawal', i MOD 500);
        UPDATE accounts SET balance = balance - i MOD 500{note} WHERE id = 1 + i MOD accounts;
      ELSE DELETE FROM events WHERE id = i - 2;
    END CASE;
    IF i = {SIGNAL_AT} THEN
      INSERT INTO dblog_signal (id, type, data) VALUES ('backlog-snapshot', 'execute-snapshot',
        '{{"data-collections": ["backlog\\\\\\\\.accounts"], "type": "incremental"}}');
    END IF;
    {added}
    COMMIT;
    SET i = i + 1;
  END WHILE;
END"""


def expected_changes(first: int, count: int, after_ddl: bool) -> dict[str, int]:
    """Row changes per op of the captured tables that `_procedure` writes for transactions
    `first` … `first + count - 1` (the signal row apart: its table is captured too, counted here)."""
    ops = {"c": 0, "u": 0, "d": 0}
    for i in range(first, first + count):
        kind = i % _KINDS
        if kind == 0:
            ops["u"] += 1
        elif kind == 1:
            ops["c"] += 1
        elif kind == 2:
            ops["c"] += 1
            ops["u"] += 1
        else:
            ops["d"] += 1
        ops["c"] += (i == SIGNAL_AT) + (after_ddl and i % 16 == 5)
    return ops


def create_database(db: LocalMariaDB, accounts: int) -> None:
    with db.connect() as connection, connection.cursor() as cursor:
        cursor.execute("SET SESSION sql_log_bin = 0")
        cursor.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
        cursor.execute(f"CREATE DATABASE {DATABASE}")
        cursor.execute(f"USE {DATABASE}")
        cursor.execute("CREATE TABLE accounts (id INT NOT NULL PRIMARY KEY, name VARCHAR(32) NOT NULL, "
                       "balance DECIMAL(14,2) NOT NULL, updated DATETIME NOT NULL)")
        for first in range(1, accounts + 1, 200_000):
            cursor.execute("INSERT INTO accounts SELECT seq, CONCAT('account ', seq), seq MOD 10000, "
                           f"TIMESTAMP'2026-01-01 00:00:00' + INTERVAL seq SECOND FROM seq_{first}_to_"
                           f"{min(first + 199_999, accounts)}")
            connection.commit()
        cursor.execute("CREATE TABLE events (id BIGINT NOT NULL PRIMARY KEY, account INT NOT NULL, "
                       "kind VARCHAR(16) NOT NULL, amount DECIMAL(10,2) NOT NULL, "
                       "at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))")
        for table in (SIGNALS, NO_SIGNALS):
            cursor.execute(f"CREATE TABLE {table.table} (id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                           "data TEXT NULL)")
        cursor.execute(_procedure("write_before", after_ddl=False))
        connection.commit()


def write_backlog(db: LocalMariaDB, transactions: int, accounts: int) -> tuple[dict[str, int], dict[str, float]]:
    """The backlog, DDL half-way; returns the row changes per op and the seconds each part took."""
    half = transactions // 2
    seconds: dict[str, float] = {}
    with db.connect(DATABASE) as connection, connection.cursor() as cursor:
        started = time.perf_counter()
        cursor.execute("CALL write_before(%s, %s, %s)", (1, half, accounts))
        seconds["first_half"] = time.perf_counter() - started
        started = time.perf_counter()
        cursor.execute("ALTER TABLE accounts ADD COLUMN note VARCHAR(32) NULL")
        cursor.execute("CREATE TABLE added (id BIGINT NOT NULL PRIMARY KEY, label VARCHAR(40) NOT NULL)")
        seconds["ddl"] = time.perf_counter() - started
        with db.connect(DATABASE) as unlogged, unlogged.cursor() as setup:
            setup.execute("SET SESSION sql_log_bin = 0")
            setup.execute(_procedure("write_after", after_ddl=True))
        started = time.perf_counter()
        cursor.execute("CALL write_after(%s, %s, %s)", (1 + half, transactions - half, accounts))
        seconds["second_half"] = time.perf_counter() - started
    ops = expected_changes(1, half, False)
    for op, count in expected_changes(1 + half, transactions - half, True).items():
        ops[op] += count
    return ops, seconds


# --- following a `dblog run` process through its catch-up ------------------------------------


def _scrape(engine: DblogProcess) -> dict[str, Any]:
    """What the catch-up is followed by, from one `/metrics` scrape."""
    text = engine.metrics()["text"]
    found: dict[str, Any] = {"changes": {}, "window_buckets": {}}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name, labels, value = sample.name, sample.labels, sample.value
            if name == "dblog_streaming_transactions_total":
                found["transactions"] = int(value)
            elif name == "dblog_changes_total" and labels.get("table", "").startswith(f"{DATABASE}."):
                found["changes"][labels["op"]] = found["changes"].get(labels["op"], 0) + int(value)
            elif name == "dblog_streaming_binlog_info":
                found["gtid_set"] = labels.get("gtid_set", "")
            elif name == "dblog_snapshot_window_seconds_bucket":
                found["window_buckets"][labels["le"]] = int(value)
            elif name in ("dblog_snapshot_window_seconds_sum", "dblog_snapshot_window_seconds_count",
                          "dblog_snapshot_completed", "dblog_snapshot_chunks", "dblog_snapshot_rows_scanned"):
                found[name] = value
    return found


def follow_catch_up(engine: DblogProcess, end: GtidSet, timeout: float,
                    until_snapshot: bool = False) -> dict[str, Any]:
    """Spawn `engine` and sample it until its stream holds `end` (and, `until_snapshot`, its
    snapshot completed): per sample the time since spawning, VmRSS (KiB) and CPU seconds of
    both processes, every `SAMPLE_SECONDS`; and the `/metrics` scrape, every `SCRAPE_SECONDS`
    once the stream has started (as often as the samples before). `scrapes`: the samples with
    a scrape."""
    samples: list[dict[str, Any]] = []
    scrapes: list[dict[str, Any]] = []
    engine.spawn()
    deadline = time.monotonic() + timeout
    first_event = caught_up = snapshot_done = None
    next_scrape = 0.0
    while True:
        time.sleep(SAMPLE_SECONDS)
        if engine.process.poll() is not None:
            raise RuntimeError(f"dblog run exited with {engine.process.returncode}: {engine.log.read_text()[-800:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"dblog run did not catch up within {timeout:.0f} s")
        at = time.perf_counter() - engine.started_at
        sample = {"seconds": at, "rss": engine.current_kib(), "cpu": engine.cpu_seconds()}
        samples.append(sample)
        if at < next_scrape:
            continue
        try:
            scraped = _scrape(engine)
        except RuntimeError:  # the HTTP endpoint is not up yet
            continue
        sample.update(scraped)
        scrapes.append(sample)
        if first_event is not None:
            next_scrape = at + SCRAPE_SECONDS
        if first_event is None and scraped.get("transactions"):
            first_event = at
        if caught_up is None and scraped.get("gtid_set") and end.issubset(GtidSet.parse(scraped["gtid_set"], "mariadb")):
            caught_up = at
        if snapshot_done is None and scraped.get("dblog_snapshot_completed") == 1.0:
            snapshot_done = at
        if caught_up is not None and first_event is None:
            raise RuntimeError("dblog run was caught up at its first scrape: nothing to time (its offsets were "
                               "already past the backlog, or the backlog is too small)")
        if caught_up is not None and (not until_snapshot or snapshot_done is not None):
            break
    return {"samples": samples, "scrapes": scrapes, "first_event": first_event, "caught_up": caught_up, "snapshot_done": snapshot_done,
            "peaks": engine.peaks_kib()}


def rss_profile(followed: dict[str, Any]) -> dict[str, Any]:
    """Engine + reader VmRSS over the catch-up (from its first event to the end): peak, mean of
    its first and last quarters, and 12 points of the curve (MiB)."""
    start, end = followed["first_event"], followed["caught_up"]
    during = [s for s in followed["samples"] if start <= s["seconds"] <= end] or followed["samples"][-1:]
    totals = [sum(s["rss"].values()) / 1024 for s in during]
    quarter = max(1, len(totals) // 4)
    step = max(1, len(during) // 12)
    peak = max(range(len(totals)), key=totals.__getitem__)
    return {
        "peak_mib": round(totals[peak], 1),
        "peak_at_seconds": round(during[peak]["seconds"] - start, 1),  # from the first event
        "end_mib": round(totals[-1], 1),
        "first_quarter_mean_mib": round(sum(totals[:quarter]) / quarter, 1),
        "last_quarter_mean_mib": round(sum(totals[-quarter:]) / quarter, 1),
        "engine_peak_mib": round(max(s["rss"]["engine"] for s in during) / 1024, 1),
        "reader_peak_mib": round(max(s["rss"].get("reader", 0) for s in during) / 1024, 1),
        "curve_mib": [[round(s["seconds"] - start, 1), round(sum(s["rss"].values()) / 1024, 1)]
                      for s in during[::step]],
        "samples": len(during),
    }


def _check_accounts(db: LocalMariaDB, sink_path) -> Comparison:
    """The sink's records of `accounts`, replayed, against the table (the records of the other
    tables are not kept: the sink holds the whole backlog)."""
    records = (record for record in read_json_lines(sink_path)
               if (record["value"].get("source") or {}).get("table") == ACCOUNTS.table)
    replayed = materialize(records).get(str(ACCOUNTS), {})
    with SourceConnection(db.connect) as source:
        return compare_with_source(source, [ACCOUNTS], lambda table: replayed, Comparison())


# --- the part ----------------------------------------------------------------------------------


def measure_backlog(ctx: BenchContext) -> None:
    options = ctx.options
    transactions, accounts = options.backlog_transactions, options.backlog_accounts
    print(f"  backlog: {transactions:,} transactions, accounts of {accounts:,} rows", flush=True)
    create_database(ctx.db, accounts)
    include = [rf"{DATABASE}\..*"]
    plain = DblogProcess(ctx, "backlog-catch-up", include, signals=NO_SIGNALS)
    try:
        plain.start()
    finally:
        plain.stop()  # graceful: its position committed, the outage begins
    with_snapshot = DblogProcess(ctx, "backlog-snapshot", include, signals=SIGNALS)
    # The other mode of `source.reader_process` than the first run's, on the same backlog.
    reader_first = {"on": True, "off": False}.get(ctx.options.reader_process, reader_process_wanted("auto"))
    other_mode = DblogProcess(ctx, "backlog-other-mode", include, signals=NO_SIGNALS, reader_process=not reader_first)
    outage = ctx.workdir / "backlog-outage-offsets.json"  # the position every restart starts from
    shutil.copy(plain.offsets, outage)
    for restarted in (with_snapshot, other_mode):
        shutil.copy(outage, restarted.offsets)
    start = executed_gtids(ctx.db)
    ops, written = write_backlog(ctx.db, transactions, accounts)
    binlog = BinlogRange(start, executed_gtids(ctx.db))
    end = GtidSet.parse(binlog.end, "mariadb")
    changes = sum(ops.values())
    common = {"transactions": transactions, "accounts_rows": accounts, "changes": ops,
              "write_seconds": {key: round(value, 1) for key, value in written.items()}}
    print(f"  written in {sum(written.values()):.1f} s: {changes:,} row changes, binlog {binlog.start} → {binlog.end}",
          flush=True)

    decoded_ops, decoded_transactions, _, watch = dblog_decode(ctx.db, binlog, [ACCOUNTS, EVENTS, ADDED, SIGNALS])
    decoded = sum(decoded_ops.values())
    baseline = ctx.report(Figure(
        "scale.backlog.decoder", "scale",
        f"dblog's binlog decoder alone over a backlog of {transactions:,} transactions (DDL half-way)",
        rate(decoded, watch.wall), "rows/s",
        check=f"{decoded:,} row changes decoded, {changes:,} written", check_ok=decoded_ops == ops,
        detail={**common, **watch.detail(decoded), "transactions_decoded": decoded_transactions,
                "transactions_per_second": round(rate(decoded_transactions, watch.wall))}))

    timeout = 600 + changes / 2_000
    try:
        followed = follow_catch_up(plain, end, timeout)
    finally:
        plain.stop()
    catch_up = _catch_up_figure(ctx, "scale.backlog.catch-up", f"`dblog run` catching up on that backlog after a "
                                "restart, JSON-lines sink, first → last transaction", followed, ops, baseline, common)
    plain.sink_path.unlink(missing_ok=True)
    try:
        followed = follow_catch_up(other_mode, end, timeout)
    finally:
        other_mode.stop()
    mode = "in one process (`source.reader_process = false`)" if reader_first else "with a binlog reader process"
    _catch_up_figure(ctx, "scale.backlog.catch-up-other-mode", f"the same catch-up {mode}", followed, ops,
                     baseline, common)
    other_mode.sink_path.unlink(missing_ok=True)
    if options.backlog_kafka:
        _kafka_catch_up(ctx, outage, include, end, timeout, ops, baseline, catch_up, common)
    profile = catch_up.detail["rss"]
    ctx.report(Figure(
        "scale.backlog.rss", "scale", "peak RSS of `dblog run` over that catch-up: engine + reader process",
        profile["peak_mib"], "MiB",
        detail={**profile, "last_vs_first_quarter": round(profile["last_quarter_mean_mib"]
                                                          / profile["first_quarter_mean_mib"], 3)}))

    try:
        followed = follow_catch_up(with_snapshot, end, timeout, until_snapshot=True)
    finally:
        with_snapshot.stop()
    snapshot = _catch_up_figure(ctx, "scale.backlog.catch-up-snapshot",
                                f"the same catch-up with a snapshot of `accounts` signalled in its {SIGNAL_AT:,}th "
                                "transaction", followed, ops, catch_up, common, snapshot=True)
    comparison = _check_accounts(ctx.db, with_snapshot.sink_path)
    last = followed["scrapes"][-1]
    windows = int(last.get("dblog_snapshot_window_seconds_count", 0))
    scanned = int(last["changes"].get("r", 0))
    ctx.report(Figure(
        "scale.backlog.snapshot.window", "scale",
        "that snapshot: its longest window (chunk read → the reader past its high watermark)",
        _longest_window(followed["scrapes"]), "s",
        check=comparison.summary(), check_ok=comparison.equal,
        detail={"windows": windows,
                "window_seconds_sum": round(last.get("dblog_snapshot_window_seconds_sum", 0.0), 2),
                "window_buckets": last["window_buckets"], "snapshot_rows_emitted": scanned,
                "catch_up_seconds": round(followed["caught_up"] - followed["first_event"], 2),
                "snapshot_completed_after_caught_up_seconds": round(followed["snapshot_done"]
                                                                    - followed["caught_up"], 2)}))
    ctx.report(Figure(
        "scale.backlog.snapshot.rss", "scale", "peak RSS of `dblog run` over that catch-up and snapshot",
        snapshot.detail["rss"]["peak_mib"], "MiB", limit="scale.backlog.rss", detail=snapshot.detail["rss"]))
    with_snapshot.sink_path.unlink(missing_ok=True)


def _kafka_catch_up(ctx: BenchContext, outage: Path, include: list[str], end: GtidSet, timeout: float,
                    ops: dict[str, int], baseline: Figure, jsonl: Figure, common: dict[str, Any]) -> None:
    """`--backlog-kafka`: the same catch-up into the Kafka sink, a private Apache Kafka broker
    on this machine; the end is the engine's position, each commit waiting for every
    record it covers to be acknowledged."""
    from lab.localbroker import LocalBroker  # the `lab` extra: only with --backlog-kafka

    with LocalBroker() as broker:
        engine = DblogProcess(ctx, "backlog-kafka", include, signals=NO_SIGNALS, kafka_bootstrap=broker.bootstrap)
        shutil.copy(outage, engine.offsets)
        try:
            followed = follow_catch_up(engine, end, timeout)
        finally:
            engine.stop()
    figure = _catch_up_figure(ctx, "scale.backlog.catch-up-kafka", "the same catch-up into the Kafka sink",
                              followed, ops, baseline, common)
    figure.detail["x_jsonl_catch_up"] = round(figure.value / jsonl.value, 3)


def _longest_window(scrapes: list[dict[str, Any]]) -> float:
    """The longest window, from the window-seconds histogram's sum scraped every second: the
    largest growth of the sum between two scrapes (exact where one window closed between them,
    else the windows closed meanwhile together: a bound)."""
    sums = [scrape.get("dblog_snapshot_window_seconds_sum", 0.0) for scrape in scrapes]
    return round(max((after - before for before, after in zip(sums, sums[1:])), default=0.0), 2)


def _catch_up_figure(ctx: BenchContext, key: str, label: str, followed: dict[str, Any], ops: dict[str, int],
                     baseline: Figure, common: dict[str, Any], snapshot: bool = False) -> Figure:
    last = followed["scrapes"][-1]
    streamed = {op: last["changes"].get(op, 0) for op in ("c", "u", "d")}
    if snapshot:  # the engine reading the signal table takes its row as a signal, not a change
        ops = {**ops, "c": ops["c"] - 1}
    seconds = followed["caught_up"] - followed["first_event"]
    changes = sum(ops.values())
    at_first = next(s for s in followed["samples"] if s["seconds"] >= followed["first_event"])
    at_end = next(s for s in followed["samples"] if s["seconds"] >= followed["caught_up"])
    cpu = {process: round(at_end["cpu"].get(process, 0.0) - at_first["cpu"].get(process, 0.0), 2)
           for process in at_end["cpu"]}
    transactions = last.get("transactions", 0)
    return ctx.report(Figure(
        key, "scale", label, rate(changes, seconds), "rows/s", limit=baseline.key,
        check=f"{sum(streamed.values()):,} changes streamed ({streamed}), {changes:,} written ({ops})",
        check_ok=streamed == ops,
        detail={**common, "reader_process": "reader" in at_end["cpu"], "seconds": round(seconds, 2), "transactions_counted": transactions,
                "transactions_per_second": round(rate(transactions, seconds)),
                "start_to_first_event_seconds": round(followed["first_event"], 2),
                "cpu_seconds": cpu, "rows_per_cpu_second": {process: round(changes / seconds_used)
                                                            for process, seconds_used in cpu.items() if seconds_used},
                # Against the decoder's rows per CPU-second: what the machine's other load does not move.
                "rows_per_cpu_second_all": round(changes / sum(cpu.values())) if sum(cpu.values()) else None,
                "snapshot_rows": int(last["changes"].get("r", 0)) if snapshot else None,
                "rss": rss_profile(followed)}))
