#!/usr/bin/env python3
"""docs_truth.py -- what README.md, docs/ and the man pages name must exist.

    top_srcdir=. top_builddir=_build python3 tests/docs/docs_truth.py

Reads every Markdown file the project ships to users (README.md, docs/*.md,
every folder's README) and the man pages, and checks:

  1. every FH_* name is a variable of the configuration table
     (`fhinfo --markdown`, generated from firehose/util/config.c), an identifier
     of include/firehose.h, or a name the code reads (a string literal
     "FH_..." in a source, script or test) or an identifier of the C code; a prefix pattern (`FH_IBV_*`)
     must match at least one of those;
  2. every repository path written in backquotes or in a shell block
     (tools/..., bench/..., tests/..., docs/..., caf/..., include/...,
     firehose/..., conduits/..., .ci/...) exists in the source tree, or in
     the build tree for programs that are built;
  3. every `make TARGET` names a target of the generated Makefile;
  4. every --option given to one of our programs or scripts appears in that
     program's source (so a renamed or removed option fails here);
  5. a few commands the README promises are run: `fhinfo -c`, `fhinfo
     --check-env` (and that it rejects an unknown FH_ variable), `fhrun
     --help`, `fhbench --help`, `caf --show`.

Exit 0 with a PASS line, 1 listing every failure.
"""
import glob
import os
import re
import subprocess
import sys

top = os.path.abspath(os.environ.get("top_srcdir", "."))
build = os.path.abspath(os.environ.get("top_builddir", os.path.join(top, "_build")))
failures = []


def fail(where, what):
    failures.append(f"{where}: {what}")


def in_build_tree(f):
    """A file of a build tree inside the source tree (_build*, or distcheck's
    build directory), not a source.  An in-tree build (./configure in the
    source directory: build == top) has no such tree: every file counts."""
    if os.path.relpath(f, top).startswith("_build"):
        return True
    return build != top and f.startswith(build + os.sep)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


docs = [os.path.join(top, "README.md")]
docs += sorted(glob.glob(os.path.join(top, "docs", "*.md")))
# every folder's README (what lives there, what it may include)
for folder in ("include", "firehose", "conduits", "caf", "tools", "tests", "bench"):
    docs += sorted(f for f in glob.glob(os.path.join(top, folder, "**", "README*"), recursive=True)
                   if not in_build_tree(f))
mans = [os.path.join(top, p) for p in ("tools/fhrun.1", "caf/caf.1", "caf/cafrun.1")]


def rel(p):
    return os.path.relpath(p, top)


# ---------------------------------------------------------------- 1. FH_*
def known_fh_names():
    fhinfo = os.path.join(build, "tools", "fhinfo")
    out = subprocess.run([fhinfo, "--markdown"], capture_output=True, text=True, check=True).stdout
    table = set(re.findall(r"^\| `(FH_[A-Z0-9_]+)`", out, re.M))
    if len(table) < 10:
        fail("fhinfo --markdown", f"only {len(table)} variables: is fhinfo built?")
    header = set(re.findall(r"\b(FH_[A-Z0-9_]+)\b", read(os.path.join(top, "include", "firehose.h"))))
    # identifiers of the code (docs/ describe internals by name too)
    for f in glob.glob(os.path.join(top, "**", "*.[ch]"), recursive=True):
        if not in_build_tree(f):   # sources only
            header |= set(re.findall(r"\b(FH_[A-Z0-9_]+)\b", read(f)))
    read_by_code = set()
    for pattern in ("firehose/**/*.[ch]", "conduits/**/*.[ch]", "tools/*.[ch]", "tools/*.sh",
                    "tools/*.in", "caf/*.[ch]", "caf/*.in", "tests/**/*.[ch]", "tests/**/*.sh",
                    "tests/**/*.py", "tests/**/*.f90", "bench/**/*.[ch]", "bench/**/*.sh",
                    "Makefile.am", "configure.ac", ".ci/run"):
        for f in glob.glob(os.path.join(top, pattern), recursive=True):
            text = read(f)
            # a quoted name, an assignment or an expansion: something reads or sets it
            read_by_code |= set(re.findall(r'["\'{$](FH_[A-Z0-9_]+)\b', text))
            read_by_code |= set(re.findall(r"\b(FH_[A-Z0-9_]+)=", text))
    return table, header | read_by_code


