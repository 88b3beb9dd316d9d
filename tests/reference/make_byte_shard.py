#!/usr/bin/env python3
"""Write a byte-level llm.c token shard: one token per byte of a text file
(vocab 256), as uint16 after the 256 x int32 header (magic 20240520,
version 1, token count). The reference tests make their own shards with this
so they do not depend on the project's hexic-shard tool."""
import struct
import sys


def write_shard(path, tokens, magic=20240520, version=1, width=2):
    """llm.c layout: 20240520/1 holds uint16 tokens, 20240801/7 uint32."""
    header = [0] * 256
    header[0:3] = [magic, version, len(tokens)]
    with open(path, "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(struct.pack("<%d%s" % (len(tokens), "H" if width == 2 else "I"), *tokens))


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: make_byte_shard.py TEXT_FILE SHARD_FILE")
    with open(sys.argv[1], "rb") as f:
        write_shard(sys.argv[2], list(f.read()))


if __name__ == "__main__":
    main()
