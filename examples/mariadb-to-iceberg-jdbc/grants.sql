-- On the source (MariaDB >= 10.5): the account dblog reads with. REPLICATION SLAVE is the
-- binlog dump; BINLOG MONITOR is MariaDB's name for REPLICATION CLIENT (SHOW BINARY LOGS).
CREATE USER 'dblog'@'%' IDENTIFIED BY 'change-me' REQUIRE SSL;
GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'dblog'@'%';
GRANT SELECT ON shop.* TO 'dblog'@'%';
CREATE TABLE IF NOT EXISTS shop.debezium_signal (
    id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data TEXT NULL
);
-- On the catalog database (any MariaDB/MySQL; PostgreSQL works too with its driver): Iceberg's
-- JdbcCatalog creates its two tables at its first start, then only reads and updates them.
CREATE DATABASE IF NOT EXISTS iceberg_catalog;
CREATE USER 'iceberg'@'%' IDENTIFIED BY 'change-me';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER ON iceberg_catalog.* TO 'iceberg'@'%';
