#!/usr/bin/env bash
# Counts the system calls `warden serve` makes per request while the load
# benchmark runs, by the kernel's syscall tracepoints (`perf stat`; no PMU
# needed). Start it, then the benchmark, in another shell; for each `wrk`
# run it waits 1 s, counts for 2 s, and divides by the `request finished`
# lines Warden logged in the same window. Stop it with Ctrl-C. perf comes
# from `scripts/ensure-bench-tools.sh --profile`.
#
#   scripts/count-syscalls.sh > /tmp/syscalls.txt &
#   WARDEN_BENCH_ONLY=capability_test,turn_1 WARDEN_BENCH_CONNECTIONS=8 \
#     WARDEN_BENCH_RATES= WARDEN_BENCH_BACKENDS=sqlite WARDEN_BENCH_COUNT=0 \
#     target/release/deps/load-<hash> --bench
#
# Used for docs/benchmarks.md, "System calls per request".
set -euo pipefail
calls=(pread64 pwrite64 fsync futex epoll_wait write writev sendto recvfrom getrandom clock_gettime mmap munmap madvise sched_yield)
events="raw_syscalls:sys_enter"
for call in "${calls[@]}"; do events+=",syscalls:sys_enter_$call"; done
counted=$(mktemp)
trap 'rm -f "$counted"' EXIT
seen=""
while true; do
  wrk=$(pgrep -x wrk | head -1 || true)
  if [[ -n "$wrk" && "$wrk" != "$seen" ]]; then
    seen=$wrk
    sleep 1
    pid=$(pgrep -f "warden[^ ]* serve" | head -1 || true)
    [[ -z "$pid" ]] && continue
    log=$(readlink "/proc/$pid/fd/2")
    target=$(tr '\0' ' ' < "/proc/$wrk/cmdline" | grep -o 'http[^ ]*' || true)
    # The requests are counted inside perf's own window.
    perf stat -x, -e "$events" -p "$pid" -- sh -c \
      "grep -c 'request finished' '$log' > '$counted.a'; sleep 2; grep -c 'request finished' '$log' > '$counted.b'" \
      2> "$counted"
    requests=$(( $(cat "$counted.b") - $(cat "$counted.a") ))
    echo "== $target: $requests requests"
    awk -F, -v n="$requests" '$3 != "" { printf "  %-32s %9d  %7.2f a request\n", $3, $1, $1 / n }' "$counted"
  fi
  sleep 0.1
done
