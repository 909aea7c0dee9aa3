"""Kafka Connect's JsonConverter reading records back as a Connect sink gets them, from the
Connect worker's own jars (`lab.maven`, set "connect": `connect-json` of the Kafka the worker
runs, `lab.kafka_connect`).

`connect_data(records, workdir)`: each key and value through the JsonConverter's
`toConnectData` (`schemas.enable=true`, the key converter with `isKey`), in a child process
(`python -m lab.connect_converter IN OUT`: JPype starts one JVM per process, for good). Each
comes back described: its Connect schema (type, name, version, parameters, optional, default,
fields) and its value as the Java objects Connect made of it (`{"class", "value"}` leaves: a
`java.math.BigDecimal` of a Decimal, a `java.util.Date` of a Date or Timestamp, a `Struct`'s
fields), so records written by dblog and by Debezium can be compared as the Structs a Connect
sink gets.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from lab import maven

__all__ = ["ConverterUnavailable", "connect_data"]


class ConverterUnavailable(RuntimeError):
    """The converter's child failed (Java, JPype or the jars missing); the message says why."""


def connect_data(records: list[tuple[str, bytes | None, bytes | None]], workdir: Path,
                 timeout: float = 120.0) -> list[dict]:
    """(topic, key bytes, value bytes) records as Kafka Connect's JsonConverter (schemas on)
    reads them: for each, `{"key", "value"}`, each `{"schema", "value"}` described as the module
    docstring says (None for a null key or value, as Connect's null)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    given, described = workdir / "records.jsonl", workdir / "connect-data.jsonl"
    with open(given, "w", encoding="utf-8") as out:
        for topic, key, value in records:
            out.write(json.dumps({"topic": topic, "key": None if key is None else key.decode(),
                                  "value": None if value is None else value.decode()}) + "\n")
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(
        [sys.executable, "-m", "lab.connect_converter", str(given), str(described)],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=timeout, preexec_fn=_die_with_parent,
    )
    if result.returncode != 0:
        raise ConverterUnavailable(f"the JsonConverter could not read the records: {result.stderr.strip()[-3000:]}")
    return [json.loads(line) for line in described.read_text(encoding="utf-8").splitlines()]


def _decode_main(input_path: str, output_path: str) -> int:
    """The child of `connect_data`: each record through JsonConverter.toConnectData."""
    import jpype

    jpype.startJVM(classpath=maven.classpath("connect").split(os.pathsep))
    converter_class = jpype.JClass("org.apache.kafka.connect.json.JsonConverter")
    converters = {}
    for is_key in (True, False):  # configured as Kafka Connect configures a worker's converters
        converters[is_key] = converter_class()
        converters[is_key].configure({"schemas.enable": "true"}, is_key)
    with open(input_path, encoding="utf-8") as given, open(output_path, "w", encoding="utf-8") as out:
        for line in given:
            record = json.loads(line)
            described = {}
            for part, is_key in (("key", True), ("value", False)):
                text = record[part]
                data = None if text is None else jpype.JArray(jpype.JByte)(text.encode())
                connect = converters[is_key].toConnectData(record["topic"], data)
                described[part] = {"schema": _describe_schema(connect.schema()),
                                   "value": _describe_value(connect.value())}
            out.write(json.dumps(described) + "\n")
    return 0


def _describe_schema(schema: Any) -> dict | None:
    """A Connect schema, field by field (what a Connect sink sees of it)."""
    if schema is None:
        return None
    kind = str(schema.type().getName())
    described = {
        "type": kind,
        "optional": bool(schema.isOptional()),
        "name": None if schema.name() is None else str(schema.name()),
        "version": None if schema.version() is None else int(schema.version()),
        "parameters": None if schema.parameters() is None else
        {str(key): str(value) for key, value in schema.parameters().items()},
        "default": _describe_value(schema.defaultValue()),
    }
    if kind == "struct":
        described["fields"] = [{"name": str(field.name()), "index": int(field.index()),
                                "schema": _describe_schema(field.schema())} for field in schema.fields()]
    elif kind == "array":
        described["items"] = _describe_schema(schema.valueSchema())
    elif kind == "map":
        described["keys"], described["values"] = _describe_schema(schema.keySchema()), _describe_schema(
            schema.valueSchema())
    return described


def _describe_value(value: Any) -> Any:
    """A value Connect made, as its Java class and contents."""
    if value is None:
        return None
    import base64

    import jpype

    java_class = str(value.getClass().getName())
    if java_class == "org.apache.kafka.connect.data.Struct":
        return {"class": java_class, "fields": {str(field.name()): _describe_value(value.get(field))
                                                for field in value.schema().fields()}}
    if java_class == "java.math.BigDecimal":
        return {"class": java_class, "value": str(value.toPlainString()), "scale": int(value.scale())}
    if java_class == "java.util.Date":
        return {"class": java_class, "value": int(value.getTime())}
    if java_class == "[B":
        return {"class": java_class, "value": base64.b64encode(bytes(value)).decode()}
    if java_class == "java.nio.HeapByteBuffer":
        return {"class": java_class, "value": base64.b64encode(bytes(value.array())).decode()}
    if isinstance(value, jpype.JClass("java.util.List")):
        return {"class": java_class, "value": [_describe_value(item) for item in value]}
    if isinstance(value, jpype.JClass("java.util.Map")):
        return {"class": java_class, "value": [[_describe_value(k), _describe_value(v)] for k, v in value.items()]}
    if java_class in ("java.lang.Float", "java.lang.Double"):
        return {"class": java_class, "value": repr(float(value))}  # NaN and infinities too
    if java_class == "java.lang.Boolean":
        return {"class": java_class, "value": bool(value)}
    if java_class in ("java.lang.Byte", "java.lang.Short", "java.lang.Integer", "java.lang.Long"):
        return {"class": java_class, "value": int(value)}
    return {"class": java_class, "value": str(value)}


def _die_with_parent() -> None:
    from dblog.demo.localstack import _die_with_parent as die_with_parent

    die_with_parent()


if __name__ == "__main__":
    sys.exit(_decode_main(sys.argv[1], sys.argv[2]))
