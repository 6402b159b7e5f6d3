"""scripts/bench/peers_data.py: the data-heavy workloads of scripts/bench/peers (issue 32:
msort, bigpipe, wordcount) on Dask distributed and on Python's own sequential loop, with the
tasks, sizes and structure of our examples/bench/msort.c, bigpipe.c and wordcount.c, and our
kernels themselves (the `data` module through peers_kernels.py) on both:

  msort      the dc merge sort of BENCH_MSORT_N (20 000 000) xorshift32 uint32 (msort.c's
             generator), leaves of at most BENCH_MSORT_CUTOFF (262 144) values sorted by
             data:sort (qsort), halves made by data:halve, merged pairwise by data:merge. The
             80 MB task is scattered to a worker inside the timed part (our client sends it to
             a server). Our dc asks data:small at each node; here the tree is built from the
             counts (the same tree: small is `count <= cut-off`).
  bigpipe    --tasks (20) seeds through data:gen (16 MiB, or BENCH_BIGPIPE_MIB), data:xform and
             data:sum: 3 client.map in a row, only the 8-byte sums gathered (the 16 MiB values
             stay on the workers, as our lazy binding keeps them on the servers).
  wordcount  data:wc_split of wordcount.c's task (BENCH_WORDCOUNT_MIB 1024 MiB of text in
             BENCH_WORDCOUNT_PARTS 32 parts, seed 12345), data:wc_gen then data:wc_count on
             each part, and one data:wc_merge of all the tables (our map's merge gets the k
             results at once).

The sequential side runs the same kernels in the same order in this process, one at a time.
Each workload returns (result, checksum): the checksum, printed by both sides of peers, is
msort's sum of (i + 1) x value_i mod 2^64 over the sorted values, bigpipe's FNV-1a 64 of the
sums (little-endian uint64 each), wordcount's FNV-1a 64 of the table's bytes."""

import functools
import operator
import os
import re
import struct

import numpy as np

import peers_kernels as pk

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
GOLDEN = 0x9E3779B97F4A7C15
MSORT_SEED = 2463534242
WORDCOUNT_SEED = 12345
MASK64 = (1 << 64) - 1


def env_long(name, default, lo, hi):
    """env_long reads an integer as the C benchmarks do (strtol, then clamped to lo..hi)."""
    text = os.environ.get(name, "")
    if text == "":
        return default
    m = re.match(r"\s*[+-]?\d+", text)
    value = int(m.group(0)) if m else 0
    return max(lo, min(hi, value))


def fnv1a(data):
    """fnv1a is FNV-1a 64 of `data` (bytes), as examples/bench/benchlib.c's bench_fnv1a."""
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK64
    return h


# ---- msort's input: msort.c's xorshift32, vectorized -----------------------------------


def _xorshift(v):
    v = v ^ (v << np.uint32(13))
    v = v ^ (v >> np.uint32(17))
    return v ^ (v << np.uint32(5))


def _apply(tables, v):
    """_apply maps uint32 array v through the linear map (over GF(2)) whose byte tables are
    `tables`."""
    return (tables[0][v & 0xFF] ^ tables[1][(v >> np.uint32(8)) & 0xFF]
            ^ tables[2][(v >> np.uint32(16)) & 0xFF] ^ tables[3][v >> np.uint32(24)])


def _tables(columns):
    """_tables makes the 4 byte tables of the linear map whose images of bits 0..31 are
    `columns`."""
    idx = np.arange(256, dtype=np.uint32)
    out = []
    for b in range(4):
        t = np.zeros(256, dtype=np.uint32)
        for k in range(8):
            t ^= np.where((idx >> np.uint32(k)) & 1, columns[8 * b + k], np.uint32(0))
        out.append(t)
    return out


def xorshift_stream(x0, n):
    """xorshift_stream returns the n uint32 that msort.c's loop writes from state x0 (each
    after one step), by doubling: values m..2m-1 are M^m applied to values 0..m-1, M the
    step, a linear map of the 32 bits."""
    out = np.empty(n, dtype=np.uint32)
    out[0] = _xorshift(np.array([x0], dtype=np.uint32))[0]
    columns = _xorshift(np.uint32(1) << np.arange(32, dtype=np.uint32))
    m = 1
    while m < n:
        tables = _tables(columns)
        k = min(m, n - m)
        out[m:m + k] = _apply(tables, out[:k])
        columns = _apply(tables, columns)
        m *= 2
    return out


# ---- msort ------------------------------------------------------------------------------


