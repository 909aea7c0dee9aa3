"""`dblog demo` (`run.py`) and the rig it starts: a private MariaDB (`localstack.py`), writers
(`workload.py`) and the check that the sink equals the source (`verify.py`). The tests and
benchmarks start the same rig; their other rigs are in `lab/`, outside the installed package."""
