"""What the source server must be set to for dblog to read its binlog, checked once at start.

Pure: `unsupported_settings(variables, flavor)` takes the server's global variables (names in
lower case, values as the server shows them) and returns one message per setting dblog cannot
work with, each naming the setting, why, and the remedy. The engine refuses to start on any (the
same rule as everywhere: never skip silently what would lose or corrupt changes).

What dblog handles and therefore does not refuse: binlog checksums on or off, MariaDB's
`log_bin_compress` and MySQL's `binlog_transaction_compression` (decoded), MySQL's
`binlog_row_value_options=PARTIAL_JSON` (the JSON diffs are applied to the full before image that
binlog_row_image=FULL logs: `dblog.mysql.binlog.json_diff`; a session may set it too, so nothing at
start could rule it out), semi-sync on MariaDB (see docs/architecture.md, "Visibility: what a chunk
must see"), and `binlog_row_metadata` below FULL (MySQL's default MINIMAL, MariaDB's default NO_LOG,
or a server too old to have the variable): table maps then carry no column names, keys nor
ENUM/SET members, and dblog decodes rows with the definitions of its schema history
(`decodes_from_history`; `dblog.mysql.binlog.nameless_maps` says what a map carries at each level
and what is checked against the history; docs/architecture.md, "The schema history", what still
needs FULL).
"""

from __future__ import annotations

__all__ = ["REQUIRED_VARIABLES", "SEMI_SYNC_AFTER_SYNC", "allowed_position_modes", "checked_settings",
           "decodes_from_history", "position_mode", "setting_notes", "setting_problems", "unsupported_settings"]

REQUIRED_VARIABLES = (
    "log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "gtid_mode", "gtid_strict_mode",
)

# Refused with GTID watermarks on MySQL (the engine checks it at start; `dblog check` too).
SEMI_SYNC_AFTER_SYNC = (
    "the source runs semi-sync replication with wait point AFTER_SYNC: a transaction is in the binlog "
    "before reads can see it, and on MySQL dblog cannot tell when a read sees it (untested here). "
    'Set snapshot.watermarks = "insert_insert" (needs INSERT on the signal table), or use the '
    "AFTER_COMMIT wait point"
)


def allowed_position_modes(variables: dict[str, str], flavor: str) -> tuple[str, ...]:
    """The position modes (dblog.core.file_positions) this server allows. A binlog file and
    offset always work; GTID positions need MySQL's gtid_mode=ON (every transaction named: the
    permissive modes log anonymous ones too) or MariaDB's gtid_strict_mode=ON (sequence numbers
    in binlog order)."""
    value = {name: str(variables.get(name, "")).upper() for name in ("gtid_mode", "gtid_strict_mode")}
    gtids = value["gtid_strict_mode"] in ("ON", "1") if flavor == "mariadb" else value["gtid_mode"] == "ON"
    return ("gtid", "file") if gtids else ("file",)


def position_mode(variables: dict[str, str], flavor: str, setting: str = "auto") -> str:
    """The position mode dblog uses (`source.position_mode`): "auto" chooses GTIDs on MariaDB
    (refused there without gtid_strict_mode: choose "file" explicitly) and on MySQL with
    gtid_mode=ON, a binlog file and offset on MySQL otherwise (OFF, OFF_PERMISSIVE, ON_PERMISSIVE:
    anonymous transactions have no GTID to resume after)."""
    if setting != "auto":
        return setting
    if flavor == "mysql" and "gtid" not in allowed_position_modes(variables, flavor):
        return "file"
    return "gtid"


def checked_settings(flavor: str) -> tuple[str, ...]:
    """The variables `setting_problems` judges on a server of this flavour (`dblog check`
    prints one line for each)."""
    if flavor == "mariadb":
        return ("log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "gtid_strict_mode")
    return ("log_bin", "binlog_format", "binlog_row_image", "binlog_row_metadata", "gtid_mode")


def unsupported_settings(variables: dict[str, str], flavor: str, mode: str = "gtid") -> list[str]:
    return list(setting_problems(variables, flavor, mode).values())


def decodes_from_history(variables: dict[str, str]) -> bool:
    """Whether the server logs table maps without column names (binlog_row_metadata below FULL),
    whose rows dblog decodes with its schema history's definitions."""
    return str(variables.get("binlog_row_metadata", "")).upper() != "FULL"


def setting_notes(variables: dict[str, str]) -> dict[str, str]:
    """Variable name -> how dblog works with an accepted value that changes how it reads, for
    `dblog check`."""
    if not decodes_from_history(variables):
        return {}
    value = str(variables.get("binlog_row_metadata", "")) or "not set (server too old)"
    return {"binlog_row_metadata": (
        f"{value}: table maps carry no column names, keys nor ENUM/SET members, so dblog decodes rows with its "
        "schema history (the definitions read at the first start, moved along by the binlog's DDL, saved with the "
        "offsets) and stops if a table map disagrees with it. FULL makes each row carry its own definition")}


def setting_problems(variables: dict[str, str], flavor: str, mode: str = "gtid") -> dict[str, str]:
    """Variable name -> what is wrong with its value and the remedy, for each refused setting,
    read in position mode `mode` ("file" needs no GTID setting)."""
    value = {name: str(variables.get(name, "")).upper() for name in REQUIRED_VARIABLES}
    problems: dict[str, str] = {}
    if value["log_bin"] not in ("ON", "1"):
        problems["log_bin"] = "log_bin is OFF: the server writes no binlog. Start it with --log-bin (and a server id)"
    if value["binlog_format"] != "ROW":
        problems["binlog_format"] = (
            f"binlog_format is {value['binlog_format'] or 'unknown'}: dblog reads row events only, and statements "
            "logged as text would be lost. Set binlog_format=ROW (SET GLOBAL binlog_format = 'ROW' and in the "
            "server's configuration)"
        )
    if value["binlog_row_image"] != "FULL":
        problems["binlog_row_image"] = (
            f"binlog_row_image is {value['binlog_row_image'] or 'unknown'}: the binlog would carry only some columns "
            "of a changed row, which would overwrite full rows with holes. Set binlog_row_image=FULL"
        )
    if mode == "file":
        return problems
    if flavor == "mariadb" and value["gtid_strict_mode"] not in ("ON", "1"):
        # Positions and watermarks are "the last sequence number of each domain": only a strict
        # server's sequence numbers follow its binlog order (see dblog.core.gtid).
        problems["gtid_strict_mode"] = (
            f"gtid_strict_mode is {value['gtid_strict_mode'] or 'unknown'}: the server may log a GTID whose sequence "
            "number is not above the last one of its domain (SET gtid_seq_no, errant or multi-source replica "
            "writes), which dblog's GTID positions and watermarks cannot place. Set SET GLOBAL gtid_strict_mode=ON "
            "(and gtid_strict_mode=ON in the server's configuration), or read by binlog file and position: "
            'source.position_mode = "file" (snapshots then need signal-table watermarks)'
        )
    if flavor == "mysql" and value["gtid_mode"] != "ON":
        problems["gtid_mode"] = (
            f"gtid_mode is {value['gtid_mode'] or 'unknown'}: source.position_mode = \"gtid\" resumes from GTID "
            "positions. Set gtid_mode=ON and enforce_gtid_consistency=ON, or let dblog read by binlog file and "
            'position: source.position_mode = "auto" or "file" (snapshots then need signal-table watermarks)'
        )
    return problems
