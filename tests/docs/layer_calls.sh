#!/bin/sh
# layer_calls.sh -- which files of libfirehose call into a higher layer
# (docs/design.md "Layers"), read from the built objects.
#
# The objects are those of libfirehose.la as Makefile.am builds it (its
# convenience libraries, recursively: the unit tests and libfhrt_hooks are
# not in it).  nm gives each object's defined and undefined symbols; a
# symbol undefined in A and defined in B is one arrow A -> B.  Each object
# takes the layer of its source (tests/docs/include_rule.sh --layer, the one
# layer table).  Reported: every arrow into a higher layer with its symbols,
# and the largest file-level cycle (Tarjan's strongly connected components).
#
# Usage (make check runs the default after the build; it sets top_srcdir
# and top_builddir; by hand from the build directory:
#   top_srcdir=.. top_builddir=. sh ../tests/docs/layer_calls.sh):
#   layer_calls.sh [--enforce]   report, and fail on an upward call that is
#                                not in tests/docs/layer_calls.allow (empty:
#                                none is), or on an allowlisted call that no
#                                longer occurs
#   layer_calls.sh --report      report only; exit 0 (1 only if nothing to read)
#   layer_calls.sh --write-allow rewrite that allowlist from the build
# Without an option, LAYER_CALLS_MODE=report in the environment only reports.
set -u

mode=${LAYER_CALLS_MODE:-enforce}
case ${1:-} in
--report) mode=report ;;
--enforce) mode=enforce ;;
--write-allow) mode="write" ;;
'') ;;
*)
    echo "usage: $0 [--report | --enforce | --write-allow]" >&2
    exit 2 ;;
esac
top=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${top_builddir:-.}
NM=${NM:-nm}
if ! command -v "$NM" >/dev/null 2>&1; then
    echo "SKIP: no nm"
    exit 77
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: no python3"
    exit 77
fi
export top build NM mode
exec python3 - <<'EOF'
import os
import re
import subprocess
import sys

top, build, nm, mode = (os.environ[k] for k in ("top", "build", "NM", "mode"))
allow_path = os.path.join(top, "tests", "docs", "layer_calls.allow")


# ------------------------------------------------ libfirehose's sources
def makefile_vars(path):
    """Assignments of Makefile.am: name -> [(words, conditional)]."""
    out, depth, pending = {}, 0, ""
    for line in open(path, encoding="utf-8"):
        line = pending + line.rstrip("\n")
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        pending = ""
        if line.startswith("#") or line.startswith("\t"):
            continue
        word = line.split()[0] if line.split() else ""
        if word == "if":
            depth += 1
            continue
        if word == "endif":
            depth -= 1
            continue
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*(\+?=)(.*)$", line)
        if m:
            name, op, value = m.groups()
            value = value.split("#")[0].split()
            if op == "=":
                out[name] = []
            out.setdefault(name, []).append((value, depth > 0))
    return out


