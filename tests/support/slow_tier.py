"""The repeats the default run leaves to the slow tier, each with the test that keeps its mechanism
in the default run.

The default run is the contributor's run (tests/README.md, "The slow tier"): every mechanism once,
on two cores in about ten minutes. What it leaves here is a second or third case of a mechanism it
already runs (another sink, catalog, position mode, signal channel or parameter) or a long crash
cycle whose short form it runs. `.ci/run` runs all of them on every submission, after the default
run. `tests/conftest.py` marks them `slow`; an id here that names no collected test stops a run of
the whole suite, so a renamed test cannot slip back into the default run unseen.
"""

# test id (as `pytest` names it below tests/) → what the default run keeps of what it proves
REPEATS: dict[str, str] = {
    # The Iceberg sink's crash cycles: each kill -9 restarts `dblog run`, and each start is a Spark JVM.
    "sinks/iceberg/test_spark_sink.py::test_kill_9_before_during_and_after_iceberg_commits":
        "`sinks/iceberg/test_iceberg_drop_shared_target.py::test_a_crash_between_two_deletes_of_one_statement_is_replayed` "
        "(a crash inside an Iceberg commit, replayed exactly once)",
    "sinks/iceberg/test_jdbc_catalog.py::test_jdbc_catalog_with_tables_on_s3_through_a_kill_9":
        "`test_jdbc_catalog.py::test_snapshot_under_writers_and_streaming_through_a_jdbc_catalog` (both write modes)",
    "sinks/iceberg/test_jdbc_catalog.py::test_kill_9_during_a_jdbc_catalog_commit_then_restart":
        "the JDBC catalog's snapshot and streaming; the Iceberg crash replay on the Hadoop catalog",
    "sinks/iceberg/test_rest_catalog.py::test_snapshot_under_writers_then_streaming_through_the_rest_catalog":
        "the REST server's OAuth2 refusals (`test_the_catalog_refuses_a_wrong_secret_and_a_missing_token`); a snapshot under "
        "writers and streaming through a catalog in `test_jdbc_catalog.py`",
    "sinks/iceberg/test_rest_catalog.py::test_kill_9_during_a_rest_catalog_commit_then_restart":
        "the REST server's OAuth2 refusals; the Iceberg crash replay on the Hadoop catalog",
    "sinks/iceberg/test_rest_catalog.py::test_dblog_check_names_an_unreachable_catalog_and_a_refused_credential":
        "the catalog's own refusal of a wrong secret (`test_the_catalog_refuses_a_wrong_secret_and_a_missing_token`); "
        "`dblog check`'s other failed lines in `ops/test_check.py`",
    "sinks/iceberg/test_iceberg_bounded_memory.py::test_kill_9_while_a_large_transaction_is_spilled_and_while_it_commits":
        "`test_a_transaction_past_the_buffer_bound_is_spilled_and_committed_once`",
    "engine/test_xa_sinks.py::test_kill_9_of_dblog_run_between_xa_prepare_and_commit[iceberg]":
        "the `[kafka]` case; the XA order into Iceberg in `test_an_xa_commit_after_a_later_commit_reached_the_sink[iceberg-commit_in_domain_1]`",
    "engine/test_xa_sinks.py::test_kill_9_of_dblog_run_between_xa_prepare_and_commit[jsonl]": "the `[kafka]` case",
    "engine/test_xa_sinks.py::test_an_xa_prepared_before_and_committed_after_a_clean_restart[iceberg]": "the `[jsonl]` case",
    "engine/test_xa_sinks.py::test_an_xa_prepared_before_and_committed_after_a_clean_restart[kafka]": "the `[jsonl]` case",
    "engine/test_xa_sinks.py::test_an_xa_commit_after_a_later_commit_reached_the_sink[iceberg-same_domain]":
        "`[iceberg-commit_in_domain_1]` and the `[jsonl-…]` cases",
    "engine/test_xa_sinks.py::test_an_xa_commit_after_a_later_commit_reached_the_sink[kafka-same_domain]":
        "the `[kafka-commit_in_domain_1]` case",
    "engine/test_faults.py::test_failed_iceberg_commit_keeps_the_offsets_and_a_restart_recovers":
        "the Iceberg crash replay (`test_iceberg_drop_shared_target.py`); a failed delivery keeping the offsets in "
        "`sinks/kafka/test_kafka_sink.py::test_offsets_are_not_saved_past_records_kafka_did_not_acknowledge`",
    "engine/test_faults.py::test_source_restarted_with_the_iceberg_sink_loses_and_duplicates_nothing":
        "`engine/test_waiting_for_source.py` (the engine waits for its restarted source and goes on); restarts' exactly-once in the capture model",
    "engine/test_faults.py::test_source_restarted_mid_snapshot_and_mid_stream_loses_and_duplicates_nothing":
        "`engine/test_waiting_for_source.py` (the engine waits for its restarted source and goes on); restarts' exactly-once in the capture model",
    "engine/test_faults.py::test_broker_down_and_back_signals_resume_and_the_data_path_never_stops":
        "`signals/test_kafka_signals.py`'s other tests",
    # The engine's crash and concurrency matrices.
    "engine/test_engine.py::test_kill_9_at_random_points_during_snapshot_and_streaming[2026]":
        "kill -9 under writers in `engine/test_file_positions.py`, `engine/test_tls_engine.py` and "
        "`sinks/kafka/test_kafka_sink.py::test_restart_after_kill_9_replays_to_the_source`; the capture model's crashes",
    "engine/test_engine.py::test_snapshot_under_concurrent_writes_equals_source[2]": "the `[1]` case",
    "engine/test_engine.py::test_snapshot_under_concurrent_writes_equals_source[3]": "the `[1]` case",
    "engine/test_engine.py::test_signal_table_watermarks_under_concurrent_writes[insert_insert]":
        "the `[insert_delete]` case (they differ in the close row's writer only)",
    "engine/test_graceful_stop.py::test_a_stop_with_a_window_open_drops_it_and_commits_everything_read":
        "`test_dblog_run_stops_cleanly_on_sigterm`; the window dropped on a stop in the capture model",
    "engine/test_large_values.py::test_wide_table_of_200_columns":
        "`test_chunks_cut_by_their_byte_bound_under_writes_equal_the_source`; every column type in `mysql/test_values.py`",
    "engine/test_large_values.py::test_multi_megabyte_blobs_and_texts_snapshot_and_stream":
        "`test_chunks_cut_by_their_byte_bound_under_writes_equal_the_source`",
    "engine/test_large_values.py::test_rows_near_max_allowed_packet":
        "the byte-bound chunks; the decoder's large-event tests in `mysql/`",
    "engine/test_large_values.py::test_peak_rss_with_rows_of_several_megabytes":
        "the byte-bound chunks (the bound that keeps the memory flat); `benchmarks` measures the memory",
    "engine/test_minimal_row_metadata.py::test_kill_9_under_writers_loses_nothing":
        "the module's backlog and restart tests; kill -9 under writers in `engine/test_file_positions.py`",
    "engine/test_tls_engine.py::test_snapshot_streaming_and_signals_over_tls_every_session_encrypted[False]": "the `[True]` case",
    "engine/test_tls_engine.py::test_a_distributed_backfills_spark_tasks_connect_over_tls":
        "the distributed snapshot on plain connections; every other session over TLS in this module",
    "engine/test_snapshot_modes.py::test_initial_only_snapshots_then_stops_without_streaming[incremental]": "the `[blocking]` case",
    # The distributed snapshot: one case under writers stays, the rest are its variations.
    "engine/test_distributed_snapshot.py::test_a_distributed_snapshot_under_writers_lands_exactly[gtid]":
        "the `[insert_delete]` case (the GTID watermarks in every other snapshot test)",
    "engine/test_distributed_snapshot.py::test_status_and_progress_show_the_rows_a_distributed_read_has_staged":
        "the status and progress of incremental snapshots (`ops/test_cli.py`)",
    "engine/test_distributed_snapshot.py::test_shards_read_by_spark_tasks_land_in_one_routed_table_with_their_changelog":
        "`sinks/iceberg/test_spark_sink.py::test_routed_shards_land_in_one_table_without_key_collisions`",
    "engine/test_distributed_snapshot.py::test_a_spark_task_killed_while_reading_its_range_is_read_again":
        "the distributed snapshot under writers",
    "engine/test_distributed_snapshot.py::test_a_key_respelled_under_a_case_insensitive_collation_after_its_range_was_read":
        "`mysql/test_key_equality.py` and the collation tests against the server",
    "mysql/test_parallel_read.py::test_parallel_snapshot_under_concurrent_writes_equals_source[4]": "the `[2]` case",
    "mysql/test_key_equality.py::test_engine_with_keys_respelled_during_the_snapshot_equals_source":
        "the module's key-equality tests against the server's own answers",
    "mysql/test_definitions_against_server.py::test_random_alters_give_the_servers_definitions":
        "the module's fixed ALTERs against the server's information_schema",
    # Taking over from Debezium: each form once.
    "sinks/kafka/test_debezium_takeover.py::test_dblog_continues_the_incremental_snapshot_debezium_had_in_flight":
        "its reading of Debezium's offsets and keys in `ops/test_debezium_offsets.py` (keys written by the JDK's serializer)",
    "sinks/kafka/test_debezium_takeover.py::test_dblog_takes_over_the_embedded_engines_file_offset_store[file]":
        "`test_dblog_continues_inside_the_transaction_debezium_stopped_in[file]` (the file store taken over in file mode)",
    "sinks/kafka/test_debezium_takeover.py::test_dblog_takes_over_the_embedded_engines_file_offset_store[gtid]":
        "`test_dblog_continues_inside_the_transaction_debezium_stopped_in[gtid]` and `[file]` (the file store taken over "
        "inside a transaction, then dblog catching up)",
    "sinks/kafka/test_debezium_takeover.py::test_dblog_takes_over_a_kafka_connect_connectors_offsets":
        "the offsets topic read in `ops/test_debezium_offsets.py`; the file store taken over",
    # The Kafka sink and its security: one of each kind of fault.
    "sinks/kafka/test_kafka_sink.py::test_broker_down_and_back_the_engine_retries_and_catches_up":
        "`sinks/kafka/test_kafka_broker_restart.py` (a broker restart in mid-flush)",
    "sinks/kafka/test_kafka_security.py::test_restart_after_kill_9_replays_to_the_source_over_sasl_ssl":
        "`test_kafka_sink.py::test_restart_after_kill_9_replays_to_the_source`; every client over SASL_SSL",
    "sinks/kafka/test_kafka_security.py::test_every_kafka_client_works_over_sasl_ssl[SCRAM-SHA-256]": "the `[PLAIN]` case",
    "sinks/kafka/test_kafka_security.py::test_every_kafka_client_works_over_sasl_ssl[SCRAM-SHA-512]": "the `[PLAIN]` case",
    "sinks/kafka/test_kafka_transactions_heartbeats.py::test_after_kill_9_every_transaction_on_the_topics_has_its_end":
        "the module's transaction metadata tests; kill -9 of the Kafka sink in `test_kafka_sink.py`",
    "sinks/kafka/test_kafka_schema_history.py::test_a_restart_anywhere_in_the_backlog_writes_what_an_uninterrupted_run_writes":
        "the module's backlog tests; the history differential against Kafka Connect",
    "sinks/kafka/test_connect_differential.py::test_the_schema_change_topic_as_debezium_in_kafka_connect_writes_it[initial]":
        "the `[no_data]` case; the initial snapshot's schema changes in `test_kafka_schema_history.py`",
    # Signals, the CLI, examples, the Spark session, secrets.
    "signals/test_kafka_signals.py::test_every_signal_type_through_kafka_acts_once_across_restarts":
        "every signal type through the signal table (`signals/test_signals.py`) and the module's other Kafka signals",
    "signals/test_kafka_signals.py::test_a_kafka_signal_is_saved_only_with_its_snapshot_under_the_iceberg_sinks_deferred_commits":
        "the Kafka signals' offsets with the other sinks (this module)",
    "ops/test_cli.py::test_demo_end_to_end_into_iceberg_prints_one_summary_line":
        "`test_demo_with_the_json_lines_sink_and_a_kept_directory`; the Iceberg sink's own tests",
    "ops/test_examples.py::test_the_iceberg_example_passes_dblog_check_with_its_jdbc_catalog":
        "the other examples through `dblog check`; the JDBC catalog's own tests",
    "ops/test_examples.py::test_a_debezium_example_converts_and_runs_unchanged[debezium-connect]":
        "the `[debezium-server]` case; the Connect JSON converted in `ops/test_debezium_config.py`",
    "ops/test_security.py::test_secrets_never_in_any_output[json-env]":
        "`test_password_never_in_logs_notifications_offsets_or_status`; every secret form in `ops/test_secrets.py`",
    "ops/test_security.py::test_tls_key_passphrase_never_in_any_output":
        "`ops/test_secrets.py` (the passphrase's forms); the password leak test",
    "sinks/iceberg/test_spark_session.py::test_a_driver_started_from_an_offline_jar_directory_writes_iceberg_tables":
        "the jar directory's resolution (`test_spark_session.py`'s other tests); the Spark session by coordinates",
    "sinks/iceberg/test_iceberg_maintenance.py::test_expiry_keeps_newest_snapshots_and_dblog_offsets":
        "`test_expiry_removes_orphan_files_only`, `test_compaction_after_many_merges`",
}