def check_fh_names():
    table, other = known_fh_names()
    everything = table | other
    for doc in docs + mans:
        for m in re.finditer(r"\bFH_[A-Z0-9_]*[A-Z0-9](_?\*)?", read(doc)):
            name = m.group(0)
            if name.endswith("*"):
                prefix = name.rstrip("*")
                if not any(n.startswith(prefix) for n in everything):
                    fail(rel(doc), f"{name}: no FH_ name starts with {prefix}")
            elif name not in everything:
                fail(rel(doc), f"{name} is neither a configuration variable (fhinfo --markdown), "
                     "nor in include/firehose.h, nor read by any code")
    return table


# ------------------------------------------------ 2-4. paths, make, options
PATH_RE = re.compile(r"(?<![\w./-])((?:\.\./|\./)?(?:tools|bench|tests|docs|caf|include|firehose|conduits|"
                     r"\.ci)/[\w./+-]*[\w+-])")
# Programs and scripts whose options a document may show: the files that define them.
OPTION_SOURCES = {
    "fhrun": ["tools/launcher/*.c"],
    "fhinfo": ["tools/fhinfo.c"],
    "fhbench": ["bench/*.c"],
    "caf": ["caf/caf.in"],
    "cafrun": ["caf/cafrun.in"],
}


def code_spans(text):
    """Backquoted spans and the lines of fenced shell blocks."""
    spans = []
    fence = None
    for line in text.splitlines():
        if line.startswith("```"):
            fence = None if fence is not None else line[3:].strip()
            continue
        if fence is not None:
            if fence in ("sh", "bash", "console", "shell"):
                spans.append(line)
            continue
        spans += re.findall(r"`([^`]+)`", line)
    return spans


def exists(path):
    p = path
    while p.startswith("../") or p.startswith("./"):
        p = p[3:] if p.startswith("../") else p[2:]
    p = p.rstrip(".,:;)")
    if "*" in p or "<" in p or "{" in p or p.endswith("/"):
        return True     # a pattern or a folder written generically
    cands = [os.path.join(top, p), os.path.join(build, p)]
    return any(os.path.exists(c) for c in cands) or bool(glob.glob(os.path.join(top, p) + ".*"))


def make_targets():
    text = read(os.path.join(build, "Makefile"))
    # "name:" and, for programs, "name$(EXEEXT):"
    return set(re.findall(r"^([A-Za-z0-9_./-]+?)(?:\$\(EXEEXT\))?:", text, re.M))


def option_sources(prog):
    base = os.path.basename(prog)
    if base in OPTION_SOURCES:
        files = []
        for pat in OPTION_SOURCES[base]:
            files += glob.glob(os.path.join(top, pat))
        return files
    p = prog
    while p.startswith("../") or p.startswith("./"):
        p = p[3:] if p.startswith("../") else p[2:]
    if p.endswith(".sh") and os.path.exists(os.path.join(top, p)):
        return [os.path.join(top, p)]
    if p.startswith("tests/") and os.path.exists(os.path.join(top, p + ".c")):
        return [os.path.join(top, p + ".c")]
    return []


def check_spans():
    targets = make_targets()
    for doc in docs:
        for span in code_spans(read(doc)):
            for path in PATH_RE.findall(span):
                if not exists(path):
                    fail(rel(doc), f"`{path}` does not exist (in the source or the build tree)")
            for m in re.finditer(r"\bmake\s+((?:-C\s+\S+\s+|-\S+\s+)*)([A-Za-z][\w./-]*)", span):
                t = m.group(2)
                if "=" not in t and t not in targets and t not in ("install", "check", "all", "distcheck"):
                    fail(rel(doc), f"`make {t}`: no such target in the Makefile")
            check_options(doc, span)


LAUNCHERS = ("fhrun", "cafrun", "mpirun", "srun")