def expand(mvars, name, cond=False, seen=()):
    """Words of variable name, recursively: [(word, conditional)]."""
    words = []
    for value, c in mvars.get(name, []):
        for w in value:
            m = re.fullmatch(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", w)
            if m and m.group(1) not in seen:
                words += expand(mvars, m.group(1), cond or c, seen + (name,))
            elif not m:
                words.append((w, cond or c))
    return words


def library_sources(mvars, lib):
    """[(source, lib, conditional)] of lib and the .la files it links."""
    canon = re.sub(r"[^A-Za-z0-9_]", "_", lib)
    srcs = [(w, lib, c) for w, c in expand(mvars, canon + "_SOURCES") if w.endswith(".c")]
    for w, c in expand(mvars, canon + "_LIBADD"):
        if w.endswith(".la") and "/" not in w:
            srcs += [(s, l, c or c2) for s, l, c2 in library_sources(mvars, w)]
    return srcs


def object_of(src, lib):
    """The built object of src in lib: the PIC one (.libs/) first."""
    d, base = os.path.split(src)
    base = base[:-2]
    prefix = re.sub(r"[^A-Za-z0-9_]", "_", lib[:-3]) + "_la-"
    for cand in (f".libs/{base}.o", f"{base}.o", f".libs/{prefix}{base}.o", f"{prefix}{base}.o"):
        p = os.path.join(build, d, cand)
        if os.path.exists(p):
            return p
    return None


# ------------------------------------------------------------ the graph
def symbols(obj):
    out = subprocess.run([nm, "-P", obj], capture_output=True, text=True, check=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind in ("U", "w", "v"):
            undefined.add(name)
        elif kind.isupper():
            defined.add(name)
    return defined, undefined


def layers(paths):
    out = subprocess.run(["sh", os.path.join(top, "tests", "docs", "include_rule.sh"), "--layer"]
                         + paths, capture_output=True, text=True, check=True).stdout
    return {p: int(l) for l, p in (line.split(" ", 1) for line in out.splitlines())}


def tarjan(nodes, succ):
    """Strongly connected components, iteratively."""
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(succ.get(root, ()))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                comps.append(sorted(comp))
    return comps


def main():
    mvars = makefile_vars(os.path.join(top, "Makefile.am"))
    srcs = library_sources(mvars, "libfirehose.la")
    objs, missing, skipped = {}, [], []
    for src, lib, cond in srcs:
        o = object_of(src, lib)
        if o:
            objs[src] = o
        elif cond:
            skipped.append(src)          # not configured (rdma-core, PMIx...)
        else:
            missing.append(src)
    if missing or not objs:
        print("FAIL: no built object for " + (", ".join(missing) or "any source of libfirehose.la")
              + f" under {build} (build first; top_builddir is the build directory)")
        return 1

    definer, uses = {}, {}
    for src, o in objs.items():
        d, u = symbols(o)
        uses[src] = u
        for s in d:
            definer.setdefault(s, src)
    arrows = {}                          # (from, to) -> {symbols}
    for src, u in uses.items():
        for s in u:
            to = definer.get(s)
            if to and to != src:
                arrows.setdefault((src, to), set()).add(s)
    layer = layers(sorted(objs))
    upward = {(a, b): syms for (a, b), syms in arrows.items() if layer[b] > layer[a]}
    found = sorted(f"{a} -> {b}: {s}" for (a, b), syms in upward.items() for s in syms)

    if mode == "write":
        with open(allow_path, "w", encoding="utf-8") as f:
            f.write("# layer_calls.allow -- calls into a higher layer today, one symbol per line\n"
                    "# (tests/docs/layer_calls.sh --enforce; docs/design.md \"Layers\").\n"
                    "# The list only shrinks: a line that no longer occurs fails --enforce.\n"
                    "# Regenerate from a build: tests/docs/layer_calls.sh --write-allow\n")
            f.writelines(line + "\n" for line in found)
        print(f"layer_calls: wrote {len(found)} line(s) to tests/docs/layer_calls.allow")
        return 0

    allowed, malformed = set(), []
    if os.path.exists(allow_path):
        for line in open(allow_path, encoding="utf-8"):
            line = line.split("#")[0].strip()
            if re.fullmatch(r"\S+ -> \S+: \S+", line):
                allowed.add(line)
            elif line:
                malformed.append(line)

    succ = {}
    for a, b in arrows:
        succ.setdefault(a, set()).add(b)
    comps = sorted(tarjan(sorted(objs), succ), key=len, reverse=True)
    big = comps[0] if comps else []

    print(f"layer_calls: {len(objs)} objects of libfirehose.la, {len(arrows)} file arrows"
          + (f" (not built here: {', '.join(skipped)})" if skipped else ""))
    print(f"\nCalls into a higher layer: {len(upward)} file arrows, {len(found)} symbols"
          " (* = not in tests/docs/layer_calls.allow)")
    for (a, b) in sorted(upward, key=lambda e: (layer[e[0]], e)):
        syms = sorted(upward[(a, b)])
        mark = "*" if any(f"{a} -> {b}: {s}" not in allowed for s in syms) else " "
        print(f" {mark} L{layer[a]} {a} -> L{layer[b]} {b}: {' '.join(syms)}")
    into = {}
    for (a, b) in upward:
        into.setdefault(b, set()).add(a)
    if into:
        print("\nMost called from below:")
        for b, frm in sorted(into.items(), key=lambda kv: (-len(kv[1]), kv[0]))[:5]:
            print(f"   {len(frm):3d} files -> {b}")
    print(f"\nLargest file cycle (Tarjan SCC): {len(big)} files"
          + (" (no cycle)" if len(big) < 2 else ""))
    if len(big) > 1:
        inside = sum(1 for a, b in arrows if a in big and b in big)
        print(f"   {inside} arrows inside it: " + " ".join(big))
    if mode != "enforce":
        return 0

    new = sorted(set(found) - allowed)
    # a call from or to a source this configuration does not build is not gone
    gone = sorted(line for line in allowed - set(found)
                  if not {line.split()[0], line.split()[2][:-1]} & set(skipped))
    if new:
        print("\nFAIL: calls into a higher layer (docs/design.md \"Layers\"):")
        print("\n".join("    " + line for line in new))
    if gone:
        print("\nFAIL: tests/docs/layer_calls.allow lists calls that no longer occur"
              " (delete these lines, or run tests/docs/layer_calls.sh --write-allow):")
        print("\n".join("    " + line for line in gone))
    if malformed:
        print("\nFAIL: tests/docs/layer_calls.allow: lines not of the form \"file -> file: symbol\":")
        print("\n".join("    " + line for line in malformed))
    if new or gone or malformed:
        return 1
    print(f"\nPASS: no call into a higher layer beyond the {len(allowed)} allowlisted")
    return 0


sys.exit(main())
EOF
