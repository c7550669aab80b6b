#!/usr/bin/env python3
"""The layering rule of docs/layout.md, checked over #include lines.

  check_layers.py SOURCE_ROOT     check the tree; exit 1 on any violation
  check_layers.py --self-test     check that each rule catches a planted
                                  violation in a scratch tree

Rules:
  1. Every top-level folder with C sources has a floor in FLOORS (a new
     module is placed on purpose, not by accident).
  2. A module includes headers of its own floor or below, never above
     (arrows point down). include/ (the public API) is below everything.
  3. The module graph has no cycle (two modules of one floor may not
     include each other, directly or through others).
  4. A module's internal header (X/*_int.h) is included only by X itself
     (and by tests, which reach internals on purpose).
  5. Every SPEC id cited in the sources (RT-06, DNS-01..DNS-05) exists in
     docs/spec.md.
  6. docs/layout.md's floor table, and the "Layout: floor N" line of a
     module's header comment, say what FLOORS says.
  7. Every relative link in README.md and docs/*.md names a file that
     exists, and a heading of it when it has a #fragment.
  8. Within one module (FILE_CYCLE_MODULES), the .c files that call each
     other's functions (non-static, declared in the module's own headers)
     form no cycle of more than two files: the pieces have a direction
     (a call up goes through a table of function pointers).
"""
import os
import re
import sys
import tempfile
from collections import deque

# Lower number = lower floor. Keep docs/layout.md's table in step.
FLOORS = {
    "include": -1,  # the public API: anyone may include it
    "util": 0,
    "transport": 1, "service_config": 1, "throttle": 1, "compress": 1,
    "observe": 1, "dedup": 1, "credentials": 1, "intercept": 1,
    "xds": 1,
    "lb": 2, "retry": 2, "hedging": 2, "callsm": 2,
    "runtime": 3, "resolver": 3,
    "channel": 4,
    "tools": 5, "interop": 5, "bench": 5, "pbjson": 5, "codegen": 5,
    "h2server": 5, "examples": 5, "xdsclient": 5,
    "test": 6,
}
# Folders whose files may include any module's internals.
TEST_ROOMS = {"test"}
SKIP_DIRS = {".git", "build", "docs", "scripts", "subprojects"}
SOURCE_EXT = (".c", ".h")
CODE_EXT = (".c", ".h", ".py", ".sh", ".build", ".js", ".proto", ".cc")
SPEC_PREFIXES = ("SC|DNS|RT|HG|TH|TR|CB|LB|HS|MX|ID|FC|CP|HC|OD|OB|DD|AP|SM"
                 "|CR|IC|LP|XD|OP")
SPEC_RE = re.compile(r"\b(?:%s)-\d{2}\b" % SPEC_PREFIXES)
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def source_files(root):
    for top in sorted(os.listdir(root)):
        path = os.path.join(root, top)
        if not os.path.isdir(path) or top in SKIP_DIRS or top.startswith("."):
            continue
        if top.startswith("build"):
            continue  # build output, as .gitignore has it (/build*/):
            # bench/compare's build-compare holds copies of other trees
        if os.path.exists(os.path.join(path, "meson-private")):
            continue  # a build directory inside the source tree
        for dirpath, dirnames, files in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for f in sorted(files):
                yield top, os.path.join(dirpath, f)


def bare_index(root):
    """Headers reachable by a bare name from another folder: module -> set."""
    index = {}
    for top, path in source_files(root):
        if path.endswith(".h") and top != "test":
            index.setdefault(os.path.basename(path), set()).add(top)
    return index


def resolve(root, top, path, name, bare):
    """The module an #include "name" in |path| reaches, or None."""
    if os.path.exists(os.path.join(os.path.dirname(path), name)):
        return None  # beside the including file: its own module
    first = name.split("/", 1)[0]
    if "/" in name and os.path.isdir(os.path.join(root, first)):
        return first
    owners = bare.get(os.path.basename(name), set()) - {top}
    if len(owners) == 1:
        return next(iter(owners))
    return None  # generated (protoc output) or the module's own