def check_options(doc, span):
    """In each command of span, each --option after a program we ship must be
    in that program's source.  A command starts after &&, ||, |, ; or a lone
    -- (run-vm.sh's "-- COMMAND"), skips VAR=value words, and a launcher's
    program (the first word after its options) takes over the options after
    it."""
    words = span.replace("\\", " ").split()
    prog, expect_prog, prev_opt = None, True, False
    for w in words:
        if w in ("&&", "|", ";", "||", "--") or w.startswith("#"):
            if w.startswith("#"):
                return
            prog, expect_prog, prev_opt = None, True, False
            continue
        if expect_prog:
            if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", w) or w in ("cd", "timeout", "env"):
                continue
            if w.startswith("-"):
                if prog is not None:                # a launcher's own option
                    check_option(doc, prog, w)
                prev_opt = True
                continue
            if prev_opt and prog is not None:       # the value of a launcher option (-n 2)
                prev_opt = False
                continue
            prog, expect_prog, prev_opt = w, os.path.basename(w) in LAUNCHERS, False
            continue
        if prog is not None:
            check_option(doc, prog, w)


def check_option(doc, prog, word):
    m = re.match(r"^(--[a-z][a-z0-9-]*)", word)
    if not m:
        return
    srcs = option_sources(prog)
    if srcs and not any(m.group(1) in read(s) for s in srcs):
        fail(rel(doc), f"`{prog} {m.group(1)}`: {m.group(1)} is not in "
             f"{', '.join(rel(s) for s in srcs)}")


# ------------------------------------------------------------- 5. run some
def run(where, argv, expect_ok=True, env=None):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(argv, capture_output=True, text=True, env=e, timeout=60)
    if (r.returncode == 0) != expect_ok:
        fail(where, f"`{' '.join(argv)}` exited {r.returncode}: {(r.stdout + r.stderr).strip()[:300]}")
    return r


def check_commands():
    fhinfo = os.path.join(build, "tools", "fhinfo")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("FH_")}
    r = subprocess.run([fhinfo, "-c"], capture_output=True, text=True, env=clean, timeout=60)
    if r.returncode != 0 or "FH_REG_STRATEGY" not in r.stdout:
        fail("README.md", f"`fhinfo -c` exited {r.returncode} or printed no FH_REG_STRATEGY")
    r = subprocess.run([fhinfo, "--check-env"], capture_output=True, text=True, env=clean, timeout=60)
    if r.returncode != 0:
        fail("README.md", f"`fhinfo --check-env` in a clean environment exited {r.returncode}")
    bad = dict(clean, FH_NO_SUCH_VARIABLE="1")
    r = subprocess.run([fhinfo, "--check-env"], capture_output=True, text=True, env=bad, timeout=60)
    if r.returncode == 0 or "FH_NO_SUCH_VARIABLE" not in (r.stdout + r.stderr):
        fail("README.md", "`fhinfo --check-env` accepted FH_NO_SUCH_VARIABLE or did not name it")
    run("README.md", [os.path.join(build, "tools", "fhrun"), "--help"])
    run("docs/performance.md", [os.path.join(build, "bench", "fhbench"), "--help"])
    caf = os.path.join(build, "caf", "caf")
    if os.path.exists(caf):
        run("docs/caf.md", [caf, "--show", os.path.join(top, "caf", "examples", "hello.f90")])


def main():
    for f in (os.path.join(build, "tools", "fhinfo"), os.path.join(build, "Makefile")):
        if not os.path.exists(f):
            print(f"FAIL: {f} missing (build first)")
            return 1
    ntable = len(check_fh_names())
    check_spans()
    check_commands()
    if failures:
        print(f"FAIL: {len(failures)} claim(s) in the documentation do not hold:")
        for f in failures:
            print("  " + f)
        return 1
    print(f"PASS: {len(docs)} documents and {len(mans)} man pages: every FH_ name exists "
          f"({ntable} configuration variables), every path, make target and option shown "
          "exists, and the commands run")
    return 0


if __name__ == "__main__":
    sys.exit(main())
