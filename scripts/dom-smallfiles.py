#!/usr/bin/env python3
"""Small files under one layout, timed: PROCS processes each create, write and close
FILES/PROCS files of SIZE bytes (mdtest-hard's 3,901 by default) in a directory of their own
under DIR, then (caches dropped) read them all back and check their length. Prints one JSON
line: {"creates_per_s": .., "reads_per_s": ..}. Called by scripts/dom-smallfiles.sh."""
import json, os, sys, time
from multiprocessing import Pool

def create(args):
    d, n, size = args
    os.makedirs(d, exist_ok=True)
    data = os.urandom(size)
    for i in range(n):
        fd = os.open(f"{d}/f{i}", os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o644)
        os.write(fd, data)
        os.close(fd)

def read(args):
    d, n, size = args
    for i in range(n):
        fd = os.open(f"{d}/f{i}", os.O_RDONLY)
        got = os.read(fd, size + 1)
        os.close(fd)
        if len(got) != size:
            raise SystemExit(f"{d}/f{i}: {len(got)} bytes read, {size} written")

def timed(fn, jobs, procs):
    with Pool(procs) as p:
        t0 = time.perf_counter()
        p.map(fn, jobs)
        return time.perf_counter() - t0

def main():
    top, files, procs, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    jobs = [(f"{top}/p{k}", files // procs, size) for k in range(procs)]
    total = (files // procs) * procs
    t_create = timed(create, jobs, procs)
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")
    time.sleep(1)
    t_read = timed(read, jobs, procs)
    print(json.dumps({"creates_per_s": total / t_create, "reads_per_s": total / t_read}))

main()
