"""dblog: change data capture for MySQL/MariaDB with DBLog incremental snapshots."""

__version__ = "0.1.0"
