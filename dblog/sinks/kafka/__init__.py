"""The Kafka sink: Debezium's records on Kafka topics."""
