#!/usr/bin/env python3
"""Where a profile's CPU went in the kernel: the share of samples under each
system call, and the user-space frames that made the most expensive calls.

Reads the folded stacks that `WARDEN_BENCH_PROFILE=<scenario>` keeps
(`/tmp/warden-profile-<scenario>-<db>.folded`, one `frame;frame;... count`
line per stack, as inferno-collapse-perf writes them):

    scripts/profile-kernel.py /tmp/warden-profile-turn_1-sqlite.folded

The thread is the stack's first frame (`tokio-runtime-w`, `sqlx-sqlite-wor`,
...). docs/benchmarks.md ("Instructions per request") says what it showed.
"""
import collections
import re
import sys

SYSCALL = re.compile(r"^__(x64|do)_sys_")
KERNEL_ENTRY = ("entry_SYSCALL", "do_syscall", "x64_sys_call", "syscall")
# The kernel's dispatch: the frame after it names the call when the call's
# own `__x64_sys_*` wrapper was inlined away (write: `ksys_write`, writev:
# `do_writev`).
DISPATCH = "do_syscall_64"


def system_call(frames: list[str]) -> int | None:
    """The index of the frame that names the system call, if any."""
    for i, frame in enumerate(frames):
        if SYSCALL.match(frame):
            return i
    for i, frame in enumerate(frames[:-1]):
        if frame == DISPATCH:
            j = i + 1
            while j < len(frames) - 1 and frames[j] == "x64_sys_call":
                j += 1
            return j
    return None


def main(path: str, top: int = 12) -> None:
    total = 0
    by_call = collections.Counter()
    by_thread = collections.Counter()
    by_caller = collections.Counter()
    for line in open(path, encoding="utf-8", errors="replace"):
        stack, _, count = line.rstrip("\n").rpartition(" ")
        if not count.isdigit():
            continue
        samples = int(count)
        total += samples
        frames = stack.split(";")
        thread = frames[0]
        i = system_call(frames)
        if i is not None:
            frame = frames[i]
            by_call[frame] += samples
            by_thread[(thread, frame)] += samples
            user = [f for f in frames[1:i] if not f.startswith(KERNEL_ENTRY)]
            callers = " < ".join(reversed([f[:70] for f in user[-3:]]))
            by_caller[f"{frame} <- {callers}"] += samples
    if total == 0:
        sys.exit(f"{path}: no samples")
    in_calls = sum(by_call.values())
    print(f"{path}: {total} samples, {100 * in_calls / total:.1f} % under a system call")
    for title, table in (
        ("by system call", by_call),
        ("by thread and call", by_thread),
        ("by the user-space frames that called", by_caller),
    ):
        print(f"\n{title}:")
        for key, samples in table.most_common(top):
            label = " ".join(key) if isinstance(key, tuple) else key
            print(f"  {100 * samples / total:5.1f} %  {label}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
