"""`[spark]` and `[iceberg]`: the Iceberg sink's settings (validated where the engine's
configuration is loaded, `dblog.runtime.config`, which holds them as two of its sections; no Spark
imported here, so loading a configuration does not start a JVM).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from dblog.sinks.iceberg.maintenance import MaintenancePolicy
from dblog.sinks.iceberg.routing import RouteRule


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SparkSettings(_Settings):
    """`[spark]`: the Spark session the Iceberg sink writes through, one for the engine's life."""

    master: str = "local[2]"
    catalog: str = "lake"  # Iceberg catalog name; tables are <catalog>.<db>.<table>
    warehouse: str = "dblog-data/warehouse"  # Hadoop catalog directory (any Hadoop/S3 URI Spark can reach)
    packages: str | None = None  # spark.jars.packages, for users with Maven access (else the offline runtime)
    conf: dict[str, str] = Field(default_factory=dict)  # any other Spark settings


class IcebergSettings(_Settings):
    """How changes land in Iceberg (sink.type = "iceberg"); the session itself is [spark]."""

    routes: list[RouteRule] = Field(default_factory=list)  # [[iceberg.routes]]: targets and event filters
    table_properties: dict[str, str] = Field(default_factory=dict)  # added to every created table
    maintenance: MaintenancePolicy = Field(default_factory=MaintenancePolicy)  # [iceberg.maintenance]
    changelog: bool = False  # also append every change to <table>_changelog
    # "merge": each commit a Spark MERGE; "upsert": a row delta of equality deletes and rows,
    # written without Spark (faster commits on busy tables; readers apply the deletes until compaction)
    write_mode: Literal["merge", "upsert"] = "merge"
    # where batches wait as Parquet for Spark to read (every executor must reach it);
    # default: beside the warehouse, <spark.warehouse>-staging
    staging_dir: str | None = None
