#!/usr/bin/env python3
"""hexic-tokenize: documents (text files, JSONL or Parquet) and a Hugging Face
tokenizer in, llm.c token shards out: PREFIX.train.bin and PREFIX.val.bin, the
format a hexic train block's `data` reads (docs/data.md).

Every document is encoded on its own (the tokenizer's template included, as
`tokenizer(text)` in transformers does) and followed by the end-of-document
token, so a sequence that crosses a boundary sees where one document ends.
Documents, not tokens, are split between train and validation, by a seeded
hash of their index, so the split is the same on every machine and run.
Needs the `tokenizers` package (pip install tokenizers); Parquet needs pyarrow.
"""
import argparse
import errno
import heapq
import json
import os
import stat
import sys
from array import array

PROG = "hexic-tokenize"
HEADER_INTS = 256
MAGIC_U16, VERSION_U16 = 20240520, 1
MAGIC_U32, VERSION_U32 = 20240801, 7
MAX_SHARD_TOKENS = 2**31 - 1  # the header's count is an int32
MAX_DOCUMENT_BYTES = 1 << 30  # one document is encoded in one call
BATCH_CHARS = 1 << 20  # documents are encoded in batches of about this much text
MASK64 = (1 << 64) - 1
NO_HARD_LINKS = (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK)
# Tried in this order when no tokenizer_config.json / special_tokens_map.json
# names the end-of-sequence token: GPT-2's, Llama 3's, Llama 2's, Gemma's.
KNOWN_EOS = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>")


class Refusal(Exception):
    """A bad input or output: printed as one line, exit 1."""


def splitmix64(x):
    """The runtime's hxk_splitmix64 (kernels/), so the split is specified exactly."""
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


def import_tokenizers():
    try:
        import tokenizers
    except ImportError:
        raise Refusal("the Python package 'tokenizers' is missing: pip install tokenizers")
    return tokenizers


# ---- the tokenizer and its end-of-document token ----------------------------


def load_tokenizer(path):
    """PATH: a tokenizer.json, or a folder holding one. Returns (tokenizer, file, folder)."""
    tokenizers = import_tokenizers()
    file = os.path.join(path, "tokenizer.json") if os.path.isdir(path) else path
    if not os.path.exists(file):
        where = f"{path} holds no tokenizer.json" if os.path.isdir(path) else f"{path}: no such file"
        raise Refusal(f"--tokenizer: {where} (a tokenizer.json or a Hugging Face tokenizer folder)")
    check_regular(file)
    try:
        tok = tokenizers.Tokenizer.from_file(file)
    except Exception as e:  # the Rust side raises its own exception types
        raise Refusal(f"{file}: not a tokenizer.json that `tokenizers` reads: {e}")
    return tok, file, os.path.dirname(os.path.abspath(file))


def eos_named_in(folder):
    """(token text, source file) from tokenizer_config.json or special_tokens_map.json."""
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        file = os.path.join(folder, name)
        if not os.path.isfile(file):
            continue
        try:
            with open(file, encoding="utf-8") as f:
                config = json.load(f)
        except (OSError, ValueError) as e:
            raise Refusal(f"{file}: cannot read it as JSON: {e}")
        eos = config.get("eos_token") if isinstance(config, dict) else None
        if isinstance(eos, dict):  # {"content": "</s>", "lstrip": false, ...}
            eos = eos.get("content")
        if isinstance(eos, str) and eos:
            return eos, name
    return None, None


def find_eos(tok, folder, override):
    """(id, text, where it came from): --eos, the tokenizer's config files, a known name."""
    if override is not None:
        if override.isdigit():
            eos_id = int(override)
            text = tok.id_to_token(eos_id)
            if text is None:
                raise Refusal(f"--eos {override}: no token has that id in the tokenizer")
            return eos_id, text, "--eos"
        eos_id = tok.token_to_id(override)
        if eos_id is None:
            raise Refusal(f"--eos {override}: not a token of the tokenizer (give a token or an id)")
        return eos_id, override, "--eos"
    text, source = eos_named_in(folder)
    if text is not None:
        eos_id = tok.token_to_id(text)
        if eos_id is None:
            raise Refusal(f"{os.path.join(folder, source)}: eos_token {text!r} is not a token "
                          "of tokenizer.json (pass --eos TOKEN)")
        return eos_id, text, source
    for text in KNOWN_EOS:
        eos_id = tok.token_to_id(text)
        if eos_id is not None:
            return eos_id, text, "the tokenizer's vocabulary (no tokenizer_config.json)"
    raise Refusal("no end-of-document token: no tokenizer_config.json or special_tokens_map.json "
                  f"names an eos_token beside the tokenizer, and none of {', '.join(KNOWN_EOS)} "
                  "is in it; pass --eos TOKEN or --eos ID")