def check_includes(root, errors):
    bare = bare_index(root)
    edges = {}
    seen_tops = set()
    for top, path in source_files(root):
        if not path.endswith(SOURCE_EXT):
            continue
        seen_tops.add(top)
        rel = os.path.relpath(path, root)
        if top not in FLOORS:
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                name = m.group(1)
                dep = resolve(root, top, path, name, bare)
                if dep is None or dep == top:
                    continue
                where = "%s:%d" % (rel, lineno)
                if dep not in FLOORS:
                    errors.append("%s: includes %s from %s/, which has no "
                                  "floor" % (where, name, dep))
                    continue
                if FLOORS[dep] > FLOORS[top]:
                    errors.append(
                        "%s: %s/ (floor %d) includes %s from %s/ (floor %d):"
                        " arrows point down" % (where, top, FLOORS[top], name,
                                                dep, FLOORS[dep]))
                if (os.path.basename(name).endswith("_int.h")
                        and top not in TEST_ROOMS):
                    errors.append("%s: %s/ includes %s, the internals of "
                                  "%s/" % (where, top, name, dep))
                if top not in TEST_ROOMS:
                    edges.setdefault(top, {}).setdefault(dep, where)
    for top in sorted(seen_tops - set(FLOORS)):
        errors.append("%s/: C sources in a folder with no floor: add it to "
                      "FLOORS in test/check_layers.py and docs/layout.md" % top)
    check_cycles(edges, errors)


def check_cycles(edges, errors):
    state = {}

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for dep in sorted(edges.get(node, {})):
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):] + [dep]
                errors.append("module cycle: %s (%s)" % (
                    " -> ".join(cycle), edges[node][dep]))
            elif dep not in state:
                visit(dep, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])


def check_spec_ids(root, errors):
    spec = os.path.join(root, "docs", "spec.md")
    if not os.path.exists(spec):
        errors.append("docs/spec.md is missing")
        return
    with open(spec, encoding="utf-8") as f:
        # An id is defined where a line starts with it (the list items).
        defined = set(re.findall(r"^\s*[-*]?\s*\**((?:%s)-\d{2})\b"
                                 % SPEC_PREFIXES, f.read(), re.M))
    cited = {}
    for top, path in source_files(root):
        if not path.endswith(CODE_EXT) or top == "docs":
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                for sid in SPEC_RE.findall(line):
                    cited.setdefault(sid, "%s:%d" % (
                        os.path.relpath(path, root), lineno))
    for sid in sorted(set(cited) - defined):
        errors.append("%s: cites %s, which docs/spec.md does not define"
                      % (cited[sid], sid))


LAYOUT_ROW_RE = re.compile(r"^\|\s*(\d+)\s*\|\s*`([a-z0-9_]+)/`\s*\|", re.M)
HEADER_FLOOR_RE = re.compile(r"Layout: floor (\d+) of docs/layout\.md")


def check_documented_floors(root, errors):
    layout = os.path.join(root, "docs", "layout.md")
    if not os.path.exists(layout):
        errors.append("docs/layout.md is missing")
        return
    with open(layout, encoding="utf-8") as f:
        rows = {m: int(n) for n, m in LAYOUT_ROW_RE.findall(f.read())}
    for mod, floor in sorted(FLOORS.items()):
        if floor < 0:
            continue
        if rows.get(mod) != floor:
            errors.append("docs/layout.md: %s/ is on floor %s there, %d in "
                          "FLOORS" % (mod, rows.get(mod), floor))
    for mod in sorted(set(rows) - set(FLOORS)):
        errors.append("docs/layout.md: %s/ is not in FLOORS" % mod)
    for top, path in source_files(root):
        if top not in FLOORS or not path.endswith(".h"):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            for n in HEADER_FLOOR_RE.findall(f.read(4096)):
                if int(n) != FLOORS[top]:
                    errors.append("%s: says floor %s, FLOORS says %d" % (
                        os.path.relpath(path, root), n, FLOORS[top]))


LINK_RE = re.compile(r"\]\(([^)\s]+)\)")


