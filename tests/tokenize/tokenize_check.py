#!/usr/bin/env python3
"""hexic-tokenize against Hugging Face's `tokenizers` (issue 27, item 2).

  tokenize_check.py tool TOOL WORK      every check of the tool below
  tokenize_check.py shards TOOL WORK    only the tokenizers and shards that
                                        run_train.sh trains on (WORK/bpe.*, WORK/wide.*)

Tokenizers are trained or built here (a byte-level BPE with a BOS template,
a 70000-word WordLevel), so nothing is downloaded. Exit 77 (skipped) when
`tokenizers` is missing: it is an optional PyPI package (scripts/setup.sh).
"""
import json
import os
import resource
import shutil
import struct
import subprocess
import sys

try:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
except ImportError:
    print("tokenize: the Python package 'tokenizers' is missing (pip install tokenizers): skipped")
    sys.exit(77)

MASK64 = (1 << 64) - 1
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A heterogeneous cluster mixes fast and slow GPUs on fast and slow links.",
    "Pipelines of different batch sizes finish their micro-batches at the same time.",
    "Café, naïve, jalapeño: UTF-8 text is tokenized as bytes by a byte-level BPE.",
    "Every document ends with the end-of-document token so the model learns to stop.",
    "Tensor parallel groups split attention heads and the MLP across devices.",
    "The simulator replays one iteration event by event to price a plan.",
    "Checkpoints record each tensor's identity, so any plan can resume them.",
    "Ring attention passes key and value blocks around a context-parallel ring.",
    "A validation split is held out by document, never in the middle of one.",
    "Short.",
    "Numbers 0 1 2 3 4 5 6 7 8 9 and punctuation !?;: are tokens too.",
]


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def splitmix64(x):
    # written out again here from docs/data.md, not imported from the tool
    x = (x + 0x9E3779B97F4A7C15) & MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK64
    return x ^ (x >> 31)


# ---- tokenizers built here ----------------------------------------------------


