"""`[spark]` and `[iceberg]`: the Iceberg sink's settings, two top-level tables its plugin declares
(`dblog.sinks.iceberg.plugin`), validated where the engine's configuration is loaded
(`dblog.runtime.config`); no Spark imported here, so loading a configuration does not start a JVM.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ByteSize, ConfigDict, Field, SecretStr, field_validator, model_validator

from dblog.sinks.iceberg.catalog import OWN_PROPERTIES

from dblog.sinks.iceberg.maintenance import MaintenancePolicy
from dblog.sinks.iceberg.routing import RouteRule


class _Settings(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SparkSettings(_Settings):
    """`[spark]`: the Spark session the Iceberg sink writes through, one for the engine's life."""

    master: str = "local[2]"
    catalog: str = "lake"  # Iceberg catalog name; tables are <catalog>.<db>.<table>
    # Where the catalog's tables live: the Hadoop catalog's directory, a JDBC catalog's warehouse
    # (any path or Hadoop URI Spark can reach)
    warehouse: str = "dblog-data/warehouse"
    # spark.jars.packages, Maven coordinates Spark resolves from Maven Central (cached by Ivy:
    # ~/.ivy2.5.2 for Spark 4, ~/.ivy2 for 3.5);
    # default: the Iceberg runtime for the installed Spark (dblog.sinks.iceberg.session.runtime_package)
    packages: str | None = None
    # offline instead: a directory of jars (the Iceberg runtime and any other), all in spark.jars
    jars_dir: str | None = None
    jars: list[str] = Field(default_factory=list)  # more jars for spark.jars: a JDBC catalog's driver, …
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
    # changes held in memory as Python objects (all tables' pending batches) before the largest
    # are spilled to staging_dir as Parquet: bounds the sink's memory whatever a transaction's size
    max_buffer_rows: int = Field(100_000, ge=1)
    # and bytes of them, as the binlog carried them ("64MiB", "1GB" or a number; rows of large
    # BLOBs reach this first)
    max_buffer_bytes: ByteSize = Field(ByteSize(64 * 1024 * 1024), ge=1)
    # where batches wait as Parquet for Spark to read (every executor must reach it);
    # default: beside the warehouse, <spark.warehouse>-staging
    staging_dir: str | None = None
    # The catalog (its name and warehouse are spark.catalog and spark.warehouse; see
    # dblog.sinks.iceberg.catalog): "hadoop" (directories, the default), "jdbc" (Iceberg's
    # JdbcCatalog in a database), "rest" (an Iceberg REST catalog service)
    catalog_type: Literal["hadoop", "jdbc", "rest"] = "hadoop"
    catalog_uri: str | None = None  # jdbc: its JDBC URL (jdbc:mariadb://host:3306/iceberg); rest: its base URL
    jdbc_user: str | None = None  # the JDBC catalog's database user
    jdbc_password: SecretStr | None = None  # or jdbc_password_env / jdbc_password_file (dblog.runtime.secrets)
    jdbc_password_env: str | None = None
    jdbc_password_file: str | None = None
    jdbc_password_file_key: str | None = None  # jdbc_password_file is a properties file: this key's value
    # the REST catalog's OAuth2 client credentials, "client_id:client_secret" (Iceberg's `credential`):
    # exchanged at its token endpoint (catalog_properties "oauth2-server-uri", default <catalog_uri>/v1/oauth/tokens;
    # "scope", default "catalog") for the bearer token of every request; or rest_credential_env / _file
    rest_credential: SecretStr | None = None
    rest_credential_env: str | None = None
    rest_credential_file: str | None = None
    rest_credential_file_key: str | None = None  # rest_credential_file is a properties file: this key's value
    # more catalog properties, as spark.sql.catalog.<catalog>.<key> (e.g. "jdbc.useSSL", "io-impl")
    catalog_properties: dict[str, str] = Field(default_factory=dict)
    # secret-valued catalog properties: key -> environment variable / file holding the value
    catalog_properties_env: dict[str, str] = Field(default_factory=dict)
    catalog_properties_file: dict[str, str] = Field(default_factory=dict)

    @field_validator("catalog_properties", "catalog_properties_env", "catalog_properties_file")
    @classmethod
    def _not_dblogs_own(cls, properties: dict[str, str]) -> dict[str, str]:
        instead = {"type": "iceberg.catalog_type", "catalog-impl": "iceberg.catalog_type",
                   "uri": "iceberg.catalog_uri", "warehouse": "spark.warehouse", "jdbc.user": "iceberg.jdbc_user",
                   "jdbc.password": "iceberg.jdbc_password_env or iceberg.jdbc_password_file",
                   "credential": "iceberg.rest_credential_env or iceberg.rest_credential_file"}
        for key in properties:
            if key in OWN_PROPERTIES:
                raise ValueError(f"{key!r} is set by dblog from its own setting: use {instead[key]}")
        return properties

    @model_validator(mode="after")
    def _catalog_settings_fit_its_type(self) -> IcebergSettings:
        jdbc_settings = [name for name in ("jdbc_user", "jdbc_password", "jdbc_password_env", "jdbc_password_file")
                         if getattr(self, name)]
        if self.catalog_type == "hadoop":
            if self.catalog_uri:
                raise ValueError('catalog_uri is for catalog_type = "jdbc" or "rest"; the Hadoop catalog is '
                                 "the directory spark.warehouse: remove catalog_uri or set catalog_type")
        elif not self.catalog_uri:
            example = "jdbc:mariadb://host:3306/iceberg" if self.catalog_type == "jdbc" else "https://host/api/catalog"
            raise ValueError(f'catalog_type = "{self.catalog_type}" needs catalog_uri (e.g. "{example}")')
        if jdbc_settings and self.catalog_type != "jdbc":
            raise ValueError(f'{", ".join(jdbc_settings)}: for catalog_type = "jdbc" only')
        rest_settings = [name for name in ("rest_credential", "rest_credential_env", "rest_credential_file")
                         if getattr(self, name)]
        if rest_settings and self.catalog_type != "rest":
            raise ValueError(f'{", ".join(rest_settings)}: for catalog_type = "rest" only')
        uri = (self.catalog_uri or "").lower()
        if self.catalog_type == "jdbc" and not uri.startswith("jdbc:"):
            raise ValueError("catalog_uri: a JDBC URL starting with jdbc: (e.g. jdbc:mariadb://host:3306/iceberg)")
        if self.catalog_type == "rest" and not uri.startswith(("http://", "https://")):
            raise ValueError("catalog_uri: the REST catalog's http:// or https:// URL")
        if "password=" in uri or "secret=" in uri:
            raise ValueError("catalog_uri holds a password: remove it and give it as jdbc_password_env or "
                             "jdbc_password_file (a REST catalog's: rest_credential_env or rest_credential_file)")
        return self
