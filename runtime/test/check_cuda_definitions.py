#!/usr/bin/env python3
"""Fails when a function of kernels.h or memory.h has no CUDA definition.

Usage: check_cuda_definitions.py NM LIBRARY HEADER...

Reads the functions each HEADER declares (a return type at the start of a
line, then `braid_rt_<name>(`) and the external functions the static
LIBRARY (braid_rt_kernels_cuda) defines, as `NM` lists them, and names
every declaration without a definition: a program for the CUDA target would
fail to link on it.
"""
import re
import subprocess
import sys


def declared(header):
    text = open(header).read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return set(re.findall(
        r"^(?:void|int|braid_rt_status_t)\s+\*?(braid_rt_\w+)\(", text, re.M))


def defined(nm, library):
    out = subprocess.run([nm, "--defined-only", "--extern-only", library],
                         check=True, capture_output=True, text=True).stdout
    return {f[2] for f in (line.split() for line in out.splitlines())
            if len(f) == 3 and f[1] == "T"}


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    nm, library, headers = sys.argv[1], sys.argv[2], sys.argv[3:]
    have = defined(nm, library)
    missing, total = [], 0
    for header in headers:
        names = declared(header)
        if not names:
            print(f"error: no declarations found in {header}", file=sys.stderr)
            return 1
        total += len(names)
        missing += [f"{header}: {n}" for n in sorted(names - have)]
    for m in missing:
        print(f"error: no CUDA definition of {m} in {library}")
    print(f"{total - len(missing)} of {total} declarations defined in {library}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
