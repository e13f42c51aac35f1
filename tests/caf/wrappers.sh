#!/bin/bash
# wrappers.sh -- caf and cafrun accept what OpenCoarrays users type.
#
# Every wrapper option of caf(1) and cafrun(1) (those of OpenCoarrays'
# caf and cafrun: -s/-show/--show, -w/--wraps, -V/-v/--version, -h/--help,
# -np N) behaves as the man pages say, an unknown option or a bad image
# count gets a clear error, and cafrun accepts every option fhrun --help
# lists (so the two cannot drift apart).
#
# Environment: CAF, CAFRUN (default caf, cafrun; make check sets the build
# tree's).  Exit status 0 all passed, 1 a failure, 77 without gfortran.
set -u

caf=${CAF:-caf}
cafrun=${CAFRUN:-cafrun}
if ! command -v gfortran > /dev/null 2>&1 || ! command -v "$caf" > /dev/null 2>&1; then
    echo "SKIP: gfortran or '$caf' not found"
    exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/caf_wrappers.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
cat > hello.f90 <<'EOF'
program hello
  integer :: x[*]
  x = this_image()
  sync all
  if (this_image() == 1) print '(a,i0)', 'hello images=', num_images()
end program hello
EOF

failures=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}
ok() {
    echo "ok $*"
}
# run NAME WANT_STATUS CMD... -- runs CMD, output in out/err; checks status.
run() {
    local name=$1 want=$2
    shift 2
    "$@" > out 2> err < /dev/null
    local rc=$?
    if [ "$rc" -ne "$want" ]; then
        fail "$name: exit status $rc, expected $want ($*)"
        sed 's/^/    /' out err | head -n 10
        return 1
    fi
    return 0
}
# has NAME FILE REGEX -- FILE matches REGEX (grep -E).
has() {
    if grep -Eq -- "$3" "$2"; then ok "$1"; else
        fail "$1: expected /$3/ in $2, got:"
        sed 's/^/    /' "$2" | head -n 10
    fi
}

# ---- caf
run "caf -s" 0 "$caf" -s && has "caf -s shows the link line" out \
    '-fcoarray=lib .*-lcaf_firehose -lfirehose'
run "caf -show" 0 "$caf" -show hello.f90 -o h1 &&
    has "caf -show shows the command" out '-fcoarray=lib hello\.f90 -o h1 .*-lcaf_firehose'
[ ! -e h1 ] && ok "caf -show runs nothing" || fail "caf -show built h1"
run "caf --show -c" 0 "$caf" --show -c hello.f90 &&
    if grep -q lcaf_firehose out; then fail "caf --show -c: links: $(cat out)"; else ok "caf --show -c: no link line"; fi
for o in -w --wraps --wrapping; do
    run "caf $o" 0 "$caf" "$o" && has "caf $o names the compiler" out '^caf wraps .*(gfortran|f9|fc)'
done
for o in -V --version -v; do
    run "caf $o" 0 "$caf" "$o" && has "caf $o prints the version" out '^caf \(firehose .*\)' &&
        has "caf $o names the compiler's version" out 'GNU Fortran'
done
for o in -h --help; do
    run "caf $o" 0 "$caf" "$o" && has "caf $o" out '^ *caf -s\|-show\|--show'
done
run "caf (no argument)" 1 "$caf" && has "caf without input says so" err 'caf: no input files'
run "caf -w -c (gfortran's -w)" 0 "$caf" -w -c hello.f90 &&
    [ -s hello.o ] && ok "caf -w followed by files compiles" || fail "caf -w -c hello.f90: no hello.o"
run "caf -O0 -s (gfortran's -s)" 0 "$caf" -O0 -s hello.f90 -o h2 &&
    [ -x h2 ] && ok "caf -s after the first argument strips (builds)" || fail "caf -O0 -s: no h2"
"$caf" --no-such-option hello.f90 -o h3 > out 2> err
rc=$?
[ "$rc" -ne 0 ] && grep -q -- "--no-such-option" err && ok "caf: unknown option named" ||
    fail "caf --no-such-option: status $rc, stderr: $(cat err)"
run "caf hello.f90" 0 "$caf" hello.f90 -o hello || exit 1

# ---- cafrun
run "cafrun (no argument)" 2 "$cafrun" && has "cafrun without program says so" err 'no program to run'
run "cafrun -s" 0 "$cafrun" -s && has "cafrun -s shows the form" out 'fhrun -n <number_of_images> '
run "cafrun -s -np 2" 0 "$cafrun" -s -np 2 ./hello a b &&
    has "cafrun -s -np 2 shows the command" out "^FH_RANK_NAMES='image 1' .*fhrun -n 2 \./hello a b$"
run "cafrun --show" 0 "$cafrun" --show -n 3 ./hello && has "cafrun --show" out 'fhrun -n 3 \./hello$'
for o in -w --wraps; do
    run "cafrun $o" 0 "$cafrun" "$o" && has "cafrun $o names fhrun" out '^cafrun wraps .*fhrun$' &&
        has "cafrun $o prints fhrun's version" out '^fhrun \(firehose\)'
done
for o in -V --version -v; do
    run "cafrun $o" 0 "$cafrun" "$o" && has "cafrun $o prints the version" out '^cafrun \(firehose'
done
for o in -h --help; do
    run "cafrun $o" 0 "$cafrun" "$o" && has "cafrun $o" out '^ *cafrun -np N'
done
for form in "-np 2" "-n 2" "-n2" "--np=2" "--np 2"; do
    # shellcheck disable=SC2086
    run "cafrun $form" 0 "$cafrun" $form ./hello && has "cafrun $form runs 2 images" out '^hello images=2$'
done
run "cafrun -v -n 1" 0 "$cafrun" -v -n 1 ./hello && has "cafrun -v with a program is fhrun's --verbose" err '^fhrun: '
run "cafrun --reenable-auto-cleanup" 0 "$cafrun" --reenable-auto-cleanup -np 1 ./hello &&
    has "cafrun --reenable-auto-cleanup is accepted" out '^hello images=1$'
for n in x 0 -1 2x ''; do
    run "cafrun -np '$n'" 2 "$cafrun" -np "$n" ./hello &&
        has "cafrun -np '$n' is refused" err "cafrun: -np '$n': expected a number of images, a positive integer"
done
run "cafrun -np" 2 "$cafrun" -np && has "cafrun -np without a count" err 'cafrun: -np needs a value'
run "cafrun --frob" 2 "$cafrun" --frob -n 2 ./hello && has "cafrun: unknown option named" err "cafrun: unknown option '--frob'"
run "cafrun without -n" 2 "$cafrun" ./hello && has "cafrun without -n says so" err 'missing -n N, the number of images'
# Every option of fhrun --help passes (with a value where it takes one).
fhrun=$("$cafrun" -w | sed -n 's/^cafrun wraps //p')
"$fhrun" --help > fhrun.help
n=0
for o in $(grep -Eo -- '--[a-z][a-z-]*( [A-Za-z:]+)?' fhrun.help | awk '{print $1}' | sort -u); do
    case $o in --help|--version) continue ;; esac
    v=()
    grep -Eq -- "$o [A-Za-z]" fhrun.help && v=(1)
    n=$((n + 1))
    run "cafrun -s $o" 0 "$cafrun" -s -n 1 "$o" "${v[@]}" ./hello ||
        echo "    (cafrun does not know fhrun's option $o)"
done
[ "$n" -ge 5 ] && ok "cafrun accepts fhrun's $n options" || fail "read only $n options from fhrun --help"

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
echo "PASS: wrappers"