def vocab_needed(tok):
    """One more than the largest id: what the model's `vocab` must be at least."""
    ids = tok.get_vocab(with_added_tokens=True).values()
    return max(ids) + 1 if ids else 0


# ---- documents -------------------------------------------------------------


def check_regular(path):
    """Only regular files are read: a FIFO would block, a device never ends."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise Refusal(f"{path}: cannot open: {e.strerror}")
    if not stat.S_ISREG(st.st_mode):
        raise Refusal(f"{path}: not a regular file (a FIFO, device or socket is not read)")
    return st


def text_files(inputs):
    """Each input file, and every file under each input folder (sorted, hidden names skipped)."""
    files = []
    for path in inputs:
        if not os.path.isdir(path):
            check_regular(path)
            files.append(path)
            continue
        found = []
        for top, dirs, names in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            found += [os.path.join(top, n) for n in sorted(names) if not n.startswith(".")]
        if not found:
            raise Refusal(f"{path}: the folder holds no files")
        for f in found:
            check_regular(f)
        files += found
    return files


def read_text(path):
    st = check_regular(path)
    if st.st_size > MAX_DOCUMENT_BYTES:
        raise Refusal(f"{path}: {st.st_size} bytes: one document is at most {MAX_DOCUMENT_BYTES} "
                      "bytes (split the file)")
    with open(path, "rb") as f:
        data = f.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Refusal(f"{path}: not UTF-8 text: byte {e.start} ({data[e.start]:#04x}): {e.reason}")


def jsonl_records(path, field):
    """(line number, text) of every non-blank line of a JSONL file."""
    check_regular(path)
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():  # as count_documents counts
                continue
            where = f"{path}:{number}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise Refusal(f"{where}:{e.start + 1}: error: not UTF-8: {e.reason}")
            if len(raw) > MAX_DOCUMENT_BYTES:
                raise Refusal(f"{where}:1: error: a line of {len(raw)} bytes: one document is at "
                              f"most {MAX_DOCUMENT_BYTES} bytes")
            try:
                record = json.loads(line)
            except ValueError as e:
                col = getattr(e, "colno", 1)
                raise Refusal(f"{where}:{col}: error: not JSON: {getattr(e, 'msg', e)}")
            if not isinstance(record, dict):
                raise Refusal(f"{where}:1: error: a JSON {type(record).__name__}, not an object")
            if field not in record:
                fields = ", ".join(sorted(record)) or "none"
                raise Refusal(f"{where}:1: error: no field \"{field}\" (its fields: {fields}; "
                              "pick one with --field)")
            text = record[field]
            if not isinstance(text, str):
                raise Refusal(f"{where}:1: error: field \"{field}\" is a "
                              f"{type(text).__name__}, not a string")
            yield number, text


def parquet_file(path):
    check_regular(path)
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise Refusal(f"{path}: reading Parquet needs the Python package 'pyarrow': "
                      "pip install pyarrow (or convert the file to JSONL)")
    try:
        return pq.ParquetFile(path)
    except Exception as e:
        raise Refusal(f"{path}: not a Parquet file pyarrow reads: {e}")


def parquet_records(path, field):
    """(row number from 1, text) of every row of a Parquet file's column FIELD."""
    pf = parquet_file(path)
    names = pf.schema_arrow.names
    if field not in names:
        raise Refusal(f"{path}: no column \"{field}\" (its columns: {', '.join(names)}; "
                      "pick one with --field)")
    row = 0
    for batch in pf.iter_batches(columns=[field], batch_size=1024):
        for value in batch.column(0).to_pylist():
            row += 1
            if not isinstance(value, str):
                what = "null" if value is None else type(value).__name__
                raise Refusal(f"{path}: row {row}: column \"{field}\" is {what}, not a string")
            yield row, value


def count_documents(args, files):
    """How many documents the inputs hold, before any is encoded: the split needs it."""
    if args.format == "text":
        return len(files)
    if args.format == "parquet":
        return sum(parquet_file(f).metadata.num_rows for f in files)
    total = 0
    for f in files:
        with open(f, "rb") as fh:
            total += sum(1 for raw in fh if raw.strip())
    return total


def documents(args, files):
    """(name, text) of every document, in input order."""
    for f in files:
        if args.format == "text":
            yield f, read_text(f)
        elif args.format == "jsonl":
            for number, text in jsonl_records(f, args.field):
                yield f"{f}:{number}", text
        else:
            for row, text in parquet_records(f, args.field):
                yield f"{f}: row {row}", text


# ---- the split ---------------------------------------------------------------


