#!/bin/sh
# installed.sh -- the Co-Array Fortran tools as a user gets them: `make
# install DESTDIR=<tmp>`, then the coarray hello (caf/examples/hello.f90)
# compiled with the installed caf and run with the installed cafrun on 3
# images, then under mpirun (PMIx); caf --show, the pkg-config file and the
# man pages are checked too.
# (libtool refuses `make install prefix=<tmp>`, so the installed scripts'
# two absolute paths -- libdir, fhrun -- are pointed into DESTDIR.)
#
# Run by `make check` (top_srcdir, top_builddir set); exit 77 = skipped
# (no gfortran).
set -u
top_srcdir=${top_srcdir:-.}
top_builddir=${top_builddir:-.}
fc=$(sed -n "s/^fc=\${FH_CAF_FC:-\(.*\)}$/\1/p" "$top_builddir/caf/caf")
if ! command -v "${FH_CAF_FC:-$fc}" >/dev/null 2>&1; then
    echo "SKIP: no Fortran compiler ($fc)"
    exit 77
fi
# A sanitizer build: the installed library needs its runtime, which the
# installed caf does not link first (only the build tree's caf adds the
# flags); let it load late, and skip the leak check (a Fortran program ends
# with its allocatables allocated).
if grep -q "^extra='.*-fsanitize" "$top_builddir/caf/caf"; then
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0:detect_leaks=0"
    export ASAN_OPTIONS
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fhcafinst.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() { echo "FAIL: $*"; exit 1; }

if ! make -C "$top_builddir" install DESTDIR="$tmp/dest" > "$tmp/install.log" 2>&1; then
    cat "$tmp/install.log"
    fail "make install DESTDIR=$tmp/dest"
fi
# The installation prefix, as configure chose it.
prefix=$(sed -n 's/^prefix = //p' "$top_builddir/Makefile")
[ -d "$tmp/dest$prefix" ] || fail "nothing installed under $tmp/dest$prefix"
ln -s "$tmp/dest$prefix" "$tmp/inst"
libdir_inst=$(sed -n "s/^libdir='\(.*\)'$/\1/p" "$tmp/inst/bin/caf")
fhrun_inst=$(sed -n "s/^fhrun='\(.*\)'$/\1/p" "$tmp/inst/bin/cafrun")
[ "$libdir_inst" = "$prefix/lib" ] || fail "installed caf links from '$libdir_inst', not $prefix/lib"
[ "$fhrun_inst" = "$prefix/bin/fhrun" ] || fail "installed cafrun runs '$fhrun_inst'"
sed -i "s|^libdir=.*|libdir='$tmp/inst/lib'|" "$tmp/inst/bin/caf"
# libcaf_firehose.so finds libfirehose.so through its own RUNPATH, the
# real libdir, which a DESTDIR staging area is not: point the loader at it.
LD_LIBRARY_PATH="$tmp/inst/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH
sed -i "s|^fhrun=.*|fhrun='$tmp/inst/bin/fhrun'|" "$tmp/inst/bin/cafrun"
sed -i "s|^prefix=.*|prefix=$tmp/inst|" "$tmp/inst/lib/pkgconfig/caf_firehose.pc" \
    "$tmp/inst/lib/pkgconfig/firehose.pc"
for f in bin/caf bin/cafrun bin/fhrun share/man/man1/caf.1 share/man/man1/cafrun.1 \
         lib/pkgconfig/caf_firehose.pc; do
    [ -e "$tmp/inst/$f" ] || fail "$f not installed"
done
ls "$tmp/inst/lib/"libcaf_firehose.so* >/dev/null 2>&1 || fail "libcaf_firehose.so not installed"
ls "$tmp/inst/lib/"libcaf_firehose.a >/dev/null 2>&1 || fail "libcaf_firehose.a not installed"

show=$("$tmp/inst/bin/caf" --show x.f90 -o x)
echo "caf --show: $show"
case "$show" in
    *-fcoarray=lib*"-L$tmp/inst/lib"*-lcaf_firehose*) ;;
    *) fail "caf --show does not name -fcoarray=lib and the installed library" ;;
esac
libs=$(PKG_CONFIG_PATH="$tmp/inst/lib/pkgconfig" pkg-config --libs caf_firehose) ||
    fail "pkg-config caf_firehose"
case "$libs" in *-lcaf_firehose*) ;; *) fail "pkg-config --libs: $libs" ;; esac

"$tmp/inst/bin/caf" "$top_srcdir/caf/examples/hello.f90" -o "$tmp/hello" ||
    fail "caf hello.f90"
out=$(FI_TCP_IFACE=${FI_TCP_IFACE:-lo} timeout 120 "$tmp/inst/bin/cafrun" -n 3 "$tmp/hello" 2>&1)
st=$?
echo "$out"
[ "$st" -eq 0 ] || fail "cafrun -n 3 hello exited $st"
for i in 1 2 3; do
    echo "$out" | grep -qx "Hello from image $i of 3" || fail "no greeting of image $i"
done
echo "$out" | grep -q "read from the last image: Hello from image 3 of 3" ||
    fail "image 1 did not read image 3's coarray"
# The same program started by Open MPI's mpirun: the library finds it
# through PMIx (no cafrun involved).
if command -v mpirun >/dev/null 2>&1; then
    out=$(OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
          FI_TCP_IFACE=${FI_TCP_IFACE:-lo} timeout 120 \
          mpirun --oversubscribe -np 2 --mca osc ^rdma "$tmp/hello" 2>&1)
    st=$?
    echo "$out"
    [ "$st" -eq 0 ] || fail "mpirun -np 2 hello exited $st"
    echo "$out" | grep -qx "Hello from image 2 of 2" || fail "no greeting of image 2 under mpirun"
else
    echo "(no mpirun: the PMIx launch is not tried)"
fi
echo "PASS installed"
