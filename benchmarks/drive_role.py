"""``python drive_role.py REPORT ARGV…``: run ``autopilot ARGV`` in this process; at exit
write its peak RSS (``VmHWM``, KiB) and the CPU it used (the agents it started are
not counted) to REPORT as JSON.

Apart from ``perf_bench.py`` so that the figure is the driver's own: this process
imports nothing the driver would not (the benchmark's own imports, ``argparse``,
``statistics``, ``tempfile``…, would add about 2 MiB).
"""

from __future__ import annotations

import atexit
import json
import resource
import sys


def _peak_kib() -> int:
    """``VmHWM`` from /proc/self/status (not ``ru_maxrss``: it carries the parent's
    peak over exec); ``ru_maxrss`` where there is no /proc."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main() -> None:
    """Drive the run; the report is written however the process exits."""
    report = sys.argv[1]

    def write() -> None:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        cpu_s = usage.ru_utime + usage.ru_stime
        with open(report, "w", encoding="utf-8") as handle:
            handle.write(json.dumps({"peak_kib": _peak_kib(), "cpu_s": cpu_s}))

    atexit.register(write)
    from autopilot.cli.main import main as cli_main

    sys.argv = ["autopilot", *sys.argv[2:]]
    cli_main()


if __name__ == "__main__":
    main()