def make_bpe(folder, eos_config=True):
    """A byte-level BPE of 300 tokens whose template adds <s> (as Llama's does)."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(SENTENCES * 4, trainer=trainer)
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", bos)])
    os.makedirs(folder)
    tok.save(os.path.join(folder, "tokenizer.json"))
    if eos_config:
        with open(os.path.join(folder, "tokenizer_config.json"), "w") as f:
            json.dump({"eos_token": "</s>", "bos_token": "<s>"}, f)
    return tok


def make_wide(folder):
    """A WordLevel tokenizer of 70000 words (ids past 65535: uint32 shards)."""
    vocab = {"<unk>": 0, "</s>": 1}
    vocab.update({f"w{i}": i + 2 for i in range(69998)})
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    os.makedirs(folder)
    tok.save(os.path.join(folder, "tokenizer.json"))
    with open(os.path.join(folder, "special_tokens_map.json"), "w") as f:
        json.dump({"eos_token": {"content": "</s>", "lstrip": False}}, f)
    return tok


def wide_documents(count):
    """Documents of words whose ids reach past 65535 (and the top id, 69999)."""
    docs = []
    for d in range(count):
        words = [f"w{(d * 7919 + k * 104729) % 69998}" for k in range(40 + d)]
        docs.append(" ".join(words + ["w69997", "w65534", "w65535"]))
    return docs


# ---- shards --------------------------------------------------------------------


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 1024:
        fail(f"{path}: {len(data)} bytes, shorter than the header")
    magic, version, count = struct.unpack("<3i", data[:12])
    if any(struct.unpack("<253i", data[12:1024])):
        fail(f"{path}: header ints 3..255 are not zero")
    width = {(20240520, 1): 2, (20240801, 7): 4}.get((magic, version))
    if width is None:
        fail(f"{path}: magic {magic} version {version}")
    if len(data) != 1024 + count * width:
        fail(f"{path}: {len(data)} bytes for {count} tokens of {width} bytes")
    fmt = "<%d%s" % (count, "H" if width == 2 else "I")
    return magic, version, list(struct.unpack(fmt, data[1024:]))


def expected_split(n, fraction, seed):
    k = min(n - 1, max(1, round(fraction * n))) if fraction else 0
    return set(sorted(range(n), key=lambda i: (splitmix64(seed ^ i), i))[:k])


def check_streams(prefix, tok, docs, eos, fraction=0.05, seed=1, template=True):
    """PREFIX.train.bin and .val.bin hold tokenizers' encode of each document,
    EOS after each, in input order, the validation documents those of the
    documented split. Returns (magic, version)."""
    magic, version, train = read_shard(prefix + ".train.bin")
    val_docs = expected_split(len(docs), fraction, seed)
    val = []
    if val_docs:
        vmagic, vversion, val = read_shard(prefix + ".val.bin")
        if (vmagic, vversion) != (magic, version):
            fail(f"{prefix}: train and val shards of different formats")
    elif os.path.exists(prefix + ".val.bin"):
        fail(f"{prefix}.val.bin written with --val-fraction 0")
    want = {"train": [], "val": []}
    for i, text in enumerate(docs):
        ids = tok.encode(text, add_special_tokens=template).ids
        want["val" if i in val_docs else "train"] += ids + [eos]
    for split, got in (("train", train), ("val", val)):
        if got != want[split]:
            first = next((k for k, (a, b) in enumerate(zip(got, want[split])) if a != b),
                         min(len(got), len(want[split])))
            fail(f"{prefix}.{split}.bin: {len(got)} tokens, {len(want[split])} expected; "
                 f"first difference at token {first}")
    return magic, version


# ---- running the tool ----------------------------------------------------------


def run_tool(tool, args, expect_rc=0, env=None, timeout=60, preexec_fn=None):
    try:
        p = subprocess.run([sys.executable, tool] + args, capture_output=True, text=True,
                           env=env, timeout=timeout, preexec_fn=preexec_fn)
    except subprocess.TimeoutExpired:
        fail(f"hexic-tokenize {' '.join(args)}: no answer in {timeout} s (a hang)")
    if p.returncode != expect_rc:
        fail(f"hexic-tokenize {' '.join(args)}: exit {p.returncode}, expected {expect_rc}\n"
             f"{p.stdout}{p.stderr}")
    return p.stdout + p.stderr


def expect_error(tool, args, needle, **kw):
    out = run_tool(tool, args, expect_rc=kw.pop("rc", 1), **kw)
    if needle not in out:
        fail(f"hexic-tokenize {' '.join(args)}: wanted '{needle}' in:\n{out}")
    return out


def write_folder(folder, docs):
    """One file per document, some in a subfolder, and a hidden file that is skipped;
    returns the documents in the tool's (sorted path) order."""
    os.makedirs(os.path.join(folder, "sub"))
    paths = []
    for i, text in enumerate(docs):
        name = f"doc{i:02d}.txt" if i % 3 else f"sub/part{i:02d}.txt"
        paths.append(name)
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            f.write(text)
    with open(os.path.join(folder, ".hidden"), "w") as f:
        f.write("never read")
    by_path = dict(zip(paths, docs))
    order = sorted(p for p in paths if "/" not in p) + sorted(p for p in paths if "/" in p)
    return [by_path[p] for p in order]


def write_jsonl(path, docs, field="text"):
    with open(path, "w", encoding="utf-8") as f:
        for i, text in enumerate(docs):
            f.write(json.dumps({"id": i, field: text}) + "\n")
            if i == 2:
                f.write("\n")  # a blank line is no document


# ---- the checks ------------------------------------------------------------------


