#!/usr/bin/env python3
"""Whether two checkpoint files hold the same state (tests/chaos_test.sh).

Usage: ckpt_same.py A B. Exit 0 when they do, 1 (saying where) when not.

Sections (src/common/checkpoint_file.h) must match in name and order, and
their bytes must be equal, except embedding tables ("t/<name>" sections of a
server shard, embedding/sparse_table_io.cc): with several workers a server
meets the workers' lookups of a step in either order, so rows are created,
and listed, in an order that differs even between two runs without kills.
Tables are compared as the map id -> (last touched, updates, values and
optimizer state), with every header field and the pending sightings; the
order of rows, and of the recency list among rows touched in the same step,
is left out.
"""
import struct
import sys


def sections(path):
    data = open(path, "rb").read()
    if data[:8] != b"PSTRCKPT":
        sys.exit(f"{path}: not a checkpoint file")
    count = struct.unpack_from("<I", data, 12)[0]
    pos, out = 16, []
    for _ in range(count):
        (n,) = struct.unpack_from("<I", data, pos)
        name = data[pos + 4:pos + 4 + n].decode()
        pos += 4 + n
        (size,) = struct.unpack_from("<Q", data, pos)
        out.append((name, data[pos + 8:pos + 8 + size]))
        pos += 8 + size
    return out


def table(b):
    """A table section as comparable parts: header, rows by id, pending."""
    clock = b[:8]
    t = b[8:]
    pos = 8 + 4  # magic, version
    (n,) = struct.unpack_from("<I", t, pos)
    pos += 4 + n
    dim, slots, _ = struct.unpack_from("<III", t, pos)
    pos += 12 + 16  # clock, table_updates
    (rows,) = struct.unpack_from("<Q", t, pos)
    pos += 8
    header = clock + t[:pos]
    row_bytes = 24 + (1 + slots) * dim * 4
    by_id = {}
    for r in range(rows):
        row = t[pos + r * row_bytes:pos + (r + 1) * row_bytes]
        by_id[struct.unpack_from("<q", row, 0)[0]] = row
    pos += rows * row_bytes + rows * 4  # rows, then the recency list
    pending = t[pos:-4]  # ascending ids already; the CRC covers the order
    return header, by_id, pending


def main(a, b):
    sa, sb = sections(a), sections(b)
    if [n for n, _ in sa] != [n for n, _ in sb]:
        print(f"{a} and {b} hold different sections")
        return 1
    for (name, x), (_, y) in zip(sa, sb):
        if name.startswith("t/"):
            (hx, rx, px), (hy, ry, py) = table(x), table(y)
            if hx != hy or px != py:
                print(f"table section {name}: header or pending ids differ")
                return 1
            diff = [i for i in rx.keys() | ry.keys() if rx.get(i) != ry.get(i)]
            if diff:
                print(f"table section {name}: {len(diff)} rows differ (e.g. id {diff[0]})")
                return 1
        elif x != y:
            print(f"section {name} differs")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
