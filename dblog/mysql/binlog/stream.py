"""The binlog connection: a replica's dump session over a pymysql connection (the I/O half).

pymysql does what it does well (connecting, authenticating, the session variables a replica sets);
this module registers the replica, asks for the binlog from a GTID position and then reads the
dump's packets itself, straight from the connection's buffered socket: a 4-byte header (length,
sequence) and the payload, joined when the server splits an event over several 16 MiB packets.
What it returns is the event's bytes, for `dblog.mysql.binlog.decoder`.

Replica protocol (both flavours): `@master_binlog_checksum` announces that dblog understands the
server's checksums, `@master_heartbeat_period` asks for heartbeats while the binlog is idle.
MariaDB: `@mariadb_slave_capability=4` (GTID events), `@slave_connect_state` the GTID position, then
COM_BINLOG_DUMP with an empty file name. Without GTIDs (file-position mode, both flavours):
COM_BINLOG_DUMP with the file name and offset. MySQL: COM_BINLOG_DUMP_GTID with the executed set encoded
as (server UUID, intervals), and with tags (MySQL 8.3+) in MySQL's tagged format; untested
against a server here (no MySQL server installable).
"""

from __future__ import annotations

import select
import socket
import struct
import uuid as uuid_module

from typing import Any, Mapping

import pymysql
import pymysql.err

from dblog.core.binlog_identity import BinlogIdentity
from dblog.core.file_positions import FilePosition
from dblog.core.gtid import GtidSet
from dblog.mysql.connection_settings import ConnectionSettings
from dblog.mysql.server_errors import CR_SERVER_LOST
from dblog.mysql.server_session import binlog_identity

try:
    from fcntl import ioctl
    from termios import FIONREAD
except ImportError:  # not POSIX: `pending` asks select() each time
    ioctl = FIONREAD = None

__all__ = ["BinlogConnection", "encode_mysql_gtid_set"]

COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
COM_BINLOG_DUMP_GTID = 0x1E
BINLOG_THROUGH_GTID = 0x04
_MAX_PACKET = 0xFFFFFF
_TAGGED_FORMAT = 1  # mysql::gtid::Gtid_format::tagged (libs/mysql/gtid/gtid_format.h)


def encode_mysql_gtid_set(position: GtidSet) -> bytes:
    """The GTID set as COM_BINLOG_DUMP_GTID carries it, as MySQL writes it (Gtid_set::encode,
    sql/rpl_gtid_set.cc, and encode_nsids_format): the number of sources (8 bytes, little-endian),
    then per source its UUID's 16 bytes, the number of its intervals (8 bytes) and each interval
    as [first, last + 1) in two 8-byte integers.

    A set with a tagged GTID (MySQL 8.3+) is written in the tagged format: the count's lowest and
    highest byte hold the format (1), the count sits in the six bytes between, and each UUID is
    followed by its tag (Tsid::encode_tsid, Tag::encode_tag: the tag's length as a
    variable-length integer, `length << 1` for a tag's at most 32 characters, then its
    characters; untagged sources an empty tag). A set without tags keeps the untagged format,
    the only one a server before 8.3 reads."""
    sources = sorted(position.sources())
    tagged = any(":" in source for source in sources)
    count = (_TAGGED_FORMAT << 56 | len(sources) << 8 | _TAGGED_FORMAT) if tagged else len(sources)
    parts = [struct.pack("<Q", count)]
    for source in sources:
        uuid, _, tag = source.partition(":")
        parts.append(uuid_module.UUID(uuid).bytes)
        if tagged:
            parts.append(bytes((len(tag) << 1,)) + tag.encode("ascii"))
        intervals = position.intervals(source)
        parts.append(struct.pack("<Q", len(intervals)))
        parts.extend(struct.pack("<QQ", first, last + 1) for first, last in intervals)
    return b"".join(parts)