def check_folder_and_jsonl(tool, work):
    bpe = make_bpe(os.path.join(work, "bpe"))
    eos = bpe.token_to_id("</s>")
    docs = write_folder(os.path.join(work, "corpus"), SENTENCES)
    out = run_tool(tool, [os.path.join(work, "corpus"), "-t", os.path.join(work, "bpe"),
                          "-o", os.path.join(work, "folder")])
    for line in (f"'</s>' = id {eos} (from tokenizer_config.json)", "12 documents",
                 "vocab 300: uint16 tokens (llm.c shard magic 20240520, version 1)",
                 "put in the model block: vocab = 300", "folder.val.bin: 1 document,"):
        if line not in out:
            fail(f"folder: wanted '{line}' in:\n{out}")
    if check_streams(os.path.join(work, "folder"), bpe, docs, eos) != (20240520, 1):
        fail("folder: a 300-token vocabulary not in uint16 shards")
    print(f"  a folder of {len(docs)} documents: tokenizers' ids, </s> ({eos}) after each, "
          "one validation document")

    write_jsonl(os.path.join(work, "docs.jsonl"), SENTENCES, field="body")
    args = [os.path.join(work, "docs.jsonl"), "--jsonl", "--field", "body", "-t",
            os.path.join(work, "bpe", "tokenizer.json"), "--val-fraction", "0.25", "--seed", "7"]
    run_tool(tool, args + ["-o", os.path.join(work, "jsonl")])
    check_streams(os.path.join(work, "jsonl"), bpe, SENTENCES, eos, 0.25, 7)
    run_tool(tool, args + ["-o", os.path.join(work, "again")])
    for split in ("train", "val"):
        with open(os.path.join(work, f"jsonl.{split}.bin"), "rb") as a, \
                open(os.path.join(work, f"again.{split}.bin"), "rb") as b:
            if a.read() != b.read():
                fail(f"jsonl: the {split} shard differs between two runs")
    run_tool(tool, args[:-1] + ["8", "-o", os.path.join(work, "seed8")])
    if read_shard(os.path.join(work, "seed8.val.bin")) == read_shard(os.path.join(work, "jsonl.val.bin")):
        fail("jsonl: --seed 8 chose the same validation documents as --seed 7")
    check_streams(os.path.join(work, "seed8"), bpe, SENTENCES, eos, 0.25, 8)
    print("  a JSONL file (--field body, a blank line): 3 of 12 documents for validation by "
          "--seed, the same bytes twice")

    run_tool(tool, [os.path.join(work, "corpus"), "-t", os.path.join(work, "bpe"),
                    "--no-template", "--val-fraction", "0", "-o", os.path.join(work, "plain")])
    check_streams(os.path.join(work, "plain"), bpe, docs, eos, 0, template=False)
    bare = os.path.join(work, "bare")
    make_bpe(bare, eos_config=False)
    out = run_tool(tool, [os.path.join(work, "corpus"), "-t", os.path.join(bare, "tokenizer.json"),
                          "-o", os.path.join(work, "bare")])
    if "'<|endoftext|>' = id 0 (from the tokenizer's vocabulary" not in out:
        fail(f"a bare tokenizer.json: wanted <|endoftext|> as EOS:\n{out}")
    out = run_tool(tool, [os.path.join(work, "corpus"), "-t", bare, "--eos", "2",
                          "-o", os.path.join(work, "eos2")])
    check_streams(os.path.join(work, "eos2"), bpe, docs, 2)
    print("  --val-fraction 0 writes no val shard; --no-template; EOS from a bare tokenizer.json "
          "and --eos ID")
    return bpe, docs


def check_wide(tool, work, count=12):
    wide = make_wide(os.path.join(work, "wide"))
    docs = wide_documents(count)
    folder = os.path.join(work, "wide-corpus")
    docs = write_folder(folder, docs)
    out = run_tool(tool, [folder, "-t", os.path.join(work, "wide"), "-o",
                          os.path.join(work, "wide")])
    for line in ("vocab 70000: uint32 tokens (llm.c shard magic 20240801, version 7)",
                 "'</s>' = id 1 (from special_tokens_map.json)", "vocab = 70000"):
        if line not in out:
            fail(f"wide: wanted '{line}' in:\n{out}")
    if check_streams(os.path.join(work, "wide"), wide, docs, 1) != (20240801, 7):
        fail("wide: a 70000-token vocabulary not in uint32 version-7 shards")
    top = max(read_shard(os.path.join(work, "wide.train.bin"))[2])
    if top != 69999:
        fail(f"wide: the largest token is {top}, not 69999")
    print("  a 70000-word vocabulary: uint32 tokens, magic 20240801 version 7, ids up to 69999")


