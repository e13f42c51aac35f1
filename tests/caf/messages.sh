#!/bin/bash
# messages.sh -- what a coarray user reads when something goes wrong.
#
#  * Images, not ranks: under cafrun every message names images numbered
#    from 1 -- a killed image (fhrun's and the survivors' messages), an
#    out-of-range coindex, ERROR STOP -- and never "rank"; the same three
#    failures on image 2 while the other images put to and get from it,
#    over tcp (FH_SHM=off) and by default, where the conduit's messages
#    (a failed transfer, a lost connection) may come first.
#  * FH_CAF_HEAP: every bad value (0, too small for the job, garbage, too
#    large, overflowing) is refused naming the variable, the value and the
#    accepted range.
#  * STOP and ERROR STOP print and exit as gfortran does: "STOP" without a
#    code prints nothing, "stop 'text'" prints it and exits 0, "error stop
#    5" exits 5, "error stop 'text'" exits 1.
#
# Environment: CAF, CAFRUN (default caf, cafrun).  Exit status 0 all
# passed, 1 a failure, 77 without gfortran.
set -u

caf=${CAF:-caf}
cafrun=${CAFRUN:-cafrun}
if ! command -v gfortran > /dev/null 2>&1 || ! command -v "$caf" > /dev/null 2>&1; then
    echo "SKIP: gfortran or '$caf' not found"
    exit 77
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/caf_messages.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1

failures=0
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}
# has NAME FILE REGEX [absent] -- FILE matches (or with "absent": does not
# match) REGEX.
has() {
    if grep -Eq -- "$3" "$2"; then found=1; else found=0; fi
    if [ "${4:-}" = absent ]; then found=$((1 - found)); fi
    if [ "$found" -eq 1 ]; then echo "ok $1"; else
        fail "$1: expected ${4:+no }/$3/ in the output:"
        sed 's/^/    /' "$2" | head -n 12
    fi
}
# job NAME STATUS PROG NP [ARGS...] -- runs PROG ARGS on NP images, output in log.
job() {
    timeout -k 5 60 "$cafrun" -n "$4" "./$3" "${@:5}" > log 2>&1 < /dev/null
    local rc=$?
    if [ "$rc" -ne "$2" ]; then
        fail "$1: exit status $rc, expected $2"
        sed 's/^/    /' log | head -n 12
    fi
}
build() {
    cat > "$1.f90"
    "$caf" -o "$1" "$1.f90" > build.log 2>&1 || { cat build.log; fail "$1 does not compile"; exit 1; }
}

# ---- images, not ranks
build killed <<'EOF'
program killed
  integer :: x[*]
  sync all
  ! The shell's parent is this image.
  if (this_image() == 2) call execute_command_line('kill -9 $PPID')
  sync all
end program killed
EOF
job "kill -9 of image 2" 137 killed 3
has "fhrun names the killed image" log '^fhrun: image 2 \(pid [0-9]+\) killed by signal 9'
# The survivor that learns it from fhrun gives the signal; one whose own
# check saw the process before fhrun reaped it can only say it exited.
has "a survivor names the image that died" log '^firehose\[image [13]\]: image 2 \(pid [0-9]+\) died: (killed by signal 9|its process has exited)'
has "no message says rank" log 'rank' absent

build coindex <<'EOF'
program coindex
  integer :: x(3)[*]
  x = 1
  sync all
  if (this_image() == 2) x(1)[num_images() + 2] = 3
  sync all
end program coindex
EOF
job "out-of-range coindex on image 2" 1 coindex 3
has "the error names image 2 and the coindex" log '^caf: image 2: .*image index 5 is out of range \[1, 3\]'
has "the survivors name image 2" log '^firehose\[image [13]\]: image 2 \(pid [0-9]+\) died: aborted the job'
has "no message says rank" log 'rank' absent

# A scalar element past the coarray's end, to and from another image (the
# library's bounds check: nothing is compiled with -fcheck=bounds).
build subscript <<'EOF'
program subscript
  integer :: x(3)[*], i, y
  character(len=8) :: how
  call get_command_argument(1, how)
  i = 1000 + len_trim(how)
  x = 1
  sync all
  if (this_image() == 2) then
    if (how == 'put') x(i)[1] = 3
    if (how == 'get') y = x(i)[1]
  end if
  sync all
end program subscript
EOF
for how in put get; do
    job "a scalar $how past the coarray on image 2" 1 subscript 2 "$how"
    has "the $how's error names image 2, the bytes and image 1" log \
        '^caf: image 2: .*subscript out of bounds: bytes \[[0-9]+, [0-9]+\) of a coarray of 12 bytes on image 1'
done

build errstop <<'EOF'
program errstop
  integer :: x[*]
  sync all
  if (this_image() == 2) error stop 5
  sync all
end program errstop
EOF
job "error stop 5 on image 2" 5 errstop 2
has "ERROR STOP 5 printed" log '^ERROR STOP 5$'
has "the abort names image 2" log 'image 2 executed ERROR STOP 5'
has "no message says rank" log 'rank' absent

