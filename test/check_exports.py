#!/usr/bin/env python3
"""The shared library exports exactly the functions grit.h marks GRIT_EXTERN
(STYLE 3.3). Usage: check_exports.py include/grit/grit.h libgrit.so"""
import re
import subprocess
import sys

header, lib = sys.argv[1], sys.argv[2]
text = open(header).read()
declared = set()
for m in re.finditer(r"GRIT_EXTERN\b([^;{]*?)\b(grit_[a-z0-9_]+)\s*\(", text, re.S):
    declared.add(m.group(2))
out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True,
                     capture_output=True, text=True).stdout
exported = {line.split()[-1] for line in out.splitlines()
            if line.split() and line.split()[-2] in ("T", "W")}
extra = sorted(exported - declared)
missing = sorted(declared - exported)
for name in extra:
    print(f"exported but not GRIT_EXTERN in grit.h: {name}")
for name in missing:
    print(f"GRIT_EXTERN in grit.h but not exported: {name}")
print(f"{len(declared)} declared, {len(exported)} exported")
sys.exit(1 if extra or missing else 0)