def md_anchors(path):
    """GitHub's heading ids of a Markdown file (fenced code skipped)."""
    out, fenced = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fenced = not fenced
            elif not fenced and line.startswith("#"):
                text = line.lstrip("#").strip().lower()
                out.add(re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return out


def check_doc_links(root, errors):
    pages = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        pages += [os.path.join(docs, f) for f in sorted(os.listdir(docs))
                  if f.endswith(".md")]
    for page in pages:
        if not os.path.exists(page):
            continue
        with open(page, encoding="utf-8") as f:
            text = f.read()
        for target in LINK_RE.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue  # https:, mailto:
            path, _, frag = target.partition("#")
            full = (os.path.normpath(os.path.join(os.path.dirname(page), path))
                    if path else page)
            rel = os.path.relpath(page, root)
            if not os.path.exists(full):
                errors.append("%s: link to %s: no such file" % (rel, target))
            elif frag and full.endswith(".md") and frag not in md_anchors(full):
                errors.append("%s: link to %s: no such heading" % (rel, target))


# Modules whose .c files must not call each other in a circle of more than
# two files (rule 8). channel/: docs/call-machine.md says the direction.
FILE_CYCLE_MODULES = ("channel",)
IDENT_RE = re.compile(r"\b[A-Za-z_]\w*\b")
# A line that starts a function at column 0 (not static): its name is the
# last identifier before the first "(".
FUNC_START_RE = re.compile(r"^(?!static\b)[A-Za-z_][^;{}()=#]*?\b([A-Za-z_]\w*)"
                           r"\s*\(", re.M)
CALL_NAME_RE = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def strip_c(text):
    """|text| without comments and string contents (lines kept)."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"),
                  text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    return re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)


def defined_functions(text):
    """Names of the non-static functions |text| (stripped) defines."""
    out = set()
    for m in FUNC_START_RE.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        if text[i:].lstrip().startswith("{"):
            out.add(m.group(1))
    return out


def file_graph(moddir):
    """{file: {file it references: first function named}} over the .c files
    of |moddir|, counting only functions its own headers declare."""
    texts, declared = {}, set()
    for f in sorted(os.listdir(moddir)):
        with open(os.path.join(moddir, f), encoding="utf-8",
                  errors="replace") as fh:
            if f.endswith(".c"):
                texts[f] = strip_c(fh.read())
            elif f.endswith(".h"):
                declared |= set(CALL_NAME_RE.findall(strip_c(fh.read())))
    owner = {}
    for f, text in texts.items():
        for name in defined_functions(text) & declared:
            owner[name] = f
    graph = {}
    for f, text in texts.items():
        for name in sorted(set(IDENT_RE.findall(text))):
            o = owner.get(name)
            if o and o != f:
                graph.setdefault(f, {}).setdefault(o, name)
    return graph


def shortest_path(graph, src, dst, banned):
    """A shortest path src..dst not using the edge |banned|, or None."""
    prev, queue = {src: None}, deque([src])
    while queue:
        node = queue.popleft()
        if node == dst:
            path = []
            while node is not None:
                path.append(node)
                node = prev[node]
            return path[::-1]
        for nxt in sorted(graph.get(node, {})):
            if (node, nxt) != banned and nxt not in prev:
                prev[nxt] = node
                queue.append(nxt)
    return None


def check_file_cycles(root, errors):
    """Rule 8. An edge u->v lies on a cycle of more than two files exactly
    when v reaches u without the edge v->u (a mutual pair is allowed)."""
    for mod in FILE_CYCLE_MODULES:
        moddir = os.path.join(root, mod)
        if not os.path.isdir(moddir):
            continue
        graph = file_graph(moddir)
        seen = set()
        for u in sorted(graph):
            for v in sorted(graph[u]):
                path = shortest_path(graph, v, u, (v, u))
                if not path:
                    continue
                cycle = [u] + path
                key = frozenset(cycle)
                if key in seen:
                    continue
                seen.add(key)
                steps = ", ".join("%s calls %s()" % (a, graph[a][b])
                                  for a, b in zip(cycle, cycle[1:]))
                errors.append("%s/: file cycle of %d: %s (%s): call up "
                              "through a table of function pointers"
                              % (mod, len(cycle) - 1, " -> ".join(cycle),
                                 steps))


def check(root):
    errors = []
    check_doc_links(root, errors)
    check_includes(root, errors)
    check_file_cycles(root, errors)
    check_spec_ids(root, errors)
    check_documented_floors(root, errors)
    return errors


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


# A docs/layout.md table that agrees with FLOORS, for the self-test.
LAYOUT = "".join("| %d | `%s/` | |\n" % (n, m)
                 for m, n in sorted(FLOORS.items()) if n >= 0)


def self_test():
    """Each rule must catch a planted violation (and pass a clean tree)."""
    cases = {
        "clean": ({}, None),
        "upward include": ({"util/bad.c": '#include "channel/channel.h"\n'},
                           "arrows point down"),
        "internals": ({"retry/bad.c": '#include "lb/lb_int.h"\n'},
                      "the internals of lb/"),
        "cycle": ({"lb/x.c": '#include "retry/retry.h"\n',
                   "retry/y.c": '#include "lb/lb.h"\n'}, "module cycle"),
        "no floor": ({"newroom/a.c": "int a;\n"}, "no floor"),
        # Spelled apart so that this file itself cites no unknown id.
        "unknown id": ({"retry/z.c": "/* SPEC RT-%s */\n" % "99"},
                       "cites RT-" + "99"),
        "bare name": ({"util/w.c": '#include "h2server.h"\n'},
                      "arrows point down"),
        "header floor": ({"lb/lb.h": "/* Layout: floor 3 of docs/layout.md."
                                     " */\n"}, "says floor 3"),
        "dead link": ({"docs/a.md": "[x](b.md) [y](spec.md#nope)\n"},
                      "b.md: no such file"),
        "dead anchor": ({"docs/a.md": "[y](spec.md#nope)\n"},
                        "no such heading"),
        "file cycle": ({"channel/b.c": "void b(void) {\n  c();\n}\n",
                        "channel/c.c": "void c(void) {\n  a();\n}\n"},
                       "file cycle of 3: a.c -> b.c -> c.c -> a.c"),
        "layout table": ({"docs/layout.md": LAYOUT.replace("| 2 | `lb/`",
                                                           "| 1 | `lb/`")},
                         "lb/ is on floor 1 there"),
    }
    base = {
        "util/util.h": "/* util */\n",
        "lb/lb.h": '#include "util/util.h"\n',
        "lb/lb_int.h": '#include "lb/lb.h"\n',
        "retry/retry.h": '#include "util/util.h"\n/* SPEC RT-01 */\n',
        "channel/channel.h": '#include "lb/lb.h"\n#include "retry/retry.h"\n',
        "channel/c.c": '#include "channel/channel.h"\n',
        # Rule 8: a.c <-> m.c is a pair (allowed); b.c is called by a.c and
        # calls a.c through a pointer only; s.c's x() is static, so b.c's
        # x() is not s.c's (else a.c -> b.c -> s.c -> a.c).
        "channel/ch_int.h": "void a(void);\nvoid b(void);\nvoid c(void);\n"
                            "void m(void);\nvoid x(void);\n",
        "channel/a.c": "void a(void) {\n  b();\n  m(); /* c() */\n}\n",
        "channel/m.c": "void m(void) {\n  a();\n}\n",
        "channel/b.c": "void b(void) {\n  up->a();\n  x();\n}\n",
        "channel/s.c": "static void x(void) {\n  a();\n}\n",
        "h2server/h2server.h": "/* server */\n",
        "test/t.c": '#include "lb/lb_int.h"\n#include "channel/channel.h"\n',
        "docs/spec.md": "- RT-01 The first.\n",
        "docs/layout.md": LAYOUT,
    }
    failed = 0
    for name, (extra, expect) in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            for rel, text in list(base.items()) + list(extra.items()):
                write(tmp, rel, text)
            errors = check(tmp)
            if expect is None:
                ok = not errors
            else:
                ok = any(expect in e for e in errors)
            print("%s: %s%s" % ("ok" if ok else "FAILED", name,
                                "" if ok else " -> %r" % errors))
            failed += not ok
    return 1 if failed else 0


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--self-test":
        return self_test()
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    errors = check(sys.argv[1])
    for e in errors:
        print(e)
    if errors:
        print("check_layers: %d violation(s); floors in docs/layout.md"
              % len(errors))
        return 1
    print("check_layers: clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
