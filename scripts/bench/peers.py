"""scripts/bench/peers.py: the Dask side of the `peers` benchmark (scripts/bench/peers runs it
beside build-bench/examples/bench/bench_peers; shared/BENCHMARKS.md). One run of one workload
on a fresh distributed.LocalCluster of 2 worker processes on loopback (scheduler on a free
port, no dashboard), with the tasks of our side one for one:

  empty   client.map(echo) over 16-byte tasks (i, then 0xa5 bytes), gathered
  chain   4 client.map(touch) in a row over 1 MiB uint8 arrays (the pattern of bench_chain_make),
          each stage on the worker that holds its input
  images  client.map(blur) then client.map(oil), radius 5, over the images bench_peers saved
          (DIR/inputs.bin: image tokens, a 16-byte header then RGB), our filter code through
          ctypes (liblt_filters_plain.so); every result is compared with DIR/outputs.bin, our
          side's results, byte for byte
  msort, bigpipe, wordcount
          issue 32's data-heavy benchmarks (peers_data.py) on the workers, then the same kernels
          sequentially in this process: our `data` module's kernels on both (--kernels
          BUILD/modules/libdata.so, through peers_kernels.py); prints both times and the
          result's checksum, which must be the one our bench_msort, bench_bigpipe or
          bench_wordcount prints

Large inputs (chain, images) go to the workers with client.scatter(direct=True), inside the
timed part, as our client sends them to the servers: of the ways tried (arguments in the
graph, scatter through the scheduler, direct scatter) the fastest for Dask here. Every
result is checked. The time runs from the first submit to the last result gathered; the
cluster's start, and one untimed warm-up round of the same functions on every worker (imports,
the library loaded), are not timed. Prints one JSON line {"side": "dask", "workload", "tasks",
"seconds", "threads_per_worker"[, "identical"][, "sequential_seconds", "checksum"]}; exit
status 1 when a result is wrong.

Run with Debian's python3 (/usr/bin/python3, python3-distributed and python3-numpy)."""

import argparse
import faulthandler
import json
import logging
import os
import signal
import struct
import sys
import time

try:
    import numpy as np
    from distributed import Client, LocalCluster

    import peers_data
    import peers_kernels
    import peers_tasks
except ImportError as e:
    sys.exit(f"peers.py: {e}: the Dask side needs Dask distributed and numpy (Debian: apt-get "
             "install python3-distributed python3-numpy, which scripts/bench/peers does; run "
             "with Debian's /usr/bin/python3)")

WORKERS = 2
HEADER = 16  # the image token's header: magic, width, height, channels (little-endian uint32)
MAGIC = 0x4D49544C
CHAIN_SIZE = 1 << 20
CHAIN_STAGES = 4
DEFAULTS = {"empty": 20000, "chain": 200, "images": 30, "msort": 1, "bigpipe": 20,
            "wordcount": 1}
DATA = ("msort", "bigpipe", "wordcount")


def noop_task(i):
    """The 16 bytes of bench_noop_make: i (little-endian int64), then 0xa5."""
    return struct.pack("<q", i) + b"\xa5" * 8


