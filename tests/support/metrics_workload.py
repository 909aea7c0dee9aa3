"""What the /metrics tests share: one parsed scrape, and the `items` table they change.

`items` holds ITEMS rows, snapshotted in chunks of CHUNK (3 windows); `write_item_changes` makes
5 inserts, 3 updates and 2 deletes on it, one transaction each, so every test knows the counts.
"""

from __future__ import annotations

import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

ITEMS = 300
CHUNK = 100


def get(url: str) -> tuple[int, str, bytes]:
    """(status, content type, body) of a GET, error statuses included."""
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read()


class Scrape:
    """One scrape of /metrics, parsed by prometheus_client's own parser: `samples` is every
    sample as (name, labels, value)."""

    def __init__(self, base: str) -> None:
        status, content_type, body = get(base + "/metrics")
        assert status == 200 and content_type.startswith("text/plain"), (status, content_type)
        self.text = body.decode()
        self.samples = [(sample.name, dict(sample.labels), sample.value)
                        for family in text_string_to_metric_families(self.text) for sample in family.samples]

    @classmethod
    def of(cls, samples: list[tuple[str, dict, float]]) -> "Scrape":
        """A scrape that saw `samples` (for testing what reads scrapes)."""
        scrape = cls.__new__(cls)
        scrape.text, scrape.samples = "", samples
        return scrape

    def value(self, name: str, /, **labels) -> float | None:
        return next((value for sample, sample_labels, value in self.samples
                     if sample == name and sample_labels == labels), None)

    def labelled(self, name: str) -> list[dict]:
        return [labels for sample, labels, _ in self.samples if sample == name]


def make_items(mariadb, database: str) -> None:
    mariadb.execute(f"CREATE TABLE `{database}`.items (id INT PRIMARY KEY, v VARCHAR(20))")
    with mariadb.connect() as connection, connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO `{database}`.items VALUES (%s, %s)",
                           [(i, f"v{i}") for i in range(1, ITEMS + 1)])


def write_item_changes(mariadb, database: str) -> None:
    """5 inserts, 3 updates, 2 deletes on items, one transaction each."""
    with mariadb.connect() as connection, connection.cursor() as cursor:
        for i in range(5):
            cursor.execute(f"INSERT INTO `{database}`.items VALUES (%s, 'new')", (ITEMS + 1 + i,))
        for i in range(1, 4):
            cursor.execute(f"UPDATE `{database}`.items SET v = 'changed' WHERE id = %s", (i,))
        for i in range(4, 6):
            cursor.execute(f"DELETE FROM `{database}`.items WHERE id = %s", (i,))
