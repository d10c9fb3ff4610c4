"""A simulation's checkpoint under a bandwidth reservation, through the weft module: reserve
a rate on the OSTs of the checkpoint directory, wait until it is active, write, give it back.
Usage: qos_checkpoint.py MGS DIR RATE MIB. Prints "rate R" (MiB/s the write phase ran at)
and "all checks held"; tests/reservations.rs checks the rate against RATE."""

import errno
import sys
import time

import weft


def main():
    mgs, top, rate, mib = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    fs = weft.mount(mgs)
    fs.jobid = "ckpt-py"
    try:
        fs.qos_reserve("py1", "fast", 10, [top])
        raise AssertionError("a bad throughput was taken")
    except OSError as e:
        assert e.errno == errno.EINVAL and "500rps" in str(e), e
    assert fs.qos_test("py1") == "undefined"
    state = fs.qos_reserve("py1", rate, 60, [top], wait=True, timeout=30)
    assert state == "active", state
    assert fs.qos_test("py1") == "active"
    try:
        fs.qos_reserve("py1", rate, 1, [top])
        raise AssertionError("the id was taken twice")
    except FileExistsError:
        pass
    block = b"\x5a" * (1 << 20)
    t0 = time.monotonic()
    with fs.open(top + "/ckpt-py", "wb", buffering=0) as f:
        for _ in range(mib):
            f.write(block)
        fs.fsync(f)
    print(f"rate {mib / (time.monotonic() - t0):.2f}")
    fs.qos_remove("py1")
    assert fs.qos_test("py1") == "done"
    print("all checks held")


main()