def chain_task(i):
    """The 1 MiB of bench_chain_make: block k of 4096 bytes holds (7 i + k) mod 256."""
    return np.repeat(((7 * i + np.arange(CHAIN_SIZE // 4096)) & 0xFF).astype(np.uint8), 4096)


def read_images(path, count):
    """read_images returns (width, height, [pixel arrays]) of the first `count` tokens in
    `path`, which must all have one size."""
    data = np.fromfile(path, dtype=np.uint8)
    magic, width, height, channels = struct.unpack("<4I", data[:HEADER].tobytes())
    size = HEADER + width * height * 3
    if magic != MAGIC or channels != 3 or data.size < count * size:
        sys.exit(f"peers.py: {path} does not hold {count} RGB image tokens")
    return width, height, [data[k * size + HEADER:(k + 1) * size] for k in range(count)]


def run_empty(client, tasks, _args):
    payloads = [noop_task(i) for i in range(tasks)]
    client.gather(client.map(peers_tasks.echo, payloads[:2 * WORKERS], pure=False))
    t0 = time.perf_counter()
    results = client.gather(client.map(peers_tasks.echo, payloads, pure=False))
    seconds = time.perf_counter() - t0
    bad = sum(r != p for r, p in zip(results, payloads))
    return seconds, bad, {}


def run_chain(client, tasks, _args):
    values = [chain_task(i) for i in range(tasks)]

    def submit(inputs):
        futures = client.scatter(inputs, direct=True)
        for _ in range(CHAIN_STAGES):
            futures = client.map(peers_tasks.touch, futures, pure=False)
        return futures

    client.gather(submit(values[:2 * WORKERS]))
    t0 = time.perf_counter()
    results = client.gather(submit(values))
    seconds = time.perf_counter() - t0
    bad = 0
    for r, v in zip(results, values):
        want = v.copy()
        want[0] += CHAIN_STAGES
        bad += not np.array_equal(r, want)
    return seconds, bad, {}


def run_images(client, tasks, args):
    width, height, images = read_images(os.path.join(args.images, "inputs.bin"), tasks)
    _, _, ours = read_images(os.path.join(args.images, "outputs.bin"), tasks)
    kw = {"width": width, "height": height, "radius": args.radius, "lib": args.lib,
          "pure": False}

    def submit(inputs):
        blurred = client.map(peers_tasks.blur, client.scatter(inputs, direct=True), **kw)
        return client.map(peers_tasks.oil, blurred, **kw)

    client.gather(submit(images[:2 * WORKERS]))
    t0 = time.perf_counter()
    results = client.gather(submit(images))
    seconds = time.perf_counter() - t0
    identical = sum(np.array_equal(r, o) for r, o in zip(results, ours))
    return seconds, tasks - identical, {"identical": identical}


def timed(fn, *args):
    """timed returns (fn(*args), the seconds it took)."""
    t0 = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - t0


def run_data(client, tasks, args):
    """run_data runs a data-heavy workload on the workers, then sequentially here (the
    kernels loaded everywhere first, untimed), checks that both gave the same result and
    returns the Dask side's time, the count of wrong results (0 or 1) and the sequential
    time and checksum."""
    lib, w = args.kernels, args.workload
    client.run(peers_kernels.load, lib, peers_data.KERNELS[w])
    peers_kernels.load(lib, peers_data.KERNELS[w])
    if w == "msort":
        task, count, cutoff = peers_data.msort_task()
        ours, seconds = timed(peers_data.msort_dask, client, lib, task, count, cutoff)
        seq, seq_seconds = timed(peers_data.msort_seq, lib, task, count, cutoff)
        same = np.array_equal(ours, seq)
        checksum = peers_data.msort_checksum(ours, count)
        extra = {"values": count}
    elif w == "bigpipe":
        seeds = peers_data.bigpipe_seeds(tasks)
        ours, seconds = timed(peers_data.bigpipe_dask, client, lib, seeds)
        seq, seq_seconds = timed(peers_data.bigpipe_seq, lib, seeds)
        same = ours == seq
        checksum = peers_data.bigpipe_checksum(ours)
        extra = {}
    else:
        task = peers_data.wordcount_task()
        ours, seconds = timed(peers_data.wordcount_dask, client, lib, task)
        seq, seq_seconds = timed(peers_data.wordcount_seq, lib, task)
        same = np.array_equal(ours, seq)
        checksum = peers_data.fnv1a(ours.tobytes())
        extra = {"words": peers_data.wordcount_words(ours)}
    if not same:
        print(f"peers.py: {w}: the workers' result differs from the sequential one",
              file=sys.stderr)
    extra.update({"sequential_seconds": round(seq_seconds, 6), "checksum": f"{checksum:016x}"})
    return seconds, 0 if same else 1, extra


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("workload", choices=sorted(DEFAULTS))
    p.add_argument("--tasks", type=int, help="tasks (default 20000, 200, 30 images, "
                   "20 bigpipe seeds; msort and wordcount have one task)")
    p.add_argument("--threads", type=int, default=3 * (os.cpu_count() or 1),
                   help="threads per worker process (default 3 x cores, as lithium-server)")
    p.add_argument("--images", metavar="DIR", help="images: where bench_peers --save wrote "
                   "inputs.bin and outputs.bin")
    p.add_argument("--lib", help="images: the path of liblt_filters_plain.so")
    p.add_argument("--radius", type=int, default=5)
    p.add_argument("--kernels", help="msort, bigpipe, wordcount: the path of our `data` "
                   "kernel module (BUILD/modules/libdata.so)")
    args = p.parse_args()
    if args.workload == "images" and (args.images is None or args.lib is None):
        p.error("images needs --images DIR and --lib PATH")
    if args.workload in DATA and args.kernels is None:
        p.error(f"{args.workload} needs --kernels PATH")
    tasks = args.tasks or DEFAULTS[args.workload]
    # scripts/bench/peers stops a run with SIGTERM: leave the with-blocks, which close the
    # client and the cluster (workers and nannies), instead of dying with them running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    # A run that hangs (Dask has had sporadic hangs) shows where on SIGUSR1, which
    # scripts/bench/peers sends before it stops a run that overran its time.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    run = {"empty": run_empty, "chain": run_chain, "images": run_images,
           **{w: run_data for w in DATA}}[args.workload]
    with LocalCluster(n_workers=WORKERS, threads_per_worker=args.threads, processes=True,
                      host="127.0.0.1", scheduler_port=0, dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster, Client(cluster) as client:
        client.wait_for_workers(WORKERS)
        seconds, bad, extra = run(client, tasks, args)
    line = {"side": "dask", "workload": args.workload, "tasks": tasks,
            "seconds": round(seconds, 6), "threads_per_worker": args.threads, **extra}
    print(json.dumps(line), flush=True)
    print(f"peers.py: {args.workload}: {tasks} tasks in {seconds:.3f} s on {WORKERS} workers "
          f"x {args.threads} threads", file=sys.stderr)
    if bad:
        print(f"peers.py: {args.workload}: {bad} of {tasks} results wrong", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