def check_parquet(tool, work, bpe):
    shim = os.path.join(work, "no-pyarrow")
    os.makedirs(os.path.join(shim, "pyarrow"))
    with open(os.path.join(shim, "pyarrow", "__init__.py"), "w") as f:
        f.write("raise ImportError('pyarrow hidden by the test')\n")
    pq_file = os.path.join(work, "docs.parquet")
    with open(pq_file, "wb") as f:
        f.write(b"PAR1")
    env = dict(os.environ, PYTHONPATH=shim)
    expect_error(tool, [pq_file, "--parquet", "-t", os.path.join(work, "bpe"), "-o",
                        os.path.join(work, "pq")],
                 "docs.parquet: reading Parquet needs the Python package 'pyarrow': pip install "
                 "pyarrow", env=env)
    try:
        import pyarrow
        import pyarrow.parquet as pq
    except ImportError:
        print("  Parquet without pyarrow: a clear message (pyarrow absent here: reading skipped)")
        return
    table = pyarrow.table({"n": list(range(len(SENTENCES))), "content": SENTENCES})
    os.unlink(pq_file)
    pq.write_table(table, pq_file, row_group_size=5)
    run_tool(tool, [pq_file, "--parquet", "--field", "content", "-t", os.path.join(work, "bpe"),
                    "-o", os.path.join(work, "pq")])
    check_streams(os.path.join(work, "pq"), bpe, SENTENCES, bpe.token_to_id("</s>"))
    expect_error(tool, [pq_file, "--parquet", "-t", os.path.join(work, "bpe"), "-o",
                        os.path.join(work, "pq2")], 'no column "text" (its columns: n, content')
    print("  Parquet (3 row groups, --field content) as JSONL; without pyarrow a clear message")


