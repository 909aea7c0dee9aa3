-- The account dblog connects as (MySQL 8 / Aurora), as Debezium Server's connector used it. It only reads: GTID watermarks
-- (dblog's default) write nothing to the source. REQUIRE SSL refuses the account without TLS.
CREATE USER 'cdc_shop'@'%' IDENTIFIED BY 'change-me' REQUIRE SSL;
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc_shop'@'%';
GRANT SELECT ON shop.* TO 'cdc_shop'@'%';
-- The signal table: users (and `dblog signal`) insert into it; dblog reads it from the binlog.
CREATE TABLE IF NOT EXISTS shop.debezium_signal (
    id VARCHAR(42) PRIMARY KEY, type VARCHAR(32) NOT NULL, data TEXT NULL
);
