#!/usr/bin/env python3
"""Writes the first N images of a Fashion-MNIST IDX split as CSV ("label,p1,...,p784" after a
header line, the Fashion-MNIST CSV export's format): the user data of examples/custom_data.
Usage: fashion_csv.py IDX_DIR train|t10k N OUT.csv"""
import gzip
import struct
import sys

idx_dir, split, count, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with gzip.open(f"{idx_dir}/{split}-images-idx3-ubyte.gz") as f:
    _, n, rows, cols = struct.unpack(">IIII", f.read(16))
    pixels = f.read(min(n, count) * rows * cols)
with gzip.open(f"{idx_dir}/{split}-labels-idx1-ubyte.gz") as f:
    f.read(8)
    labels = f.read(min(n, count))
with open(out, "w") as f:
    f.write("label," + ",".join(f"pixel{i + 1}" for i in range(rows * cols)) + "\n")
    for i, label in enumerate(labels):
        image = pixels[i * rows * cols:(i + 1) * rows * cols]
        f.write(str(label) + "," + ",".join(map(str, image)) + "\n")
