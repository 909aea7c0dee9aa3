"""The Iceberg catalog the sink writes through: its Spark settings, and a first call that says
clearly why it cannot be reached.

`[iceberg] catalog_type` picks Iceberg's catalog implementation behind Spark's `SparkCatalog`:

- `hadoop` (the default): tables are directories under `spark.warehouse`, and the catalog is
  the file system itself (its commit is an atomic rename). For tests, demos and one writer.
- `jdbc`: Iceberg's `JdbcCatalog` (in the runtime jar). A table's current metadata file is a row
  of `iceberg_tables` in a database (MariaDB, MySQL, PostgreSQL, …; `catalog_uri` is its JDBC
  URL); a commit is one `UPDATE … SET metadata_location = new WHERE … AND metadata_location =
  old`, a compare-and-swap the database makes atomic, so writers on several machines (or
  Trino, Flink, another Spark) can share it. Its tables are created by the catalog at its first
  start (`jdbc.schema-version` V1: views too; dblog asks for V1 unless `catalog_properties`
  says otherwise). The driver jar is the user's: `spark.jars`.
- `rest`: an Iceberg REST catalog service (`catalog_uri` = its base URL; Iceberg's `RESTCatalog`,
  in the runtime jar). A commit is a POST of the table's changes with the metadata it expects; the
  service makes the compare-and-swap. `rest_credential` ("client_id:client_secret") is exchanged
  for an OAuth2 bearer token (OAuth2 client credentials grant); `spark.warehouse` is passed as the
  service takes it (a location or a warehouse name), not made an absolute path. Tables on S3 need
  Iceberg's `S3FileIO` and the AWS SDK (`iceberg-aws-bundle`) on Spark's classpath, and its
  `s3.*` properties (`catalog_properties`), unless the service hands them out.

Secrets (`jdbc_password`, `rest_credential`, and any catalog property given by `catalog_properties_env` /
`catalog_properties_file`) are resolved by the sink's plugin (`dblog.sinks.iceberg.plugin`, with
the runtime's secret resolver) and handed here as plain values in `CatalogSpec.secrets`. They never enter the settings Spark starts
with (pyspark passes those to `spark-submit` on its command line, where `ps` shows them): they
are set on the running session (`spark.conf.set`) before the catalog is first used, which is
when Spark reads a catalog's settings. Error messages built here replace them with `***`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dblog.sinks.base import SinkError, SinkUnavailable

CATALOG_CLASS = "org.apache.iceberg.spark.SparkCatalog"
SCHEMA_VERSION_PROPERTY = "jdbc.schema-version"
# Properties dblog sets from its own settings; `catalog_properties` may not set them.
OWN_PROPERTIES = frozenset({"type", "uri", "warehouse", "catalog-impl", "jdbc.user", "jdbc.password", "credential"})
# Debian's JDBC drivers (`apt-get install libmariadb-java` / `libpostgresql-jdbc-java`), by URL scheme.
DEBIAN_DRIVERS = {
    "mariadb": ("libmariadb-java", "/usr/share/java/mariadb-java-client.jar"),
    "mysql": ("libmariadb-java", "/usr/share/java/mariadb-java-client.jar"),
    "postgresql": ("libpostgresql-jdbc-java", "/usr/share/java/postgresql.jar"),
}


@dataclass(frozen=True)
class CatalogSpec:
    """One Iceberg catalog for Spark: `type` (hadoop, jdbc, rest), `uri`, extra `properties`, and
    `secrets` (property → value, e.g. {"jdbc.password": …}), which are never shown."""

    type: str = "hadoop"
    uri: str | None = None
    properties: Mapping[str, str] = field(default_factory=dict)
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)

    def conf(self, name: str, warehouse: str) -> dict[str, str]:
        """The `spark.sql.catalog.<name>…` settings, secrets excluded."""
        prefix = f"spark.sql.catalog.{name}"
        conf = {prefix: CATALOG_CLASS, f"{prefix}.type": self.type, f"{prefix}.warehouse": warehouse}
        if self.uri:
            conf[f"{prefix}.uri"] = self.uri
        if self.type == "jdbc":
            conf[f"{prefix}.{SCHEMA_VERSION_PROPERTY}"] = "V1"
        for key, value in self.properties.items():
            conf[f"{prefix}.{key}"] = value
        return conf

    def secret_conf(self, name: str) -> dict[str, str]:
        """The secret settings, to be set on the running session (`spark.conf.set`)."""
        return {f"spark.sql.catalog.{name}.{key}": value for key, value in self.secrets.items()}

    def redact(self, text: str) -> str:
        """`text` with every secret value replaced by `***`."""
        for value in sorted(self.secrets.values(), key=len, reverse=True):
            if value:
                text = text.replace(value, "***")
        return text


def driver_hint(uri: str | None) -> str:
    """Where the JDBC driver for `uri` comes from (Debian's package and jar, when there is one)."""
    scheme = (uri or "").removeprefix("jdbc:").split(":", 1)[0]
    if scheme in DEBIAN_DRIVERS:
        package, jar = DEBIAN_DRIVERS[scheme]
        return f'spark.jars = ["{jar}"] (Debian: apt-get install {package})'
    return "spark.jars = [\"/path/to/the-jdbc-driver.jar\"]"


def _java_messages(error: BaseException) -> list[str]:
    """The messages of a Py4JJavaError's Java exception and its causes, outermost first."""
    java = getattr(error, "java_exception", None)
    messages = []
    while java is not None and len(messages) < 20:
        messages.append(f"{java.getClass().getName()}: {java.getMessage() or ''}")
        cause = java.getCause()
        java = None if cause is None or cause.equals(java) else cause
    return messages or [str(error).splitlines()[0] if str(error) else type(error).__name__]


def catalog_namespaces(spark, name: str) -> list[str]:
    """The namespaces of catalog `name`; none for a Hadoop catalog whose warehouse directory
    does not exist yet (it answers NoSuchNamespaceException for its root: the first table
    creates the directory)."""
    from py4j.protocol import Py4JJavaError

    try:
        return [row[0] for row in spark.sql(f"SHOW NAMESPACES IN `{name}`").collect()]
    except Py4JJavaError as error:
        if any("NoSuchNamespaceException" in message for message in _java_messages(error)):
            return []
        raise


def check_catalog(spark, name: str, spec: CatalogSpec) -> None:
    """Use the catalog once (list its namespaces), so that a catalog that cannot be used stops
    dblog at start with the setting to fix: `SinkError` for a missing driver or refused
    credentials, `SinkUnavailable` (dblog run waits and retries) for one it cannot reach now."""
    from py4j.protocol import Py4JJavaError

    try:
        catalog_namespaces(spark, name)
    except Py4JJavaError as error:
        raise catalog_error(name, spec, _java_messages(error)) from None


def catalog_error(name: str, spec: CatalogSpec, messages: list[str]) -> SinkError:
    """The error for a catalog whose first use failed with these (Java) messages."""
    text = spec.redact(" ← ".join(messages))
    where = f"the Iceberg catalog {name!r} (iceberg.catalog_type = {spec.type!r}" + (
        f", iceberg.catalog_uri = {spec.redact(spec.uri)!r})" if spec.uri else ")")
    lowered = text.lower()
    if "no suitable driver" in lowered:
        return SinkError(f"{where}: no JDBC driver for this URL on Spark's classpath; add its jar: "
                         f"{driver_hint(spec.uri)}. ({text})")
    if any(mark in lowered for mark in ("access denied", "authentication failed", "password authentication",
                                        "sqlinvalidauthorizationspecexception", "28000")):
        return SinkError(f"{where}: the catalog database refused the login; check iceberg.jdbc_user and "
                         f"iceberg.jdbc_password (or jdbc_password_env / jdbc_password_file). ({text})")
    if spec.type == "rest" and any(mark in lowered for mark in ("notauthorizedexception", "not authorized",
                                                                 "invalid_client", "forbiddenexception")):
        given = "the credential given" if "credential" in spec.secrets else "no credential given"
        return SinkError(f"{where}: the REST catalog refused the client ({given}); check iceberg.rest_credential "
                         f"(or rest_credential_env / rest_credential_file), \"client_id:client_secret\" of an OAuth2 "
                         f"client it knows. ({text})")
    if any(mark in lowered for mark in ("connection refused", "could not connect", "socket", "timed out",
                                        "unknownhost", "connectexception", "communications link")):
        return SinkUnavailable(f"{where}: cannot reach it; check catalog_uri and that the service runs "
                               f"(dblog run retries). ({text})")
    return SinkError(f"{where} cannot be used: {text}")