# ---- images, not ranks, when the network notices first: the other
# images put to and get from image 2 in a loop when it fails, so that a
# survivor's transfer or connection fails before (or instead of) the
# launcher's notice -- over tcp (FH_SHM=off) and within the node (the
# default).  Which comes first is a race: the exit status is the failure's
# own or 1 (a survivor's failed transfer aborted the job first), and the
# words differ, but every message names images, never ranks.
build hammer <<'EOF'
program hammer
  integer :: x(1024)[*], y, i, me, n
  character(len=16) :: how
  call get_command_argument(1, how)
  me = this_image()
  n = num_images()
  x = me
  sync all
  do i = 1, 1000000
    if (me == 2 .and. i == 300) then
      select case (how)
      case ('kill')
        call execute_command_line('kill -9 $PPID')
      case ('errstop')
        error stop 5
      case ('coindex')
        x(1)[n + 2] = 3
      end select
    end if
    x(:)[2] = x(:)
    y = x(7)[2]
    x(1)[mod(me, n) + 1] = y + i
  end do
  sync all
end program hammer
EOF
# hammer HOW "STATUSES" NP [VAR=value] -- image 2 fails by HOW while the
# others hammer it; the exit status is one of STATUSES.
hammer() {
    local name="$1 on image 2 of $3 under traffic${4:+ ($4)}" rc
    env ${4:+"$4"} timeout -k 5 60 "$cafrun" -n "$3" ./hammer "$1" > log 2>&1 < /dev/null
    rc=$?
    case " $2 " in
    *" $rc "*) ;;
    *) fail "$name: exit status $rc, expected one of $2"
       sed 's/^/    /' log | head -n 12 ;;
    esac
    has "$name: image 2 is named" log 'image 2([^0-9]|$)'
    has "$name: no message says rank" log '[Rr]ank' absent
    has "$name: no line is prefixed with a rank number" log '^firehose\[[0-9]+\]' absent
}
for env in FH_SHM=off ""; do
    hammer kill "137 1" 4 $env
    hammer errstop "5 1" 3 $env
    hammer coindex "1" 4 $env
done

# ---- FH_CAF_HEAP
build hello <<'EOF'
program hello
  integer :: x[*]
  x = this_image()
  sync all
  if (this_image() == 1) print '(a)', 'hello'
end program hello
EOF
for v in 0 4k 1m; do
    FH_CAF_HEAP=$v job "FH_CAF_HEAP=$v" 1 hello 2
    has "FH_CAF_HEAP=$v is refused with the range" log \
        "^caf: image [12]: start-up: FH_CAF_HEAP=$v is too small: on 2 images the library keeps [0-9]+ bytes of it for itself; expected a size from [0-9]+[kmg] to 131072g"
    # The floor the message names (the library's own share, measured at
    # start-up) must then be enough.
    floor=$(sed -n 's/.*expected a size from \([0-9]*[kmg]\) to.*/\1/p' log | head -n 1)
done
# No local heap after it: the symmetric heap's end is the segment's, and
# start-up must still name the size, not fail on the scratch it could not
# map (it said "collective scratch is not shared memory" before).
FH_CAF_HEAP=4k FH_CAF_LOCAL_HEAP=0 job "FH_CAF_HEAP=4k FH_CAF_LOCAL_HEAP=0" 1 hello 2
has "FH_CAF_HEAP=4k without a local heap is refused with the range" log \
    "^caf: image [12]: start-up: FH_CAF_HEAP=4k is too small: on 2 images the library keeps [0-9]+ bytes of it for itself; expected a size from [0-9]+[kmg] to 131072g minus FH_CAF_LOCAL_HEAP=0"
for v in xyz 99999999999g 12q; do
    FH_CAF_HEAP=$v job "FH_CAF_HEAP=$v" 1 hello 2
    has "FH_CAF_HEAP=$v is refused with the range" log \
        "FH_CAF_HEAP=$v: expected a size such as 4096, 64k, 4M, 1G, at most 131072g"
done
FH_CAF_HEAP=200000g job "FH_CAF_HEAP=200000g" 1 hello 2
has "FH_CAF_HEAP=200000g is refused with the range" log "FH_CAF_HEAP=[0-9]+: expected at most 131072g"
FH_CAF_HEAP=${floor:-2m} job "FH_CAF_HEAP=${floor:-2m} (the floor named)" 0 hello 2
has "FH_CAF_HEAP=${floor:-2m}, the floor named, is enough on 2 images" log '^hello$'

# ---- STOP and ERROR STOP (as gfortran -fcoarray=single)
stop_case() { # NAME STATUS STATEMENT
    build "$1" <<EOF
program $1
  integer :: x[*]
  sync all
  $3
end program $1
EOF
    job "$3" "$2" "$1" 2
}
stop_case s_plain 0 "stop"
has "STOP without a code prints nothing" log '.' absent
stop_case s_text 0 "stop 'done'"
has "stop 'done' prints STOP done" log '^STOP done$'
stop_case s_quiet 0 "stop 'done', quiet=.true."
has "QUIET=.true. prints nothing" log '.' absent
stop_case s_errtext 1 "error stop 'bad'"
has "error stop 'bad' prints ERROR STOP bad" log '^ERROR STOP bad$'
stop_case s_errcode 5 "error stop 5"
has "error stop 5 prints ERROR STOP 5" log '^ERROR STOP 5$'

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
echo "PASS: messages"
