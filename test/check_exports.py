#!/usr/bin/env python3
"""Symbol checks (STYLE 3.3).

The shared library exports exactly the functions grit.h marks GRIT_EXTERN,
and every global symbol the static library defines starts with grit_ (the
module token namespaces static builds, where visibility does nothing).

Usage: check_exports.py include/grit/grit.h libgrit.so [libgrit.a]"""
import re
import subprocess
import sys

if len(sys.argv) not in (3, 4):
    sys.exit(__doc__)
header, lib = sys.argv[1], sys.argv[2]
archive = sys.argv[3] if len(sys.argv) == 4 else None


def nm(*args):
    return subprocess.run(["nm", *args], check=True, capture_output=True,
                          text=True).stdout


text = open(header).read()
declared = set()
for m in re.finditer(r"GRIT_EXTERN\b([^;{]*?)\b(grit_[a-z0-9_]+)\s*\(", text, re.S):
    declared.add(m.group(2))
exported = set()
for line in nm("-D", "--defined-only", lib).splitlines():
    f = line.split()
    if len(f) >= 2 and f[-2] in ("T", "W"):
        exported.add(f[-1])
extra = sorted(exported - declared)
missing = sorted(declared - exported)
for name in extra:
    print(f"exported but not GRIT_EXTERN in grit.h: {name}")
for name in missing:
    print(f"GRIT_EXTERN in grit.h but not exported: {name}")
print(f"{lib}: {len(declared)} declared, {len(exported)} exported")
failed = bool(extra or missing)

if archive:
    # Global defined symbols of every member: upper-case type letters other
    # than U (undefined), plus the weak and unique kinds (V, W, u).
    unprefixed = set()
    count = 0
    # What a sanitizer build adds for each global (ASan's one-definition-
    # rule markers, "__odr_asan.grit_x") is the compiler's, not ours.
    sanitizer = ("__odr_asan", "__asan_", "__ubsan_", "__sanitizer_")
    for line in nm("-g", "--defined-only", archive).splitlines():
        f = line.split()
        if len(f) != 3:
            continue  # member headers ("x.o:") and blank lines
        if f[2].startswith(sanitizer):
            continue
        count += 1
        if not f[2].startswith("grit_"):
            unprefixed.add(f[2])
    for name in sorted(unprefixed):
        print(f"{archive}: global symbol without the grit_ prefix: {name}")
    print(f"{archive}: {count} global symbols, {len(unprefixed)} unprefixed")
    if count == 0:
        print(f"{archive}: no global symbols at all: wrong file?")
    failed = failed or bool(unprefixed) or count == 0

sys.exit(1 if failed else 0)
