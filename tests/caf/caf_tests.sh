#!/bin/bash
# caf_tests.sh -- build and run the self-checking Co-Array Fortran tests.
#
# Usage: tests/caf/caf_tests.sh [test-name ...]
#   (names like caf_basic; default: every tests/caf/caf_*.f90)
#
# Environment:
#   CAF                   compiler wrapper (default: caf)
#   CAFFLAGS              extra compiler flags (default: none)
#   CAFRUN                launcher, word-split (default: cafrun); run as
#                         $CAFRUN -n N ./program
#   FH_CAF_TEST_NP        image counts to run (default: "1 2 3 4")
#   FH_CAF_TEST_TIMEOUT   seconds per run (default: 120)
#   FH_CAF_BIGHEAP_MB     caf_bigheap coarray size per image, MiB (default 64)
#   FH_CAF_BIGHEAP_FIREHOSE_M  FH_FIREHOSE_M for caf_bigheap runs
#                         (default: a quarter of FH_CAF_BIGHEAP_MB, so the
#                         working set is 4x the firehose budget); its
#                         FH_FIREHOSE_MAXVICTIM is a sixteenth (over tcp and
#                         shm the derived one is not bounded by ulimit -l,
#                         and kept victims would never be evicted)
#
# Every program prints "PASS <name>" on image 1 and exits 0, except:
#   caf_errstop   must exit nonzero (an image does error stop 7) and end
#                 before the timeout;
#   caf_failimage must print its PASS line; the exit status after a failed
#                 image is processor dependent and is not checked;
#   a program whose source says "EXPECT-FAIL: <text>" must exit nonzero
#                 and print <text> (an error without STAT= stops the job);
#                 With "EXPECT-EVERY-IMAGE" as well, every image must
#                 print it ("caf: image I: ...<text>", I = 1..N);
#   a program whose source says "EXIT-STATUS: <n>" must print its PASS
#                 line and exit with status n (a STOP code);
#   a program whose source says "MIN-IMAGES: <n>" is not run on fewer
#                 images ("skip <name> np=<N>").
# A program whose source says "ONLY-ENV: VAR=value ..." runs with those
# variables only (e.g. FH_SHM=off FH_OFI_PROVIDER=tcp: connections exist).
# A program whose source says "ALSO-ENV: VAR=value ..." runs twice per
# image count: as is, and with those variables (e.g. FH_SHM=off, so that
# the collectives' message path is tested as well as the node path); each
# further ALSO-ENV line adds a run.
# With FH_CAF_BIGHEAP_STATS=1 (make check sets it: firehose's caf only),
# caf_bigheap runs with FH_STATS=1 and must show the registration cache
# at work on image 1: misses, moves and evictions, and its hit/miss/move
# counts are printed.
# One line per run: "ok <name> np=<N> (<secs> s)" or "FAIL ..." followed by
# the program's output.  Exit status: 0 all ok, 1 any failure, 77 when the
# compiler wrapper or gfortran is missing.
#
# Validated against OpenCoarrays 2.10.1 (Debian, OpenMPI 4.1.4) with
#   CAF=caf.openmpi CAFRUN='cafrun.openmpi' tests/caf/caf_tests.sh
# (as root also OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1,
# and OMPI_MCA_rmaps_base_oversubscribe=1 for more images than cores;
# OpenMPI's default one-sided component cannot create a window on a single
# process, so np=1 needs OMPI_MCA_osc=pt2pt).  See tests/caf/README.md for
# what OpenCoarrays gets wrong.

set -u

srcdir=$(cd "$(dirname "$0")" && pwd)
read -r -a caf_cmd <<< "${CAF:-caf}"
read -r -a cafrun_cmd <<< "${CAFRUN:-cafrun}"
read -r -a caf_flags <<< "${CAFFLAGS:-}"
read -r -a nps <<< "${FH_CAF_TEST_NP:-1 2 3 4}"
limit=${FH_CAF_TEST_TIMEOUT:-120}
bigheap_mb=${FH_CAF_BIGHEAP_MB:-64}
bigheap_budget=${FH_CAF_BIGHEAP_FIREHOSE_M:-$(( (bigheap_mb + 3) / 4 ))M}
bigheap_victim=$(( (bigheap_mb + 15) / 16 ))M

