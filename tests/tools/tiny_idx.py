"""Writes a tiny IDX data set (MNIST's format, uncompressed): 8x8 images of
3 classes, each class a bright square in its own place plus noise, so a
small MLP learns it in a few epochs. Standard library only.

usage: tiny_idx.py DIR   (writes DIR/{train,test}-{images,labels})
"""
import os
import random
import struct
import sys


def write(dir_, name, count, seed):
    rnd = random.Random(seed)
    images, labels = bytearray(), bytearray()
    for _ in range(count):
        c = rnd.randrange(3)
        for y in range(8):
            for x in range(8):
                bright = 2 * c <= x < 2 * c + 3 and 2 <= y < 5
                images.append(min(255, (45 if bright else 0) + rnd.randrange(200)))
        labels.append(c)
    with open(os.path.join(dir_, name + "-images"), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, count, 8, 8) + bytes(images))
    with open(os.path.join(dir_, name + "-labels"), "wb") as f:
        f.write(struct.pack(">II", 0x801, count) + bytes(labels))


os.makedirs(sys.argv[1], exist_ok=True)
write(sys.argv[1], "train", 1024, 1)
write(sys.argv[1], "test", 300, 2)
