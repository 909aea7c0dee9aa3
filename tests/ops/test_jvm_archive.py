"""The class-data archives of the tests' Kafka JVMs (lab/jvm_archive.py, `ClassArchive`): the first
JVM of a class path without one writes it at its exit, under a lock; the others map it, or run
without one while it is being made; a JVM that did not exit by itself leaves none."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from lab import jvm_archive
from lab.jvm_archive import ClassArchive


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(jvm_archive, "CACHE", tmp_path / "cds")
    return tmp_path / "cds"


@pytest.fixture
def classpath(tmp_path):
    jars = [tmp_path / "a.jar", tmp_path / "b.jar"]
    for jar in jars:
        jar.write_bytes(b"PK")
    return ":".join(map(str, jars))


def test_the_first_jvm_writes_the_archive_at_exit_and_the_next_maps_it(cache, classpath):
    first = ClassArchive("kafka", "/usr/bin/java", classpath)
    options = first.jvm_options()
    assert first.making and options[0].startswith("-XX:ArchiveClassesAtExit=") and str(cache) in options[0]
    assert first.jvm_options() == options  # a restart of the same JVM makes it too
    other = ClassArchive("kafka", "/usr/bin/java", classpath)
    assert other.jvm_options() == [] and not other.making  # the lock is taken: no archive meanwhile
    partial = options[0].split("=", 1)[1]
    with open(partial, "wb") as written:  # what the JVM writes at exit
        written.write(b"archive")
    first.exited(143)  # SIGTERM, then Java's own exit
    assert first.path.read_bytes() == b"archive" and not first.making
    assert other.jvm_options()[0] == f"-XX:SharedArchiveFile={first.path}"


def test_a_killed_jvm_leaves_no_archive_and_the_next_one_makes_it(cache, classpath):
    first = ClassArchive("kafka", "/usr/bin/java", classpath)
    partial = first.jvm_options()[0].split("=", 1)[1]
    with open(partial, "wb") as written:  # cut short by SIGKILL
        written.write(b"arch")
    first.exited(-signal.SIGKILL)
    assert not first.path.exists() and not list(cache.glob("*.partial"))
    second = ClassArchive("kafka", "/usr/bin/java", classpath)
    assert second.jvm_options()[0].startswith("-XX:ArchiveClassesAtExit=")  # the lock was released


def test_the_archive_is_keyed_by_the_class_path_s_jars(cache, classpath, tmp_path):
    before = ClassArchive("kafka", "/usr/bin/java", classpath).path
    (tmp_path / "b.jar").write_bytes(b"PK-another-version")
    assert ClassArchive("kafka", "/usr/bin/java", classpath).path != before
    assert ClassArchive("kafka-connect", "/usr/bin/java", classpath).path.name.startswith("kafka-connect-")


def test_the_spark_archive_of_java_tool_options_is_left_out(monkeypatch):
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile=/x/spark.jsa -Xlog:cds=off")
    assert ClassArchive.environment()["JAVA_TOOL_OPTIONS"] == "-XX:TieredStopAtLevel=1 -Xlog:cds=off"


@pytest.mark.server  # starts a broker of its own, twice
def test_a_broker_writes_its_archive_when_stopped_and_the_next_broker_maps_it(cache):
    from lab.apache_kafka import ApacheKafka

    with ApacheKafka() as first:
        assert first._archive.making
    archive = first._archive.path
    assert archive.exists() and archive.stat().st_size > 1_000_000, "the JVM wrote no archive at its exit"
    with ApacheKafka() as second:
        assert not second._archive.making
        maps = Path(f"/proc/{second.process.pid}/maps").read_text()
        assert str(archive) in maps, "the broker's JVM did not map the archive (the JVM refused it?)"