def msort_task():
    """msort_task returns (task bytes as a uint8 array, count, cut-off): msort.c's task."""
    count = env_long("BENCH_MSORT_N", 20000000, 2, 1 << 28)
    cutoff = env_long("BENCH_MSORT_CUTOFF", 262144, 1, 1 << 30)
    values = xorshift_stream(MSORT_SEED, count)
    task = np.concatenate([np.frombuffer(struct.pack("<I", cutoff), dtype=np.uint8),
                           values.view(np.uint8)])
    return task, count, cutoff


def msort_checksum(result, count):
    v = result.view(np.uint32)
    if v.size != count or (v.size > 1 and bool(np.any(v[1:] < v[:-1]))):
        raise ValueError("msort: the result is not the input sorted")
    return int((v.astype(np.uint64) * np.arange(1, v.size + 1, dtype=np.uint64)).sum(
        dtype=np.uint64))


def msort_seq(lib, task, count, cutoff):
    if count <= cutoff:
        return pk.one(lib, "sort", task)
    a, b = pk.many(lib, "halve", task)
    first = count // 2
    return pk.one(lib, "merge", msort_seq(lib, a, first, cutoff),
                  msort_seq(lib, b, count - first, cutoff))


def msort_dask(client, lib, task, count, cutoff):
    def node(f, n):
        if n <= cutoff:
            return client.submit(pk.one, lib, "sort", f, pure=False)
        halves = client.submit(pk.many, lib, "halve", f, pure=False)
        a = client.submit(operator.getitem, halves, 0, pure=False)
        b = client.submit(operator.getitem, halves, 1, pure=False)
        first = n // 2
        return client.submit(pk.one, lib, "merge", node(a, first), node(b, n - first),
                             pure=False)

    return node(client.scatter(task, direct=True), count).result()


# ---- bigpipe ----------------------------------------------------------------------------


def bigpipe_seeds(tasks):
    return [struct.pack("<Q", (GOLDEN * (i + 1)) & MASK64) for i in range(tasks)]


def bigpipe_param():
    mib = os.environ.get("BENCH_BIGPIPE_MIB", "")
    return mib.encode() if mib else None


def bigpipe_checksum(sums):
    return fnv1a(b"".join(struct.pack("<Q", s) for s in sums))


def _sum_value(out):
    return struct.unpack("<Q", out.tobytes())[0]


def bigpipe_seq(lib, seeds):
    param = bigpipe_param()
    return [_sum_value(pk.one(lib, "sum", pk.one(lib, "xform",
                                                 pk.one(lib, "gen", s, param=param))))
            for s in seeds]


def bigpipe_dask(client, lib, seeds):
    gen = client.map(functools.partial(pk.one, lib, "gen"), seeds, param=bigpipe_param(),
                     pure=False)
    xform = client.map(functools.partial(pk.one, lib, "xform"), gen, pure=False)
    sums = client.map(functools.partial(pk.one, lib, "sum"), xform, pure=False)
    return [_sum_value(s) for s in client.gather(sums)]


# ---- wordcount --------------------------------------------------------------------------


def wordcount_task():
    """wordcount_task returns wordcount.c's 16-byte task: the text's bytes, then the parts
    and the seed."""
    mib = env_long("BENCH_WORDCOUNT_MIB", 1024, 1, 65536)
    parts = env_long("BENCH_WORDCOUNT_PARTS", 32, 1, 4096)
    return struct.pack("<QQ", mib << 20, parts | WORDCOUNT_SEED << 32)


def wordcount_words(table):
    """wordcount_words adds up the counts of a table of "word\\tcount\\n" lines."""
    return sum(int(line.split(b"\t")[1]) for line in table.tobytes().splitlines())


def wordcount_seq(lib, task):
    parts = pk.many(lib, "wc_split", task)
    tables = [pk.one(lib, "wc_count", pk.one(lib, "wc_gen", p)) for p in parts]
    return pk.one(lib, "wc_merge", *tables)


def wordcount_dask(client, lib, task):
    split = client.submit(pk.many, lib, "wc_split", task, pure=False)
    parts = struct.unpack("<QQ", task)[1] & 0xFFFFFFFF
    tables = []
    for i in range(parts):
        part = client.submit(operator.getitem, split, i, pure=False)
        text = client.submit(pk.one, lib, "wc_gen", part, pure=False)
        tables.append(client.submit(pk.one, lib, "wc_count", text, pure=False))
    return client.submit(pk.one, lib, "wc_merge", *tables, pure=False).result()


KERNELS = {"msort": ("halve", "sort", "merge"), "bigpipe": ("gen", "xform", "sum"),
           "wordcount": ("wc_split", "wc_gen", "wc_count", "wc_merge")}
