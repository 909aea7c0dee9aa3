"""Test and benchmark rigs: a private Apache Kafka broker (TLS, SASL, ACLs), a Spark
standalone cluster, Debezium itself as a reference, the MariaDB JDBC driver, a private object
store. Not part of the installed package (pyproject.toml packages only `dblog`); `dblog demo`'s
own rig (the private MariaDB, the writers, the checks) is `dblog.demo`."""
