"""dblog's benchmarks: throughput, latency and memory against this machine's physical limits.

`python -m benchmarks` starts a private MariaDB, loads the shop schema's `orders` table
(composite key) and a copy keyed by a single integer, and measures in one run:

    limits       what the driver and the binlog library can do at all: a raw pymysql keyset
                 scan of each table (same chunk size as the engine) and a raw
                 mysql-replication decode of the load's binlog range
    snapshot     dblog's incremental snapshot of a quiet table, to the null and JSON-lines sinks
    streaming    a backlog burst of row changes streamed to the null sink, against a raw
                 decode of the very same binlog range
    under-load   the snapshot while writers hammer the table: snapshot rate and streaming lag
    rss          peak RSS of an engine process snapshotting tables of two sizes
    iceberg      end to end into Iceberg through Spark: snapshot rate and commit-to-visible
                 latency of streamed writes
    oltp         under an OLTP load (writer processes, 1-5 single-row statements per
                 transaction on eight mixed tables): decode and streaming rates of its binlog
                 against mysql-replication, the highest write rate streamed with lag p99 < 1 s,
                 and a snapshot under full-speed writers against the same snapshot quiet

Every figure is printed with its ratio to its physical limit and written, with the machine it
ran on, to benchmarks/results/<name>.json and .md. Benchmarks are not tests: nothing fails on
time, but what is measured is checked where that is cheap (row counts, every probe arrived),
and a failed check makes the exit status 1.
"""
