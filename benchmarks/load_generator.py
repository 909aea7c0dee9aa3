"""Concurrent writers in their own process, as an application's would be.

Run in-process, writer threads would take the engine's GIL and the measured engine would be
slower than any real one; so `LoadGenerator` starts `python -m benchmarks.load_generator`,
which runs `dblog.demo.workload.WriteLoad` (inserts, updates, deletes, delete-then-reinsert on
`orders`, balance updates on `customers`) plus one probe writer inserting `(id, written_at)`
rows into the probe table at a fixed rate, `written_at` being time.time() taken just before the
autocommit INSERT (with `beacon`, the INSERT and an UPDATE of `lag_beacon` to the same id and
time in one transaction). It writes until its standard input closes (the parent stops it, or dies),
then prints {"writes": …, "probes": …} as JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time

import pymysql

from benchmarks.dataset import BEACON, DATABASE, PROBES
from dblog.core.sql import quote_identifier as quote


class LoadGenerator:
    """The writer process: `start()`, then `stop()` returns {"writes": n, "probes": m}."""

    def __init__(self, port: int, rows: int, writers: int, rate: float | None, probe_rate: float,
                 beacon: bool = False) -> None:
        self.command = [
            sys.executable, "-m", "benchmarks.load_generator", "--port", str(port), "--rows", str(rows),
            "--writers", str(writers), "--rate", str(rate or 0), "--probe-rate", str(probe_rate),
            *(["--beacon"] if beacon else []),
        ]
        self._process: subprocess.Popen | None = None
        self.started_at: float | None = None  # wall clock

    def start(self) -> "LoadGenerator":
        self._process = subprocess.Popen(self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = self._process.stdout.readline()
        if ready.strip() != "ready":
            self.kill()
            raise RuntimeError(f"the load generator did not start: {ready!r}")
        self.started_at = time.time()
        return self

    def stop(self, timeout: float = 60) -> dict:
        process = self._process
        assert process is not None
        try:
            out, _ = process.communicate(input="", timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        self._process = None
        if process.returncode != 0:
            raise RuntimeError(f"the load generator failed (exit {process.returncode})")
        return json.loads(out.strip().splitlines()[-1])

    def kill(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait(10)

    def __enter__(self) -> "LoadGenerator":
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.kill()


class ProbeWriter:
    def __init__(self, connect, rate: float, beacon: bool = False) -> None:
        self._connect = connect
        self._beacon = beacon
        self._interval = 1.0 / rate if rate > 0 else None
        self.written = 0
        self.errors: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, daemon=True)

    def start(self) -> "ProbeWriter":
        if self._interval is not None:
            self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        if self.errors:
            raise self.errors[0]
        return self.written

    def _write(self) -> None:
        sql = f"INSERT INTO {quote(PROBES.db)}.{quote(PROBES.table)} (id, written_at) VALUES (%s, %s)"
        beacon = f"UPDATE {quote(BEACON.db)}.{quote(BEACON.table)} SET probe_id = %s, written_at = %s WHERE id = 1"
        try:
            with self._connect() as connection, connection.cursor() as cursor:
                cursor.execute(f"SELECT COALESCE(MAX(id), 0) FROM {quote(PROBES.db)}.{quote(PROBES.table)}")
                next_id = cursor.fetchone()[0] + 1
                due = time.monotonic()
                while not self._stop.is_set():
                    written_at = time.time()
                    if self._beacon:
                        connection.begin()
                        cursor.execute(sql, (next_id, written_at))
                        cursor.execute(beacon, (next_id, written_at))
                        connection.commit()
                    else:
                        cursor.execute(sql, (next_id, written_at))
                    next_id += 1
                    self.written += 1
                    due += self._interval
                    self._stop.wait(max(0.0, due - time.monotonic()))
        except BaseException as error:
            self.errors.append(error)


def main(argv: list[str] | None = None) -> int:
    from dblog.demo.workload import WriteLoad

    parser = argparse.ArgumentParser(prog="python -m benchmarks.load_generator")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--rate", type=float, default=0, help="writes per second per writer (0: full speed)")
    parser.add_argument("--probe-rate", type=float, default=20)
    parser.add_argument("--beacon", action="store_true", help="each probe also updates lag_beacon")
    args = parser.parse_args(argv)

    def connect() -> pymysql.Connection:
        return pymysql.connect(host="127.0.0.1", port=args.port, user="root", password="", database=DATABASE,
                               charset="utf8mb4", autocommit=True)

    load = WriteLoad(connect, DATABASE, args.rows, args.writers, rate=args.rate or None)
    probes = ProbeWriter(connect, args.probe_rate, args.beacon)
    load.start()
    probes.start()
    print("ready", flush=True)
    sys.stdin.read()  # until the parent closes it (or dies)
    writes = load.stop()
    written = probes.stop()
    print(json.dumps({"writes": writes, "probes": written}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
