"""What every benchmark section shares: the server, the loaded tables, the options, a scratch
directory, the results so far, and the physical limits (each measured once, on first use)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.dataset import BenchTable, count_rows
from benchmarks.engine_run import engine_config
from benchmarks.figures import Figure, Results, rate
from benchmarks.physical_limits import keyset_scan
from benchmarks.report import print_figure
from dblog.demo.localstack import LocalMariaDB
from lab.spark_cluster import LocalSparkCluster


@dataclass
class BenchContext:
    db: LocalMariaDB
    tables: dict[str, BenchTable]
    options: argparse.Namespace
    workdir: Path
    results: Results
    _scanned: set[str] = field(default_factory=set)
    _cluster: LocalSparkCluster | None = None  # --spark-master=cluster: started once, on first use

    def spark_master(self, cores: int) -> tuple[str, dict[str, str]]:
        """The `[spark]` master and settings for an engine whose Spark tasks may use `cores`
        cores: `local[cores]`, or with --spark-master=cluster the standalone cluster
        (`lab.spark_cluster`: a master and two workers on this machine) with as many
        1-core executors."""
        if self.options.spark_master == "local":
            return f"local[{cores}]", {}
        if self._cluster is None:
            self._cluster = LocalSparkCluster().start()
        return self._cluster.master_url, {"spark.cores.max": str(cores), "spark.executor.cores": "1"}

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.stop()
            self._cluster = None

    def report(self, figure: Figure) -> Figure:
        self.results.add(figure)
        print_figure(figure, self.results)
        return figure

    def engine_config(self, name: str, tables: list, sink: dict[str, Any], **sections: dict[str, Any]) -> dict[str, Any]:
        """An engine's configuration for this run: its chunk size and `--reader-process`."""
        config = engine_config(self.db, self.workdir, name, tables, sink, self.options.chunk_size, **sections)
        config["source"]["reader_process"] = {"on": True, "off": False}.get(self.options.reader_process, "auto")
        return config

    def keyset_scan_limit(self, name: str, again: bool = False) -> str:
        """The key of the raw keyset scan figure of table `name` ("orders"…), measured now if
        it was not yet; `again`: measured once more, and the fastest scan is the limit. On this
        shared machine one scan's rate drifts by a third over a day: a figure measured minutes
        after the first scan is divided by the faster of one before and one beside it."""
        key = f"limit.scan.{name}"
        known = self.results.get(key)
        if known is not None and not again:
            return key
        table = self.tables[name]
        expected = count_rows(self.db, table.table)
        rows, watch = keyset_scan(self.db, table, self.options.chunk_size)
        scans = [*(known.detail["scans_rows_per_second"] if known else []), round(rate(rows, watch.wall))]
        figure = Figure(
            key, "limits", f"raw keyset scan, pymysql ({name}, {table.key_kind} key)"
                           + (f", fastest of {len(scans)}" if len(scans) > 1 else ""),
            rate(rows, watch.wall), "rows/s",
            check=f"{rows:,} rows read, table has {expected:,}", check_ok=rows == expected,
            detail={**watch.detail(rows), "chunk_size": self.options.chunk_size, "key": table.key,
                    "scans_rows_per_second": scans},
        )
        if known is None:
            self.report(figure)
        elif figure.value > known.value:
            self.results.replace(figure)
            print_figure(figure, self.results)
        else:
            known.detail["scans_rows_per_second"] = scans
            known.label = figure.label
        return key
