"""Reads what tablekit wrote, and writes what tablekit then reads, with the
Azure SDK for Python (azure-data-tables, azure-storage-queue,
azure-storage-blob), against the Azurite the Rust test started.

Usage: check.py <read|write> <tables|queue|blobs> <name>

The rows, messages and blobs come from the file named by SPEC, written by
`other_sdk.rs`; every value is given as [EDM type, text] so that both sides
compare exact values (a Double by its bits). The endpoints come from
TABLE_ENDPOINT, QUEUE_ENDPOINT and BLOB_ENDPOINT. Exits 1, naming every
difference, if what this SDK reads is not what the file says.
"""

import base64
import hashlib
import json
import math
import os
import re
import struct
import sys
import uuid
from datetime import datetime, timezone

from azure.core.credentials import AzureNamedKeyCredential
from azure.data.tables import EdmType, EntityProperty, TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

ACCOUNT = "devstoreaccount1"
KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
    "K1SZFPTOtr/KBHBeksoGMGw=="
)
CREDENTIAL = AzureNamedKeyCredential(ACCOUNT, KEY)
SPEC = json.load(open(os.environ["SPEC"], encoding="utf-8"))


def seven_digits(text):
    """A DateTime's text with seven fractional digits, as tablekit gives it."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,7}))?Z", text)
    if not m:
        return text
    return "%s.%sZ" % (m.group(1), (m.group(2) or "").ljust(7, "0"))


def canonical(value):
    """A value read by this SDK as [EDM type, text]."""
    if isinstance(value, EntityProperty):
        kind, inner = value.edm_type, value.value
        if kind == EdmType.INT64:
            return ["Int64", str(int(inner))]
        if kind == EdmType.INT32:
            return ["Int32", str(int(inner))]
        if kind == EdmType.GUID:
            return ["Guid", str(inner)]
        if kind == EdmType.BINARY:
            return ["Binary", base64.b64encode(inner).decode()]
        if kind == EdmType.STRING:
            return ["String", inner]
        if kind == EdmType.DOUBLE:
            value = float(inner)
        else:
            return ["?" + str(kind), repr(inner)]
    if isinstance(value, bool):
        return ["Boolean", "true" if value else "false"]
    if isinstance(value, int):
        return ["Int32", str(value)]
    if isinstance(value, float):
        if math.isnan(value):
            return ["Double", "NaN"]
        return ["Double", struct.pack(">d", value).hex()]
    if isinstance(value, str):
        return ["String", value]
    if isinstance(value, bytes):
        return ["Binary", base64.b64encode(value).decode()]
    if isinstance(value, uuid.UUID):
        return ["Guid", str(value)]
    if isinstance(value, datetime):
        text = getattr(value, "tables_service_value", None)
        return ["DateTime", seven_digits(text) if text else value.isoformat()]
    return ["?" + type(value).__name__, repr(value)]


def to_sdk(value):
    """[EDM type, text] as this SDK is given a value to write."""
    kind, text = value
    if kind == "String":
        return text
    if kind == "Int32":
        return EntityProperty(int(text), EdmType.INT32)
    if kind == "Int64":
        return EntityProperty(int(text), EdmType.INT64)
    if kind == "Double":
        if text == "NaN":
            return float("nan")
        return struct.unpack(">d", bytes.fromhex(text))[0]
    if kind == "Boolean":
        return text == "true"
    if kind == "DateTime":
        # A time of whole microseconds goes as Python's own datetime, as a
        # Python program writes one; a finer one as its text, which keeps
        # all seven digits.
        if text.endswith("0Z"):
            return datetime.strptime(text[:-2] + "Z", "%Y-%m-%dT%H:%M:%S.%fZ").replace(
                tzinfo=timezone.utc
            )
        return EntityProperty(text, EdmType.DATETIME)
    if kind == "Guid":
        return uuid.UUID(text)
    if kind == "Binary":
        return base64.b64decode(text)
    raise ValueError(kind)


def shown(value):
    """A value for a report: a long text by its length and its first difference."""
    if value is None or len(value[1]) <= 80:
        return repr(value)
    text = value[1]
    return "%s of %d characters (%d UTF-16 units, %d UTF-8 bytes), starting %r" % (
        value[0],
        len(text),
        len(text.encode("utf-16-le")) // 2,
        len(text.encode("utf-8", "surrogatepass")),
        text[:20],
    )


def blob_bytes(blob):
    """A blob's bytes, made from its length and seed as `other_sdk.rs` makes them."""
    return bytes((i * 31 + blob["seed"]) % 251 for i in range(blob["len"]))


