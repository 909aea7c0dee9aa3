"""dblog's metrics under the names Debezium's dashboards query (`http.debezium_metrics`, on by default).

Debezium's MySQL connector publishes JMX MBeans (`debezium.mysql:type=connector-metrics,
context=streaming|snapshot,server=<topic.prefix>`); Prometheus sees them through the JMX
exporter, whose configuration in Debezium's monitoring example (and in most deployments copied
from it) names each attribute `debezium_metrics_<Attribute>` with the labels `plugin` (`mysql`),
`name` (the server: the topic prefix), `context`, and `table` for `RowsScanned` (a map keyed by
table). Dashboards built on those, Debezium's own Grafana dashboards among them, select on
these names and labels.

`debezium_families` derives those series from dblog's own at scrape time, one rule per series
in `SERIES`: a dblog sample, optionally filtered by a label, summed, scaled. The same thing a
Prometheus recording rule would do, without one to install, and with the same values as the
dblog series a scrape shows next to it. `name` is dblog's connector name (`name` in the config,
Debezium's `topic.prefix`). Attributes dblog has no equivalent for are not served (a dashboard
panel stays empty rather than show a made-up value): docs/operations.md lists them with the
reason. Types are `untyped`, as the JMX exporter writes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from prometheus_client.core import Metric, UnknownMetricFamily

PREFIX = "debezium_metrics_"
PLUGIN = "mysql"


@dataclass(frozen=True)
class Series:
    """`debezium_metrics_<attribute>{context}` := `scale` × the sum of `source`'s samples whose
    labels include `where` (a label's allowed values), one series per value of `by` if given;
    `value_label`: the number is that label's value instead (e.g. the binlog position of an
    info metric); `constant`: this number, while `source` is served. A sum over no sample is 0 when `zero` (counters), else the series is absent."""

    attribute: str
    context: str
    source: str  # a sample name of dblog's, as exposed (counters with `_total`)
    where: dict[str, tuple[str, ...]] = field(default_factory=dict)
    by: str | None = None
    scale: float = 1.0
    zero: bool = False
    value_label: str | None = None
    constant: float | None = None  # the value, whenever `source` has a sample


SERIES: tuple[Series, ...] = (
    # streaming: the binlog reader
    Series("MilliSecondsBehindSource", "streaming", "dblog_streaming_lag_seconds", scale=1000),
    Series("MilliSecondsSinceLastEvent", "streaming", "dblog_streaming_seconds_since_last_event", scale=1000),
    Series("TotalNumberOfEventsSeen", "streaming", "dblog_changes_total", {"op": ("c", "u", "d")}, zero=True),
    Series("TotalNumberOfCreateEventsSeen", "streaming", "dblog_changes_total", {"op": ("c",)}, zero=True),
    Series("TotalNumberOfUpdateEventsSeen", "streaming", "dblog_changes_total", {"op": ("u",)}, zero=True),
    Series("TotalNumberOfDeleteEventsSeen", "streaming", "dblog_changes_total", {"op": ("d",)}, zero=True),
    Series("NumberOfCommittedTransactions", "streaming", "dblog_streaming_transactions_total"),
    Series("NumberOfEventsFiltered", "streaming", "dblog_streaming_events_filtered_total"),
    Series("Connected", "streaming", "dblog_streaming_connected"),
    Series("NumberOfDisconnects", "streaming", "dblog_streaming_reconnects_total"),
    Series("BinlogPosition", "streaming", "dblog_streaming_binlog_info", value_label="pos"),
    # 1 even when dblog reads by binlog file and position (source.position_mode = "file")
    Series("IsGtidModeEnabled", "streaming", "dblog_streaming_connected", constant=1.0),
    # snapshot: incremental snapshots (Debezium's initial and incremental ones share these MBeans)
    Series("SnapshotRunning", "snapshot", "dblog_snapshot_running"),
    Series("SnapshotPaused", "snapshot", "dblog_snapshot_paused"),
    Series("SnapshotCompleted", "snapshot", "dblog_snapshot_completed"),
    Series("SnapshotAborted", "snapshot", "dblog_snapshot_aborted"),
    Series("SnapshotDurationInSeconds", "snapshot", "dblog_snapshot_duration_seconds"),
    Series("TotalTableCount", "snapshot", "dblog_snapshot_tables"),
    Series("RemainingTableCount", "snapshot", "dblog_snapshot_tables_remaining"),
    Series("TotalNumberOfEventsSeen", "snapshot", "dblog_changes_total", {"op": ("r",)}, zero=True),
    Series("RowsScanned", "snapshot", "dblog_snapshot_rows_scanned", by="table"),
)

def debezium_families(families: Iterable[Metric], name: str) -> Iterator[Metric]:
    """The `debezium_metrics_*` families, from dblog's `families` of one scrape."""
    samples: dict[str, list] = {}
    for family in families:
        for sample in family.samples:
            samples.setdefault(sample.name, []).append(sample)
    built: dict[str, UnknownMetricFamily] = {}
    for series in SERIES:
        metric = PREFIX + series.attribute
        family = built.get(metric)
        if family is None:
            family = built[metric] = UnknownMetricFamily(
                metric, f"Debezium's {series.attribute} (JMX exporter name), from dblog's {series.source}",
                labels=["plugin", "name", "context"] + ([series.by] if series.by else []))
        chosen = [s for s in samples.get(series.source, ())
                  if all(s.labels.get(label) in values for label, values in series.where.items())]
        if series.by is not None:
            for sample in chosen:
                family.add_metric([PLUGIN, name, series.context, sample.labels[series.by]], sample.value * series.scale)
            continue
        if not chosen and not series.zero:
            continue
        if series.constant is not None:
            value = series.constant
        elif series.value_label is not None:
            text = chosen[0].labels.get(series.value_label, "")
            if not text:
                continue
            value = float(text) * series.scale
        else:
            value = sum(sample.value for sample in chosen) * series.scale
        family.add_metric([PLUGIN, name, series.context], value)
    yield from built.values()
