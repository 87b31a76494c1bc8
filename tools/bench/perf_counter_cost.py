#!/usr/bin/env python3
"""What the perf counters cost per message, in instructions (issue 17).

Runs `siphon-bench loopback` (async+posix, 64-byte messages, a fixed count)
under callgrind and attributes the instructions executed to the perf counter
code: the functions of msgr/perf/, the lines of worker_perf.h,
perf_counters.h and perf_internal.h inlined into callers, and the
clock_gettime calls made from worker_perf.h (the time counters' clock
reads). Other clock reads (the benchmark's own latency stamps, the idle
timer, a message's receive stamp) are not counted: they happen with counters
compiled out too.

Instruction counts do not depend on the machine's load, unlike msgs/s on a
shared 2-vCPU VM (docs/performance.md, "Perf counters: overhead").

  tools/bench/perf_counter_cost.py [--count N] BENCH [BENCH...]

prints, per binary: total instructions, counter instructions, their share,
and instructions per message.
"""
import argparse
import re
import subprocess
import sys
import tempfile

PERF_CODE = re.compile(r'msgr/perf/|worker_perf\.h|perf_counters\.h|perf_internal\.h')
ROW = re.compile(r'\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(<|\*|>)?\s*(.*)')


def annotate(path, tree=None):
    cmd = ['callgrind_annotate', '--auto=no', '--threshold=100', path]
    if tree:
        cmd.insert(1, f'--tree={tree}')
    return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout


def attribute(path):
    total = 0
    counters = 0
    for line in annotate(path).splitlines():
        if 'PROGRAM TOTALS' in line:
            total = int(line.split()[0].replace(',', ''))
            continue
        m = ROW.match(line)
        if not m or 'clock_gettime' in m.group(3):
            continue
        # "file:function": the file is where the instructions' source lines
        # are (an inlined header keeps its own name).
        if PERF_CODE.search(m.group(3).split(':', 1)[0]):
            counters += int(m.group(1).replace(',', ''))
    # clock_gettime's cost by caller: only the calls from worker_perf.h.
    # In the caller tree each function's callers ('<' rows) come just
    # before its own row ('*'); blocks are separated by blank lines.
    edges = 0
    for line in annotate(path, tree='caller').splitlines():
        m = ROW.match(line)
        if not m:
            edges = 0
            continue
        mark, where = m.group(2), m.group(3)
        if mark == '<' and 'worker_perf.h' in where.split(':', 1)[0]:
            edges += int(m.group(1).replace(',', ''))
        elif mark == '*':
            if 'clock_gettime' in where:
                counters += edges
            edges = 0
    return total, counters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--count', type=int, default=20000)
    ap.add_argument('bench', nargs='+')
    a = ap.parse_args()
    for b in a.bench:
        with tempfile.NamedTemporaryFile(suffix='.cg') as out:
            subprocess.run(['valgrind', '--tool=callgrind', f'--callgrind-out-file={out.name}', b, 'loopback',
                            '--ms-type', 'async+posix', '--size', '64', '--count', str(a.count), '--quiet',
                            '--json', '/dev/null'], check=True, capture_output=True)
            total, counters = attribute(out.name)
        print(f'{b}: {total:,} instructions, {counters:,} in counter code = {100.0 * counters / total:.2f} %, '
              f'{counters / a.count:.0f} per message (of {total / a.count:,.0f})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