def validation_documents(n, fraction, seed):
    """Indices of the validation documents: the round(fraction * n) (at least one when
    fraction > 0) whose splitmix64(seed XOR index) is smallest."""
    if fraction == 0:
        return frozenset()
    if n < 2:
        raise Refusal(f"{n} document(s) cannot be split into train and validation: give more "
                      "documents (one per file, or per JSONL line) or --val-fraction 0")
    k = min(n - 1, max(1, round(fraction * n)))
    return frozenset(heapq.nsmallest(k, range(n), key=lambda i: (splitmix64(seed ^ i), i)))


# ---- shards --------------------------------------------------------------------


class Shard:
    """An llm.c shard written to PATH.tmp (created, never replaced) and linked to
    PATH only when complete, so an existing PATH is never written over."""

    def __init__(self, path, wide):
        self.path, self.tmp, self.wide = path, path + ".tmp", wide
        self.count, self.documents = 0, 0
        try:
            self.f = open(self.tmp, "xb")
        except FileExistsError:
            raise Refusal(f"{self.tmp} exists (a run that stopped?): refusing to replace it; "
                          "remove it or pick another prefix")
        except OSError as e:
            raise Refusal(f"{self.tmp}: cannot create: {e.strerror}")
        self.write(bytes(4 * HEADER_INTS))

    def write(self, data):
        try:
            self.f.write(data)
        except OSError as e:
            raise Refusal(f"{self.tmp}: cannot write: {e.strerror}")

    def append(self, ids):
        if self.count + len(ids) > MAX_SHARD_TOKENS:
            raise Refusal(f"{self.path}: more than {MAX_SHARD_TOKENS} tokens, the most an llm.c "
                          "shard's header counts: tokenize the input in parts")
        body = array("I" if self.wide else "H", ids)
        if sys.byteorder != "little":
            body.byteswap()
        self.write(body.tobytes())
        self.count += len(ids)

    def finish(self):
        magic, version = (MAGIC_U32, VERSION_U32) if self.wide else (MAGIC_U16, VERSION_U16)
        header = array("i", [magic, version, self.count] + [0] * (HEADER_INTS - 3))
        if sys.byteorder != "little":
            header.byteswap()
        try:
            self.f.seek(0)  # flushes the body first
            self.f.write(header.tobytes())
            self.f.flush()
            os.fsync(self.f.fileno())
            self.f.close()
        except OSError as e:
            raise Refusal(f"{self.tmp}: cannot write: {e.strerror}")
        try:
            os.link(self.tmp, self.path)  # fails if PATH appeared meanwhile: never replaced
        except FileExistsError:
            raise Refusal(f"{self.path} exists: refusing to replace it")
        except OSError as e:
            if e.errno not in NO_HARD_LINKS:
                raise
            # a file system without hard links: rename, after one more look
            refuse_existing([self.path])
            os.rename(self.tmp, self.path)
            return
        os.unlink(self.tmp)

    def discard(self):
        try:
            self.f.close()  # flushes what a failed write left: that fails again
        except OSError:
            pass
        if os.path.exists(self.tmp):
            os.unlink(self.tmp)


def refuse_existing(paths):
    for p in paths:
        if os.path.lexists(p):
            raise Refusal(f"{p} exists: refusing to replace it (remove it or pick another prefix)")


# ---- the run -------------------------------------------------------------------


def batches(docs):
    """Documents grouped so that each encode_batch call gets about BATCH_CHARS of text."""
    batch, chars = [], 0
    for index, (name, text) in enumerate(docs):
        batch.append((index, name, text))
        chars += len(text)
        if chars >= BATCH_CHARS:
            yield batch
            batch, chars = [], 0
    if batch:
        yield batch


