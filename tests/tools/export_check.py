"""Checks a `pstrain export` .npz with numpy alone.

usage: export_check.py NPZ SPEC... [--mlp IMAGES LABELS ACCURACY]
  SPEC "name=f4:d0,d1"  a dense weight: float32 of that shape
       "name=table:dim" a server-held table: name.ids int64 [n], ascending,
                        and name.rows float32 [n, dim], n > 0
       "data_schema=FORMAT:TABLE:LINES" the data schema, JSON in uint8, of
                        FORMAT (criteo, csv) data: every categorical value
                        of the first line of the file LINES that TABLE
                        reads (all, or the columns naming it), hashed as the
                        schema says (docs/formats.md), is a row of TABLE
  --mlp: the weights fc1, fc2 are a flatten-linear-relu-linear model; its
  accuracy on the raw IDX test files must be ACCURACY (to one sample).
Every array in the file must be named by a SPEC. Prints one line; exit 1 on
the first mismatch.
"""
import struct
import sys

import numpy as np


def fail(msg):
    print("FAILED: " + msg)
    sys.exit(1)


def idx(path):
    with open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


M = (1 << 64) - 1


def mix64(x):
    x = (x + 0x9E3779B97F4A7C15) & M
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M
    return x ^ (x >> 31)


def criteo_hash(field, value):
    h = 0xCBF29CE484222325
    for b in field.to_bytes(4, "little") + value.encode():
        h = ((h ^ b) * 0x100000001B3) & M
    return mix64(h)


def check_schema(z, fmt, table, lines):
    import json

    raw = z["data_schema"]
    if raw.dtype != np.uint8 or raw.ndim != 1:
        fail("data_schema is %s %s, expected uint8 [n]" % (raw.dtype, raw.shape))
    schema = json.loads(bytes(raw).decode())
    if schema["format"] != fmt:
        fail("data_schema format %s, expected %s" % (schema["format"], fmt))
    with open(lines) as f:
        cells = f.readline().rstrip("\n").split(schema["delimiter"])
    rows = set(z[table + ".ids"].tolist())
    checked = 0
    for cell, col in zip(cells, schema["columns"]):
        if col["type"] != "categorical":
            continue
        # A column that names its tables hashes into theirs only.
        layer = table.rsplit(".", 1)[0]
        if "tables" in col and layer not in col["tables"]:
            continue
        row = criteo_hash(col["field"], cell) % col["vocab"]
        if row not in rows:
            fail("%s '%s' hashes to row %d, not in %s" % (col["name"], cell, row, table))
        checked += 1
    if checked == 0:
        fail("data_schema has no categorical column")


def main(argv):
    args = argv[1:]
    mlp = None
    if "--mlp" in args:
        at = args.index("--mlp")
        mlp = args[at + 1 : at + 4]
        args = args[:at]
    z = np.load(args[0])
    expected = set()
    for spec in args[1:]:
        name, kind = spec.split("=")
        what, dims = kind.split(":", 1)
        if name == "data_schema":
            expected.add(name)
            table, lines = dims.split(":", 1)
            check_schema(z, what, table, lines)
        elif what == "f4":
            shape = tuple(int(d) for d in dims.split(","))
            expected.add(name)
            if name not in z.files:
                fail("no array " + name)
            a = z[name]
            if a.dtype != np.float32 or a.shape != shape:
                fail("%s is %s %s, expected float32 %s" % (name, a.dtype, a.shape, shape))
            if not np.isfinite(a).all() or not a.any():
                fail(name + " is not finite, or all zeros")
        else:
            expected |= {name + ".ids", name + ".rows"}
            ids, rows = z[name + ".ids"], z[name + ".rows"]
            if ids.dtype != np.int64 or rows.dtype != np.float32:
                fail("%s: dtypes %s, %s" % (name, ids.dtype, rows.dtype))
            if ids.ndim != 1 or ids.size == 0 or rows.shape != (ids.size, int(dims)):
                fail("%s: ids %s, rows %s, dim %s" % (name, ids.shape, rows.shape, dims))
            if not (np.diff(ids) > 0).all() or ids[0] < 0:
                fail(name + ".ids are not ascending and unique")
            if not np.isfinite(rows).all():
                fail(name + ".rows are not finite")
    if set(z.files) != expected:
        fail("arrays %s, expected %s" % (sorted(z.files), sorted(expected)))
    if mlp:
        images, labels = idx(mlp[0]), idx(mlp[1])
        x = images.reshape(len(images), -1).astype(np.float32) * np.float32(1.0 / 255.0)
        h = np.maximum(x @ z["fc1.weight"].T + z["fc1.bias"], 0)
        logits = h @ z["fc2.weight"].T + z["fc2.bias"]
        accuracy = float((logits.argmax(1) == labels).mean())
        if abs(accuracy - float(mlp[2])) > 1.0 / len(labels) + 1e-4:
            fail("the exported MLP scores %.4f, eval said %s" % (accuracy, mlp[2]))
    print("export ok: %d arrays" % len(z.files))


main(sys.argv)