if [ ${#caf_cmd[@]} -eq 0 ] || ! command -v "${caf_cmd[0]}" > /dev/null 2>&1; then
    echo "SKIP: compiler wrapper '${CAF:-caf}' not found"
    exit 77
fi
if ! command -v gfortran > /dev/null 2>&1; then
    echo "SKIP: gfortran not found"
    exit 77
fi
if [ ${#cafrun_cmd[@]} -eq 0 ] || ! command -v "${cafrun_cmd[0]}" > /dev/null 2>&1; then
    echo "FAIL: launcher '${CAFRUN:-cafrun}' not found"
    exit 1
fi

if [ $# -gt 0 ]; then
    tests=("$@")
else
    tests=()
    for f in "$srcdir"/caf_*.f90; do
        name=$(basename "$f" .f90)
        tests+=("$name")
    done
fi

# Under AddressSanitizer (the CI's sanitizer build links the programs with
# it): no leak check.  A Fortran program ends with its main program's
# allocatables still allocated (the standard does not deallocate them), as
# are the library's coarray tokens; memory errors are still fatal.
if [ -n "${ASAN_OPTIONS+x}" ]; then
    ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
    export ASAN_OPTIONS
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/caf_tests.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 1' INT TERM

failures=0

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
indent() { sed 's/^/    /' "$1"; }

for name in "${tests[@]}"; do
    src="$srcdir/$name.f90"
    if [ ! -f "$src" ]; then
        echo "FAIL $name: no such test ($src)"
        failures=$((failures + 1))
        continue
    fi
    mkdir -p "$work/$name"
    if ! (cd "$work/$name" && "${caf_cmd[@]}" "${caf_flags[@]}" -o "$name" "$src") > "$work/$name/build.log" 2>&1; then
        echo "FAIL $name: does not compile"
        indent "$work/$name/build.log"
        failures=$((failures + 1))
        continue
    fi
    min_images=$(sed -n 's/.*MIN-IMAGES: *\([0-9]*\).*/\1/p' "$src" | head -n 1)
    # "ALSO-ENV: VAR=value" in a source: each run is repeated with it (one
    # more run per such line).
    alsos=()
    while IFS= read -r line; do
        line=$(printf '%s\n' "$line" | grep -o '[A-Z_][A-Z0-9_]*=[^ ]*' | tr '\n' ' ' |
               sed 's/ $//')
        if [ -n "$line" ]; then alsos+=("$line"); fi
    done < <(sed -n 's/.*ALSO-ENV: *//p' "$src")
    # "ONLY-ENV: VAR=value": every run has it (none runs as is).
    only=$(sed -n 's/.*ONLY-ENV: *//p' "$src" | head -n 1 |
           grep -o '[A-Z_][A-Z0-9_]*=[^ ]*' | tr '\n' ' ' | sed 's/ $//')
    runs=()
    for np in "${nps[@]}"; do
        if [ "$np" -lt "${min_images:-1}" ]; then
            echo "skip $name np=$np (needs ${min_images} images)"
            continue
        fi
        runs+=("$np${only:+ $only}")
        for also in "${alsos[@]}"; do runs+=("$np $also"); done
    done
    for run in "${runs[@]}"; do
        read -r np extra <<< "$run"
        label="np=$np${extra:+ $extra}"
        out="$work/$name/np$np${extra:+-${extra//[^A-Za-z0-9]/_}}.log"
        envs=()
        if [ -n "$extra" ]; then read -r -a envs <<< "$extra"; fi
        if [ "$name" = caf_bigheap ]; then
            # FH_SHM=off: the images must reach each other through the
            # registration cache, which this test is about (the rest of
            # the suite runs on the node path: the images share a host).
            envs=(FH_FIREHOSE_M="$bigheap_budget" FH_FIREHOSE_MAXVICTIM="$bigheap_victim"
                  FH_CAF_BIGHEAP_MB="$bigheap_mb" FH_SHM=off)
            if [ "${FH_CAF_BIGHEAP_STATS:-0}" = 1 ]; then
                envs+=(FH_STATS=1 FH_REG_STRATEGY=firehose)
            fi
        fi
        expect=$(sed -n 's/.*EXPECT-FAIL: *//p' "$src" | head -n 1)
        every=$(grep -c "EXPECT-EVERY-IMAGE" "$src")
        status=$(sed -n 's/.*EXIT-STATUS: *\([0-9]*\).*/\1/p' "$src" | head -n 1)
        t0=$(now)
        (cd "$work/$name" && env "${envs[@]}" timeout -k 10 "$limit" "${cafrun_cmd[@]}" -n "$np" "./$name") > "$out" 2>&1 < /dev/null
        rc=$?
        secs=$(elapsed "$t0" "$(now)")
        passes=$(grep -c "^ *PASS $name\$" "$out")
        fails=$(grep -c "^ *FAIL $name" "$out")
        why=""
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && [ "$(elapsed "$t0" "$(now)" | cut -d. -f1)" -ge "$limit" ]; then
            why="timed out after $limit s"
        else
            case $name in
            caf_bigheap)
                if [ "$rc" -ne 0 ]; then why="exit status $rc"
                elif [ "$passes" -ne 1 ]; then why="no PASS line"
                elif [ "${FH_CAF_BIGHEAP_STATS:-0}" = 1 ] && [ "$np" -gt 1 ]; then
                    total=$(grep "^firehose\[0\]: stats total" "$out")
                    echo "$total" | grep -q " reg_misses=[1-9]" &&
                        echo "$total" | grep -q " moves=[1-9]" &&
                        echo "$total" | grep -q " evictions=[1-9]" ||
                        why="image 1 shows no registration misses, moves and evictions"
                    echo "    caf_bigheap np=$np image 1:" $(echo "$total" | grep -o ' \(reg_hits\|reg_misses\|moves\|evictions\)=[0-9]*')
                fi ;;
            caf_errstop)
                if [ "$rc" -eq 0 ]; then why="exit status 0, expected nonzero"
                elif [ "$fails" -ne 0 ]; then why="an image got past sync all"
                fi ;;
            caf_failimage)
                if [ "$passes" -ne 1 ] || [ "$fails" -ne 0 ]; then why="no PASS line (exit status $rc)"; fi ;;
            *)
                if [ -n "$expect" ]; then
                    if [ "$rc" -eq 0 ]; then why="exit status 0, expected an error"
                    elif ! grep -q "$expect" "$out"; then why="no message '$expect'"
                    elif [ "$every" -ne 0 ]; then
                        for ((i = 1; i <= np; i++)); do
                            grep -q "^caf: image $i: .*$expect" "$out" ||
                                why="${why:+$why; }image $i did not say '$expect'"
                        done
                    fi
                elif [ "$rc" -ne "${status:-0}" ]; then why="exit status $rc, expected ${status:-0}"
                elif [ "$fails" -ne 0 ]; then why="FAIL line printed"
                elif [ "$passes" -ne 1 ]; then why="expected exactly one PASS line, got $passes"
                fi ;;
            esac
        fi
        if [ -z "$why" ]; then
            echo "ok $name $label ($secs s)"
        else
            echo "FAIL $name $label ($secs s): $why"
            indent "$out"
            failures=$((failures + 1))
        fi
    done
done

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
exit 0