def tokenize(args, tok, eos_id, files, val, shards, vocab):
    """Encodes every document into its split's shard, EOS after each; returns the
    number of empty documents (skipped: they would add a bare EOS)."""
    empty = 0
    for batch in batches(documents(args, files)):
        texts = [text for _, _, text in batch]
        encodings = tok.encode_batch(texts, add_special_tokens=not args.no_template)
        for (index, name, text), enc in zip(batch, encodings):
            if not text:
                empty += 1
                continue
            ids = enc.ids
            if ids and max(ids) >= vocab:  # only a tokenizer that reports ids past its vocabulary
                raise Refusal(f"{name}: token id {max(ids)} is past the vocabulary ({vocab})")
            shard = shards["val" if index in val else "train"]
            shard.append(ids + [eos_id])
            shard.documents += 1
    return empty


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Tokenizes documents with a Hugging Face tokenizer into llm.c shards "
        "PREFIX.train.bin and PREFIX.val.bin for a hexic train block's `data` (docs/data.md).")
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="text files or folders of them (one document per file); with --jsonl "
                   "or --parquet, files of records")
    p.add_argument("-t", "--tokenizer", required=True,
                   help="a tokenizer.json, or a folder holding one (and tokenizer_config.json)")
    p.add_argument("-o", "--output", required=True, metavar="PREFIX",
                   help="writes PREFIX.train.bin and PREFIX.val.bin; neither may exist")
    form = p.add_mutually_exclusive_group()
    form.add_argument("--jsonl", dest="format", action="store_const", const="jsonl",
                      help="inputs are JSON Lines files: one document per line, in --field")
    form.add_argument("--parquet", dest="format", action="store_const", const="parquet",
                      help="inputs are Parquet files: one document per row, in column --field")
    p.set_defaults(format="text")
    p.add_argument("--field", default="text", help="the JSONL field or Parquet column (text)")
    p.add_argument("--eos", help="end-of-document token or id (default: the tokenizer's "
                   "eos_token from tokenizer_config.json or special_tokens_map.json)")
    p.add_argument("--val-fraction", type=float, default=0.05,
                   help="share of documents for validation, 0 to 0.5 (0.05)")
    p.add_argument("--seed", type=int, default=1, help="the split's seed (1)")
    p.add_argument("--no-template", action="store_true",
                   help="encode without the tokenizer's template (no BOS a Llama tokenizer adds)")
    args = p.parse_intermixed_args(argv)  # INPUTs before and after options
    if not 0 <= args.val_fraction <= 0.5:
        p.error(f"--val-fraction {args.val_fraction}: give a value from 0 to 0.5")
    if not 0 <= args.seed <= MASK64:
        p.error(f"--seed {args.seed}: give a value from 0 to 2^64-1")
    return args


def input_files(args):
    if args.format == "text":
        return text_files(args.inputs)
    for f in args.inputs:
        if os.path.isdir(f):
            raise Refusal(f"{f}: a folder: --{args.format} takes files")
        check_regular(f)
    return list(args.inputs)


def run(args):
    files = input_files(args)
    tok, tok_file, folder = load_tokenizer(args.tokenizer)
    eos_id, eos_text, eos_source = find_eos(tok, folder, args.eos)
    vocab = vocab_needed(tok)
    wide = vocab > 1 << 16
    n = count_documents(args, files)
    if n == 0:
        raise Refusal("the inputs hold no documents")
    val = validation_documents(n, args.val_fraction, args.seed)
    paths = {"train": args.output + ".train.bin"}
    if val:
        paths["val"] = args.output + ".val.bin"
    refuse_existing(paths.values())
    shards = {}
    try:
        for split, path in paths.items():
            shards[split] = Shard(path, wide)
        empty = tokenize(args, tok, eos_id, files, val, shards, vocab)
        for split, shard in shards.items():
            if shard.documents == 0:
                raise Refusal(f"the {split} split holds only empty documents: nothing to write")
        for shard in shards.values():
            shard.finish()
    finally:
        for shard in shards.values():
            shard.discard()
    report(tok_file, vocab, wide, eos_id, eos_text, eos_source, n, empty, shards)


def counted(n, noun):
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def report(tok_file, vocab, wide, eos_id, eos_text, eos_source, n, empty, shards):
    magic, version, width = (MAGIC_U32, VERSION_U32, 32) if wide else (MAGIC_U16, VERSION_U16, 16)
    print(f"{PROG}: tokenizer {tok_file}: vocab {vocab}: uint{width} tokens "
          f"(llm.c shard magic {magic}, version {version})")
    print(f"{PROG}: end of document: {eos_text!r} = id {eos_id} (from {eos_source}), "
          "after every document")
    skipped = f" ({empty} empty, skipped)" if empty else ""
    print(f"{PROG}: {counted(n, 'document')}{skipped}")
    for shard in shards.values():
        print(f"{PROG}: wrote {shard.path}: {counted(shard.documents, 'document')}, "
              f"{counted(shard.count, 'token')}")
    if "val" not in shards:
        print(f"{PROG}: no validation split (--val-fraction 0)")
    print(f"put in the model block: vocab = {vocab}")


def main(argv):
    args = parse_args(argv)
    try:
        run(args)
    except Refusal as e:
        msg = str(e)
        # located messages (FILE:LINE:COL: error: ...) are printed as they are
        print(msg if ": error: " in msg else f"{PROG}: error: {msg}", file=sys.stderr)
        return 1
    except OSError as e:  # a failed read or write (a full disk): what and where, no traceback
        print(f"{PROG}: error: {e.filename or 'I/O'}: {e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