def tables(mode, name, problems):
    table = TableServiceClient(
        endpoint=os.environ["TABLE_ENDPOINT"], credential=CREDENTIAL
    ).get_table_client(name)
    rows = SPEC["rows"]
    if mode == "write":
        table.create_table()
        for row in rows:
            entity = {"PartitionKey": row["pk"], "RowKey": row["rk"]}
            for prop, value in row["props"].items():
                entity[prop] = to_sdk(value)
            table.create_entity(entity)
        return

    def compare(where, row, got):
        for prop, want in row["props"].items():
            have = canonical(got[prop]) if prop in got else None
            if have != want:
                problems.append(
                    "%s %r/%r %s: want %s, read %s"
                    % (where, row["pk"], row["rk"], prop, shown(want), shown(have))
                )
        extra = set(got.keys()) - set(row["props"]) - {"PartitionKey", "RowKey"}
        if extra:
            problems.append("%s %r/%r: properties not written: %s" % (where, row["pk"], row["rk"], extra))

    for row in rows:
        try:
            got = table.get_entity(row["pk"], row["rk"])
        except Exception as error:  # noqa: BLE001 - named in the report
            problems.append("get %r/%r: %s" % (row["pk"], row["rk"], error))
            continue
        compare("get", row, got)
    listed = {(e["PartitionKey"], e["RowKey"]): e for e in table.list_entities()}
    if len(listed) != len(rows):
        problems.append("the table lists %d rows, want %d" % (len(listed), len(rows)))
    for row in rows:
        got = listed.get((row["pk"], row["rk"]))
        if got is None:
            problems.append("not listed: %r/%r" % (row["pk"], row["rk"]))
        else:
            compare("list", row, got)


def queue(mode, name, problems):
    client = QueueServiceClient(
        account_url=os.environ["QUEUE_ENDPOINT"], credential=CREDENTIAL
    ).get_queue_client(name)
    texts = SPEC["messages"]
    if mode == "write":
        client.create_queue()
        for text in texts:
            client.send_message(text)
        return
    got = []
    while True:
        batch = list(client.receive_messages(max_messages=32, visibility_timeout=300))
        if not batch:
            break
        got += [m.content for m in batch]
    if sorted(got) != sorted(texts):
        problems.append("messages read %r, want %r" % (sorted(got)[:20], sorted(texts)[:20]))


def blobs(mode, name, problems):
    # Blobs past 1 MiB go up in blocks, which the Blob service keeps no MD5 for.
    container = BlobServiceClient(
        account_url=os.environ["BLOB_ENDPOINT"],
        credential=CREDENTIAL,
        max_single_put_size=1 << 20,
        max_block_size=1 << 20,
    ).get_container_client(name)
    if mode == "write":
        container.create_container()
        for blob in SPEC["blobs"]:
            container.get_blob_client(blob["name"]).upload_blob(blob_bytes(blob))
        return
    for blob in SPEC["blobs"]:
        client = container.get_blob_client(blob["name"])
        data = client.download_blob().readall()
        if data != blob_bytes(blob):
            problems.append("blob %r: other bytes (%d, want %d)" % (blob["name"], len(data), blob["len"]))
        md5 = client.get_blob_properties().content_settings.content_md5
        if md5 is None or bytes(md5) != hashlib.md5(data).digest():
            problems.append("blob %r: Content-MD5 %r is not its bytes' MD5" % (blob["name"], md5))
    listed = sorted(b.name for b in container.list_blobs())
    want = sorted(b["name"] for b in SPEC["blobs"])
    if listed != want:
        problems.append("blobs listed %r, want %r" % (listed, want))


def main():
    mode, what, name = sys.argv[1:4]
    problems = []
    {"tables": tables, "queue": queue, "blobs": blobs}[what](mode, name, problems)
    for problem in problems:
        print(problem)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