class BinlogConnection:
    """One dump session. `open(position)` starts it; `read_event()` returns the next event's bytes
    (blocking; heartbeats come every `heartbeat_seconds` while the binlog is idle).

    `settings`: the source's ConnectionSettings (TLS included), or a pymysql-style dict of them.
    Without a read timeout a silently dead connection blocks forever; heartbeats come at most
    every half of it, so an idle stream never times out."""

    def __init__(self, settings: ConnectionSettings | Mapping[str, Any], server_id: int, heartbeat_seconds: float,
                 flavor: str, read_timeout: float | None = None) -> None:
        self._settings = ConnectionSettings.of(settings)
        self._read_timeout = read_timeout or max(30, heartbeat_seconds * 10)
        self._server_id = server_id
        self._heartbeat_seconds = heartbeat_seconds
        self._flavor = flavor
        self._connection: pymysql.Connection | None = None
        self._read = None
        # Bytes of the stream known to have arrived and not read yet (`pending`): at least this many
        self._arrived = 0
        self.checksum = False  # the server's events end with a CRC32 (until a format description says otherwise)
        self.identity: BinlogIdentity | None = None  # whose binlog the session reads (`binlog_identity`), once open

    def open(self, position: GtidSet, at: FilePosition | None = None) -> None:
        """Start the dump after `position` (GTIDs), or at the file position `at` (file-position
        mode, dblog.core.file_positions: COM_BINLOG_DUMP with the file and offset, both flavours)."""
        connection = self._settings.connect(autocommit=False, read_timeout=self._read_timeout)
        self._connection = connection
        self.identity = binlog_identity(connection)
        with connection.cursor() as cursor:
            cursor.execute("SELECT @@global.binlog_checksum")
            checksum = cursor.fetchone()[0]
            cursor.execute("SET @master_binlog_checksum = %s", (checksum,))
            self.checksum = str(checksum.decode() if isinstance(checksum, bytes) else checksum).upper() == "CRC32"
            # Nanoseconds; kept under half the read timeout so that an idle stream never times out.
            cursor.execute("SET @master_heartbeat_period = %s",
                           (int(min(self._heartbeat_seconds, self._read_timeout / 2) * 1_000_000_000),))
            if self._flavor == "mariadb":
                cursor.execute("SET @mariadb_slave_capability = 4")
                if at is None:
                    cursor.execute("SET @slave_connect_state = %s", (str(position),))
                cursor.execute("SET @slave_gtid_strict_mode = 0")
                cursor.execute("SET @slave_gtid_ignore_duplicates = 0")
        self._register()
        if at is not None:
            name = at.file.encode()
            command = struct.pack("<BIHI", COM_BINLOG_DUMP, at.pos, 0, self._server_id) + name
        elif self._flavor == "mariadb":
            # position 4 of no file: with @slave_connect_state set, the server starts at the GTIDs.
            command = struct.pack("<BIHI", COM_BINLOG_DUMP, 4, 0, self._server_id)
        else:
            data = encode_mysql_gtid_set(position)
            command = (struct.pack("<BHIIQI", COM_BINLOG_DUMP_GTID, BINLOG_THROUGH_GTID, self._server_id, 0, 4,
                                   len(data)) + data)
        self._command(command)
        self._read = connection._rfile.read
        self._arrived = 0

    def _register(self) -> None:
        host = b""
        user = self._settings.user.encode()
        body = (struct.pack("<BI", COM_REGISTER_SLAVE, self._server_id)
                + bytes((len(host),)) + host + bytes((len(user),)) + user + b"\0"
                + struct.pack("<HII", 0, 0, 0))
        self._command(body)
        self._connection._read_packet()  # OK, or raises the server's error

    def _command(self, payload: bytes) -> None:
        connection = self._connection
        connection._next_seq_id = 0
        connection._write_bytes(struct.pack("<I", len(payload))[:3] + b"\0" + payload)
        connection._next_seq_id = 1

    def read_event(self) -> bytes:
        """The next event (without the status byte). Raises pymysql errors: the server's error
        packet as its MySQLError, a lost connection as OperationalError 2013."""
        read = self._read
        if read is None:
            raise pymysql.err.InterfaceError(0, "the binlog connection is closed")
        try:
            header = read(4)
            length = header[0] | header[1] << 8 | header[2] << 16
            payload = read(length)
            if len(header) < 4 or len(payload) < length:
                raise EOFError
            self._arrived -= 4 + length
            if length == _MAX_PACKET:  # the event continues in the next packet(s)
                parts = [payload]
                while length == _MAX_PACKET:
                    header = read(4)
                    length = header[0] | header[1] << 8 | header[2] << 16
                    parts.append(read(length))
                    if len(header) < 4 or len(parts[-1]) < length:
                        raise EOFError
                    self._arrived -= 4 + length
                payload = b"".join(parts)
        except (OSError, EOFError, TypeError, IndexError) as error:
            self.close()
            # What happened to the connection, never the reading code's own exception (an empty
            # read indexed is IndexError('index out of range'): the peer closed the socket).
            why = (error.strerror or type(error).__name__) if isinstance(error, OSError) and not isinstance(
                error, EOFError) else "the server or the network closed the connection"
            raise pymysql.err.OperationalError(
                CR_SERVER_LOST, f"Lost connection to the server while reading the binlog ({why})") from None
        status = payload[0]
        if status == 0:
            return payload[1:]
        if status == 0xFF:
            pymysql.err.raise_mysql_exception(payload)
        if status == 0xFE:
            raise pymysql.err.OperationalError(CR_SERVER_LOST, "the server ended the binlog stream")
        raise pymysql.err.OperationalError(CR_SERVER_LOST, f"unexpected binlog packet status {status}")

    def pending(self) -> bool:
        """Whether more of the stream has arrived on the socket (so that reading on does not wait
        for the server). False can be wrong (events already in the connection's read buffer are
        not looked at, one system call less) but True cannot: a caller that batches events
        while this is True never holds one back waiting for the server.

        One system call answers for many events: it tells how many bytes have arrived
        (FIONREAD: in the kernel; TLS: decrypted in the SSL object, since the kernel's count is
        of records whose plaintext is shorter), and until the events read since add up to that
        many, more has arrived. A select() per call took a sixth of the reader process's time
        in a catch-up (py-spy; a transaction asks once)."""
        if self._arrived > 0:
            return True
        connection = self._connection
        if connection is None:
            return False
        sock = connection._sock
        try:
            if hasattr(sock, "pending"):  # TLS
                self._arrived = sock.pending()
                return self._arrived > 0 or bool(select.select((sock,), (), (), 0)[0])
            if ioctl is None:
                return bool(select.select((sock,), (), (), 0)[0])
            self._arrived = struct.unpack("i", ioctl(sock.fileno(), FIONREAD, b"\0\0\0\0"))[0]
            return self._arrived > 0
        except (OSError, ValueError):
            self._arrived = 0
            return False

    def close(self) -> None:
        """Drop the connection. May be called from another thread to unblock `read_event`."""
        connection, self._connection = self._connection, None
        self._read = None
        self._arrived = 0
        if connection is None:
            return
        sock = getattr(connection, "_sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        try:
            connection._force_close()
        except Exception:  # already broken: nothing left to release
            pass

    def register_on(self, connection: pymysql.Connection) -> None:
        """Register as a replica on `connection` (opened by the caller) and stop there, no dump:
        raises the server's error when the user lacks REPLICATION SLAVE (`dblog check`). Unlike
        a dump, a registration does not end another reader's dump with the same server id."""
        self._connection = connection
        try:
            self._register()
        finally:
            self._connection = None
