#!/usr/bin/env bash
# Registers, spills and ptxas performance warnings (C75xx: wgmma serialised, ...) of every kernel
# in one CUDA source, compiled here exactly as the build compiles it plus -Xptxas=-v. No GPU.
#
#   scripts/ptxas-report.sh src/backend/cuda/prefill_attention_v3tmaq.cu   # BUILD=build-cudaexec
#
# Why: a kernel change that adds registers can silently cost an occupancy step or spill, and
# ptxas serialises wgmma (C7510/C7520) without failing the build; check before a device call.
# The compile command comes from $BUILD/compile_commands.json (configure with FOLIO_CUDA=ON).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build-cudaexec}
src=$(realpath "${1:?usage: scripts/ptxas-report.sh FILE.cu}")
log=$(mktemp)
trap 'rm -f "$log" "$log.o"' EXIT
python3 - "$BUILD/compile_commands.json" "$src" "$log.o" >"$log.cmd" <<'PY'
import json, shlex, sys
db, src, obj = sys.argv[1:]
for e in json.load(open(db)):
    if e["file"] == src:
        cmd = e["command"].split(" -o ")[0]  # the rest names the object file
        print(f"cd {shlex.quote(e['directory'])} && {cmd} -Xptxas=-v -o {shlex.quote(obj)}")
        break
else:
    sys.exit(f"{src} is not in {db}")
PY
bash "$log.cmd" >"$log" 2>&1 || { cat "$log"; exit 1; }
rm -f "$log.cmd"
# One line per kernel: registers, spill bytes, then any performance warning about it.
python3 - "$log" <<'PY'
import re, signal, subprocess, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # piped into head: stop quietly

def demangle(name):
    try:
        out = subprocess.run(["c++filt"], input=name, capture_output=True, text=True).stdout
        return out.strip() or name
    except FileNotFoundError:
        return name

rows = []
for line in open(sys.argv[1]):
    if m := re.search(r"Compiling entry function '([^']+)'", line):
        rows.append([demangle(m.group(1)), "", ""])
    elif m := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line):
        rows[-1][2] = f"spills {m.group(1)}/{m.group(2)} B"
    elif m := re.search(r"Used (\d+) registers", line):
        rows[-1][1] = f"{m.group(1)} regs"
    elif m := re.search(r"\((C75\d\d)\) ([^']*?) in the function '([^']+)'", line):
        print(f"WARNING {m.group(1)} ({m.group(2)[:70]}...) in {demangle(m.group(3))[:120]}")
for k, regs, spills in rows:
    print(f"{regs:>9}  {spills:<18} {k[:150]}")
PY
