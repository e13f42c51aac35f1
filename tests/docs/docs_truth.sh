#!/bin/sh
# docs_truth.sh -- every FH_ name, path, make target and option that README.md,
# docs/ and the man pages show exists, and the commands the README promises
# run (tests/docs/docs_truth.py says exactly what is checked).
#
# Run by `make check` (which sets top_srcdir and top_builddir); standalone:
#   top_srcdir=. top_builddir=_build sh tests/docs/docs_truth.sh
top_srcdir=${top_srcdir:-.}
exec python3 "$top_srcdir/tests/docs/docs_truth.py"
