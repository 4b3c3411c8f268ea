"""The old Azure Storage SDK's client-side encryption (azure-cosmosdb-table
1.0.6) on the entities given as JSON in the file SPEC names (each with the
names of the properties to encrypt under "encrypt"), in the table at
TABLE_ENDPOINT (Azurite's account). The key-encryption key is an AES key
wrap (RFC 3394) of 32 bytes of 11 under the id `k1`.

`python3 old_sdk.py write <table>` writes them encrypted, then reads each
back; `python3 old_sdk.py read <table>` reads each (written by another
program), decrypting and requiring encryption. Either exits non-zero
unless every entity reads as given."""

import json
import os
import sys

from azure.cosmosdb.table.tableservice import TableService
from cryptography.hazmat.backends import default_backend
from cryptography.hazmat.primitives.keywrap import aes_key_unwrap, aes_key_wrap

ACCOUNT = "devstoreaccount1"
KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/"
       "KBHBeksoGMGw==")


class Kek:
    """A key-encryption key as the SDK takes one."""

    def __init__(self, kid, key):
        self.kid, self.key = kid, key

    def wrap_key(self, key, algorithm="A256KW"):
        return aes_key_wrap(self.key, key, default_backend())

    def unwrap_key(self, key, algorithm):
        assert algorithm == "A256KW", algorithm
        return aes_key_unwrap(self.key, key, default_backend())

    def get_key_wrap_algorithm(self):
        return "A256KW"

    def get_kid(self):
        return self.kid


def main():
    mode, table = sys.argv[1], sys.argv[2]
    with open(os.environ["SPEC"]) as f:
        entities = json.load(f)
    endpoint = os.environ["TABLE_ENDPOINT"]
    service = TableService(
        connection_string=f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};"
        f"AccountKey={KEY};TableEndpoint={endpoint};"
    )
    if mode == "write":
        service.create_table(table)
    service.key_encryption_key = Kek("k1", bytes([11] * 32))
    encrypted = {}
    for e in entities:
        encrypted[(e["PartitionKey"], e["RowKey"])] = set(e.pop("encrypt"))
    service.encryption_resolver_function = (
        lambda pk, rk, name: name in encrypted[(pk, rk)]
    )
    if mode == "write":
        for e in entities:
            service.insert_entity(table, e)
    service.require_encryption = True
    for e in entities:
        read = service.get_entity(table, e["PartitionKey"], e["RowKey"])
        for name, value in e.items():
            got = read[name]
            got = got.value if hasattr(got, "value") else got
            if got != value:
                print(f"{name}: wrote {value!r}, read {got!r}")
                sys.exit(1)


if __name__ == "__main__":
    main()
