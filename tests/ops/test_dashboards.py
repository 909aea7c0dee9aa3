"""The dashboards and alerts of examples/monitoring/, and the Debezium-named series, against a
running engine.

`dblog run`'s supervisor with the endpoint `dblog run` serves (`Metrics.of_supervisor`) on the
private MariaDB: a snapshot held at its second chunk while /metrics is scraped (what a
dashboard shows during a snapshot), then streaming, then a second scrape. Every metric selector
of every PromQL expression of the dashboard (panels, annotations, template variables) and of
every rule file in examples/monitoring/ is parsed (promql-parser: Prometheus' grammar, in
Rust) and must match a series of those scrapes, label matchers included; nothing lists the
metric names by hand. The rule files are checked as Prometheus loads them: by `promtool check
rules` and their unit tests by `promtool test rules` (Debian's promtool, tests/support/promtool.py),
and by their structure here. The Debezium names (docs/operations.md, "Debezium's metric names")
are read from the docs' table and must be served with the JMX exporter's labels, and with the
values the run makes them.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml
import promql_parser
from support import eventually, hold_chunk_read
from support.harness import SupervisorInThread, config_data
from support.metrics_workload import CHUNK, ITEMS, Scrape, make_items, write_item_changes
from support.promtool import promtool

from dblog.core.events import TableId
from dblog.runtime.debezium_metrics import PLUGIN, PREFIX, SERIES
from dblog.runtime.http_endpoint import serve
from dblog.runtime.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "examples" / "monitoring"
DASHBOARDS = sorted(MONITORING.glob("*dashboard*.json"))
RULE_FILES = sorted(path for path in MONITORING.glob("*.yml") if not path.name.endswith(".test.yml"))
RULE_TESTS = sorted(MONITORING.glob("*.test.yml"))
OPERATIONS = ROOT / "docs" / "operations.md"

# Series Prometheus makes itself for every target, not found in /metrics: `up` (1 when the
# scrape succeeded). `job` and `instance` are the labels it adds to every series it scrapes.
PROMETHEUS_SERIES = {"up"}
PROMETHEUS_LABELS = {"job", "instance"}
# Grafana's built-in interval variables, as Grafana replaces them before sending a query
GRAFANA_INTERVALS = {"$__rate_interval": "1m", "$__interval": "30s", "$__range": "6h"}


# --- reading the files -------------------------------------------------------------------------


def dashboard_queries(path: Path) -> list[str]:
    """Every PromQL expression of a Grafana dashboard: panel targets (rows' panels too) and
    annotations (`expr`), and template variables' queries (`label_values(selector, label)`:
    the selector)."""
    found: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "expr" and isinstance(value, str):
                    found.append(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    dashboard = json.loads(path.read_text())
    walk(dashboard.get("panels", []))
    walk(dashboard.get("annotations", {}))
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
        match = re.fullmatch(r"\s*label_values\((.+),\s*\w+\)\s*", query)
        assert match, f"{path.name}: variable {variable['name']}: a query other than label_values(selector, label)"
        found.append(match.group(1))
    return found


def rules(path: Path) -> list[dict]:
    return [rule for group in yaml.safe_load(path.read_text())["groups"] for rule in group["rules"]]


def parse(expr: str):
    for variable, value in GRAFANA_INTERVALS.items():
        expr = expr.replace(variable, value)
    return promql_parser.parse(expr)


def selectors(expr: str) -> list[tuple[str, list]]:
    """(metric name, label matchers) of every vector selector in `expr`."""
    found = []

    def visit(node, *_):
        if isinstance(node, promql_parser.VectorSelector):
            matchers = list(node.matchers.matchers)
            name = node.name or next(m.value for m in matchers if m.name == "__name__")
            assert not node.matchers.or_matchers, f"{expr}: 'or' label matchers are not checked here"
            found.append((name, [m for m in matchers if m.name != "__name__"]))
        return True

    promql_parser.walk(parse(expr), visit)
    assert found, f"no metric in {expr!r}"
    return found


def shown(matcher) -> str:
    op = {"Equal": "=", "NotEqual": "!=", "Re": "=~", "NotRe": "!~"}[str(matcher.op).rsplit(".", 1)[-1]]
    return f"{matcher.name}{op}{matcher.value!r}"


def matches(matcher, labels: dict[str, str]) -> bool:
    value = labels.get(matcher.name, "")
    op = matcher.op
    if op == promql_parser.MatchOp.Equal:
        return value == matcher.value
    if op == promql_parser.MatchOp.NotEqual:
        return value != matcher.value
    hit = re.fullmatch(matcher.value, value) is not None  # Prometheus' regexes are anchored
    return hit if op == promql_parser.MatchOp.Re else not hit


def unmatched(queries: dict[str, list[str]], scrapes: list[Scrape], recorded: set[str]) -> list[str]:
    """The selectors of `queries` (where -> expressions) no sample of `scrapes` matches. Matchers
    on the labels Prometheus adds (job, instance) and on Grafana variables ($job) match anything;
    a name `recorded` by a recording rule counts as present."""
    missing = []
    for where, expressions in queries.items():
        for expr in expressions:
            for name, matchers in selectors(expr):
                if name in PROMETHEUS_SERIES or name in recorded:
                    continue
                checked = [m for m in matchers if m.name not in PROMETHEUS_LABELS and "$" not in m.value]
                if not any(sample == name and all(matches(m, labels) for m in checked)
                           for scrape in scrapes for sample, labels, _ in scrape.samples):
                    labels = ", ".join(shown(m) for m in checked)
                    missing.append(f"{where}: {name}{{{labels}}} in {expr!r}")
    return missing


def debezium_table() -> list[tuple[str, str]]:
    """(series name, context) of each row of the docs' table of Debezium names."""
    text = OPERATIONS.read_text()
    section = text.split("### Debezium's metric names", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `(debezium_metrics_\w+)` \| `([a-z]+)` \|", section, re.MULTILINE)
    assert rows, "no table of Debezium names in docs/operations.md"
    return rows


def all_queries() -> dict[str, list[str]]:
    queries = {path.name: dashboard_queries(path) for path in DASHBOARDS}
    for path in RULE_FILES:
        for rule in rules(path):
            queries[f"{path.name} {rule.get('alert') or rule.get('record')}"] = [rule["expr"]]
    return queries


def recorded_names() -> set[str]:
    return {rule["record"] for path in RULE_FILES for rule in rules(path) if "record" in rule}


# --- without an engine -------------------------------------------------------------------------


def test_the_monitoring_files_are_there():
    assert DASHBOARDS and RULE_FILES and RULE_TESTS, sorted(p.name for p in MONITORING.iterdir())
    assert (MONITORING / "README.md").is_file()


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.name)
def test_rule_files_have_what_prometheus_needs(path):
    """The structure Prometheus' rule loader requires (rulefmt), checked here whether or not
    promtool can be had: groups with unique names, rules that alert or record (not both), a
    PromQL expression that parses, durations, string labels and annotations; alerts also carry
    a severity and a summary."""
    document = yaml.safe_load(path.read_text())
    assert set(document) == {"groups"}, set(document)
    names = [group["name"] for group in document["groups"]]
    assert len(names) == len(set(names)) and all(names), names
    duration = re.compile(r"(\d+(ms|s|m|h|d|w|y))+")
    alerts = []
    for group in document["groups"]:
        assert set(group) <= {"name", "interval", "limit", "rules"}, set(group)
        if "interval" in group:
            assert duration.fullmatch(group["interval"])
        for rule in group["rules"]:
            assert ("alert" in rule) != ("record" in rule), rule
            allowed = {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"} if "alert" in rule \
                else {"record", "expr", "labels"}
            assert set(rule) <= allowed, set(rule) - allowed
            assert isinstance(rule["expr"], str)
            parse(rule["expr"])  # raises on a syntax error
            for key in ("for", "keep_firing_for"):
                if key in rule:
                    assert duration.fullmatch(rule[key]), rule[key]
            for key in ("labels", "annotations"):
                assert all(isinstance(k, str) and isinstance(v, str) for k, v in rule.get(key, {}).items()), rule
            if "alert" in rule:
                assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", rule["alert"])
                assert rule["labels"]["severity"] in ("warning", "critical"), rule
                assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule
                alerts.append(rule["alert"])
            else:
                assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", rule["record"])
    assert len(alerts) == len(set(alerts)), alerts


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboards_parse_and_use_the_datasource_variable(path):
    dashboard = json.loads(path.read_text())
    panels = [panel for panel in dashboard["panels"] if panel["type"] != "row"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and dashboard["uid"], ids
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    assert {"datasource", "job", "instance"} <= variables
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}" and panel["targets"], panel["title"]
        for target in panel["targets"]:
            parse(target["expr"])
            assert 'job=~"$job"' in target["expr"] and 'instance=~"$instance"' in target["expr"], target["expr"]
    assert len(dashboard_queries(path)) > len(panels)


def test_promtool_checks_and_unit_tests_the_rules():
    tool = promtool()
    if tool is None:
        pytest.skip("promtool could not be had (Debian's prometheus package, via apt-get download)")
    checked = subprocess.run([str(tool), "check", "rules", *map(str, RULE_FILES)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([str(tool), "test", "rules", *(path.name for path in RULE_TESTS)], cwd=MONITORING,
                            capture_output=True, text=True)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    # every alert has a unit test
    covered = set(re.findall(r"alertname: (\w+)", "".join(path.read_text() for path in RULE_TESTS)))
    alerts = {rule["alert"] for path in RULE_FILES for rule in rules(path) if "alert" in rule}
    assert alerts <= covered, alerts - covered


def test_the_docs_list_every_debezium_series_served():
    documented = set(debezium_table())
    served = {(PREFIX + series.attribute, series.context) for series in SERIES}
    assert documented == served, (documented - served, served - documented)


def test_unmatched_finds_a_missing_series_and_a_wrong_label():
    """The check below can fail: a misspelt metric and a label value no series has are found."""
    scrape = Scrape.of([("dblog_changes_total", {"table": "a.b", "op": "c"}, 1.0)])
    queries = {"q": ['rate(dblog_changes_total{op="c", job=~"$job"}[$__rate_interval])',
                     'rate(dblog_changes_total{op="x"}[5m])', "dblog_change_total", "up == 0"]}
    missing = unmatched(queries, [scrape], set())
    assert len(missing) == 2 and "op='x'" in missing[0] and "dblog_change_total" in missing[1], missing


# --- against a running engine ------------------------------------------------------------------


def test_every_series_the_dashboards_and_rules_use_is_served(mariadb, database, tmp_path, monkeypatch):
    make_items(mariadb, database)
    # its snapshot fails (SQL_EXCEPTION): the SELECT it is read from does not give its key
    mariadb.execute(f"CREATE TABLE `{database}`.refused (id INT PRIMARY KEY, v VARCHAR(20))")
    mariadb.execute(f"INSERT INTO `{database}`.refused VALUES (1, 'x')")
    items = f"{database}.items"
    data = config_data(mariadb, database, tmp_path, source={"reader_process": False},
                       snapshot={"chunk_size": CHUNK, "max_chunk_size": CHUNK, "select_overrides": {
                           f"{database}.refused": f"SELECT v FROM `{database}`.refused"}})
    run = SupervisorInThread(data)
    endpoint = serve(Metrics.of_supervisor(run.supervisor, run.config.http.ready_max_lag_seconds), "127.0.0.1", 0)
    scrapes: list[Scrape] = []

    def scrape_during_the_snapshot() -> bool:  # on the engine's thread, before chunk 2's SELECT
        scrapes.append(Scrape(endpoint.url))
        return True

    held = hold_chunk_read(monkeypatch, TableId(database, "items"), 2, scrape_during_the_snapshot)
    run.start()
    try:
        def completed() -> bool:
            run.check_running()
            return Scrape(endpoint.url).value("dblog_snapshot_completed") == 1

        eventually(completed, timeout=120, message="the snapshot completed")
        assert held["held"]
        write_item_changes(mariadb, database)
        eventually(lambda: Scrape(endpoint.url).value("dblog_changes_total", table=items, op="d") == 2, timeout=60,
                   message="the deletes counted")
        commits = Scrape(endpoint.url).value("dblog_sink_commits_total")
        eventually(lambda: Scrape(endpoint.url).value("dblog_sink_commits_total") > commits, timeout=30,
                   message="a commit after the deletes")
        scrapes.append(Scrape(endpoint.url))
    finally:
        run.stop()
        endpoint.close()
    assert run.error is None
    during, after = scrapes

    # what the snapshot scrape saw: a running snapshot, the table's estimate and progress
    assert during.value("dblog_snapshot_running") == 1
    assert during.value("dblog_snapshot_rows_scanned", table=items) == CHUNK
    assert during.value("dblog_snapshot_rows_estimated", table=items) is not None
    assert during.value("dblog_snapshot_duration_seconds") > 0
    assert during.value("debezium_metrics_SnapshotRunning", plugin=PLUGIN, name="test", context="snapshot") == 1
    assert after.value("dblog_snapshot_table_scans_total", status="SQL_EXCEPTION") == 1

    missing = unmatched(all_queries(), scrapes, recorded_names())
    assert not missing, "\n".join(missing)

    # Debezium's names, with the JMX exporter's labels and the values this run makes
    for series, context in debezium_table():
        labelled = [labels for scrape in scrapes for name, labels, _ in scrape.samples if name == series
                    and labels.get("context") == context]
        assert labelled, f"{series}{{context={context!r}}} not served"
        for labels in labelled:
            assert labels["plugin"] == "mysql" and labels["name"] == "test", labels
            assert set(labels) - {"plugin", "name", "context"} <= {"table"}, labels

    def debezium(attribute: str, context: str, **labels) -> float | None:
        return after.value(PREFIX + attribute, plugin="mysql", name="test", context=context, **labels)

    assert debezium("TotalNumberOfCreateEventsSeen", "streaming") == 5
    assert debezium("TotalNumberOfUpdateEventsSeen", "streaming") == 3
    assert debezium("TotalNumberOfDeleteEventsSeen", "streaming") == 2
    assert debezium("TotalNumberOfEventsSeen", "streaming") == 10
    assert debezium("TotalNumberOfEventsSeen", "snapshot") == ITEMS
    assert debezium("RowsScanned", "snapshot", table=items) == ITEMS
    assert debezium("NumberOfCommittedTransactions", "streaming") >= 10
    assert debezium("Connected", "streaming") == 1 and debezium("IsGtidModeEnabled", "streaming") == 1
    assert debezium("SnapshotCompleted", "snapshot") == 1 and debezium("SnapshotRunning", "snapshot") == 0
    assert debezium("SnapshotAborted", "snapshot") == 0
    assert debezium("TotalTableCount", "snapshot") == 2 and debezium("RemainingTableCount", "snapshot") == 0
    assert debezium("SnapshotDurationInSeconds", "snapshot") == after.value("dblog_snapshot_duration_seconds") > 0
    position = [labels for name, labels, _ in after.samples if name == "dblog_streaming_binlog_info"]
    assert debezium("BinlogPosition", "streaming") == int(position[0]["pos"]) > 0
    lag = after.value("dblog_streaming_lag_seconds")
    assert debezium("MilliSecondsBehindSource", "streaming") == pytest.approx(lag * 1000)
    # the JMX exporter's type, and no series per row: labels are the connector's and tables' only
    assert "# TYPE debezium_metrics_Connected untyped" in after.text
    tables = {labels["table"] for name, labels, _ in after.samples if "table" in labels}
    assert tables <= {items, f"{database}.nokey"}, tables


def test_a_failed_commit_and_the_error_that_ends_the_engine_are_counted(mariadb, database, tmp_path):
    """The offsets' directory replaced by a file while streaming: the next commit fails
    (dblog_sink_commit_failures_total, which DblogSinkCommitFailures watches) and ends the
    engine with an error that no restart fixes (dblog_engine_errors_total{kind="other"})."""
    mariadb.execute(f"CREATE TABLE `{database}`.items (id INT PRIMARY KEY)")
    state = tmp_path / "state"
    data = config_data(mariadb, database, tmp_path, source={"reader_process": False},
                       offsets={"path": str(state / "offsets.json"), "commit_interval_seconds": 0.2})
    run = SupervisorInThread(data)
    endpoint = serve(Metrics.of_supervisor(run.supervisor), "127.0.0.1", 0)
    run.start()
    try:
        eventually(lambda: Scrape(endpoint.url).value("dblog_sink_commits_total") >= 1, timeout=60,
                   message="a first commit")
        before = Scrape(endpoint.url)
        assert before.value("dblog_sink_commit_failures_total") == 0
        assert [before.value("dblog_engine_errors_total", kind=kind) for kind in ("source", "sink", "other")] == [0] * 3
        for path in state.iterdir():
            path.unlink()
        state.rmdir()
        state.write_text("not a directory")
        mariadb.execute(f"INSERT INTO `{database}`.items VALUES (1)")
        eventually(lambda: run.error is not None, timeout=60, message="the engine stopped by the failed commit")
        after = Scrape(endpoint.url)
    finally:
        run.stop()
        endpoint.close()
    assert "cannot write offsets file" in str(run.error), repr(run.error)
    assert after.value("dblog_sink_commit_failures_total") == 1
    assert after.value("dblog_engine_errors_total", kind="other") == 1
    assert after.value("dblog_engine_errors_total", kind="source") == 0
    assert after.value("dblog_engine_restarts_total") == 0  # not an error a restart fixes