def check_refusals(tool, work):
    bpe_dir = os.path.join(work, "bpe")
    corpus = os.path.join(work, "corpus")
    w = lambda name: os.path.join(work, name)

    # nothing the user wrote is replaced: an existing train or val shard, or a .tmp
    with open(w("mine.val.bin"), "w") as f:
        f.write("keep")
    expect_error(tool, [corpus, "-t", bpe_dir, "-o", w("mine")],
                 f"error: {w('mine.val.bin')} exists: refusing to replace it")
    with open(w("mine.val.bin")) as f:
        if f.read() != "keep" or os.path.exists(w("mine.train.bin")):
            fail("an existing val shard was replaced, or a train shard written beside it")
    with open(w("tmp.train.bin.tmp"), "w") as f:
        f.write("keep")
    expect_error(tool, [corpus, "-t", bpe_dir, "-o", w("tmp")], "tmp.train.bin.tmp exists")
    if os.path.exists(w("tmp.train.bin")) or os.path.exists(w("tmp.val.bin.tmp")):
        fail("a refused run left shards behind")

    # a write that fails (a file-size limit here, a full disk in life): one line, no .tmp left
    expect_error(tool, [corpus, "-t", bpe_dir, "-o", w("full")],
                 f"error: {w('full.train.bin.tmp')}: cannot write: File too large",
                 preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (1500, 1500)))
    if [n for n in os.listdir(work) if n.startswith("full.")]:
        fail("a failed write left full.* behind")

    with open(w("bad.jsonl"), "w") as f:
        f.write('{"text": "fine"}\n{"text": "fine too"}\n{"text": oops}\n')
    expect_error(tool, [w("bad.jsonl"), "--jsonl", "-t", bpe_dir, "-o", w("x")],
                 f"{w('bad.jsonl')}:3:10: error: not JSON: Expecting value")
    expect_error(tool, [w("docs.jsonl"), "--jsonl", "-t", bpe_dir, "-o", w("x")],
                 f"{w('docs.jsonl')}:1:1: error: no field \"text\" (its fields: body, id")
    with open(w("num.jsonl"), "w") as f:
        f.write('{"text": 3}\n')
    expect_error(tool, [w("num.jsonl"), "--jsonl", "-t", bpe_dir, "--val-fraction", "0", "-o", w("x")],
                 "num.jsonl:1:1: error: field \"text\" is a int, not a string")
    with open(w("latin1.txt"), "wb") as f:
        f.write(b"caf\xe9\n")
    expect_error(tool, [w("latin1.txt"), "-t", bpe_dir, "--val-fraction", "0", "-o", w("x")],
                 "latin1.txt: not UTF-8 text: byte 3 (0xe9)")
    expect_error(tool, [w("latin1.txt"), w("docs.jsonl"), "-t", bpe_dir, "--val-fraction", "0",
                        "-o", w("x")], "latin1.txt: not UTF-8 text")
    os.mkfifo(w("fifo"))
    expect_error(tool, [w("fifo"), "-t", bpe_dir, "-o", w("x")],
                 "fifo: not a regular file", timeout=20)
    expect_error(tool, [w("missing"), "-t", bpe_dir, "-o", w("x")], "missing: cannot open")
    os.mkdir(w("empty"))
    expect_error(tool, [w("empty"), "-t", bpe_dir, "-o", w("x")], "empty: the folder holds no files")
    expect_error(tool, [corpus, "-t", w("empty"), "-o", w("x")], "holds no tokenizer.json")
    with open(w("broken.json"), "w") as f:
        f.write('{"model": 1}')
    expect_error(tool, [corpus, "-t", w("broken.json"), "-o", w("x")],
                 "broken.json: not a tokenizer.json that `tokenizers` reads")
    expect_error(tool, [corpus, "-t", bpe_dir, "--eos", "<nope>", "-o", w("x")],
                 "--eos <nope>: not a token of the tokenizer")
    expect_error(tool, [corpus, "-t", bpe_dir, "--eos", "300", "-o", w("x")],
                 "--eos 300: no token has that id")
    expect_error(tool, [os.path.join(corpus, "doc01.txt"), "-t", bpe_dir, "-o", w("x")],
                 "1 document(s) cannot be split into train and validation")
    expect_error(tool, [corpus, "-t", bpe_dir, "--val-fraction", "0.9", "-o", w("x")],
                 "--val-fraction 0.9: give a value from 0 to 0.5", rc=2)
    with open(w("wrong.json"), "w") as f:
        json.dump({"eos_token": "<|im_end|>"}, f)
    os.mkdir(w("wrongeos"))
    shutil.copy(os.path.join(bpe_dir, "tokenizer.json"), w("wrongeos"))
    os.rename(w("wrong.json"), os.path.join(w("wrongeos"), "tokenizer_config.json"))
    expect_error(tool, [corpus, "-t", w("wrongeos"), "-o", w("x")],
                 "tokenizer_config.json: eos_token '<|im_end|>' is not a token of tokenizer.json")
    if [n for n in os.listdir(work) if n.startswith("x.")]:
        fail("a refused run wrote x.*")
    print("  refused, exit 1, nothing written: existing outputs, a failed write, bad JSON (located), a missing "
          "field, non-UTF-8 text, a FIFO, missing inputs, an empty folder, bad tokenizers and "
          "EOS, one document to split")


def main():
    mode, tool, work = sys.argv[1:4]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    if mode == "shards":
        bpe = make_bpe(os.path.join(work, "bpe"))
        write_folder(os.path.join(work, "corpus"), SENTENCES * 3)
        run_tool(tool, [os.path.join(work, "corpus"), "-t", os.path.join(work, "bpe"),
                        "-o", os.path.join(work, "bpe")])
        check_wide(tool, work, count=24)
        return
    bpe, _ = check_folder_and_jsonl(tool, work)
    check_wide(tool, work)
    check_parquet(tool, work, bpe)
    check_refusals(tool, work)
    shutil.rmtree(work)
    print("ok (hexic-tokenize)")


if __name__ == "__main__":
    main()
