#!/bin/bash
# tests/vm/run-vm.sh -- run test programs against real verbs devices (two
# Soft-RoCE/rxe devices on a veth pair) inside a qemu VM booting Debian's
# kernel, on a machine with no RDMA hardware and no KVM.  See README.md.
#
#   tests/vm/run-vm.sh --smoke                      built-in verbs smoke suite
#   tests/vm/run-vm.sh [options] --bin PATH... -- COMMAND...
#   tests/vm/run-vm.sh [options] --bin PATH... --suite FILE
#
# Exit status: 0 only if the VM ran to its end (FH-VM-DONE) and every test
# passed; 1 if a test failed; 2 for usage / set-up errors on the host; 3 if
# the VM did not boot, crashed or timed out (the last console lines are shown).
set -euo pipefail
shopt -s extglob

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PROG=run-vm.sh

usage() {
    cat <<'EOF'
usage: tests/vm/run-vm.sh [options] [--bin PATH[:DST]]... [--file SRC[:DST]]...
                          [--suite FILE]... [--test NAME CMD]... [-- COMMAND...]
       tests/vm/run-vm.sh --smoke [options]

Boots a qemu VM (software emulation) with two Soft-RoCE devices
(rxe0 on veth0 10.0.0.1, rxe1 on veth1 10.0.0.2), runs the tests and prints
  FH-VM-RESULT: PASS|FAIL <name> <status> <seconds>s   (one per test)
  FH-VM-DONE passed=N failed=N
Inside the VM the working directory is /fh; relative guest paths are under /fh.

What goes into the VM:
  --bin PATH[:DST]   a program or shared library, with every library ldd names
                     for it.  DST defaults to PATH (relative -> /fh/PATH, absolute
                     -> same path).  A libtool wrapper script is replaced by its
                     real binary from .libs/, and the wrapper's LD_LIBRARY_PATH
                     dirs (e.g. the build's .libs with libfirehose.so) are
                     searched and exported in the guest.  Non-ELF files
                     (scripts) are copied as they are.
  --file SRC[:DST]   any file or directory (copied, no ldd); DST as for --bin
  --lib-path DIR     extra host library dir for ldd, exported in the guest's
                     LD_LIBRARY_PATH
What runs:
  -- COMMAND...      one test: COMMAND run by /bin/sh in /fh; leading NAME=VALUE
                     words are environment assignments
  --name NAME        name of the -- COMMAND test (default: its program's name)
  --test NAME CMD    one test; CMD is a single shell command line
  --suite FILE       tests, one per line: "<name> <shell command line>"
                     (# comments and blank lines ignored)
  --smoke            the built-in smoke suite (tests/vm/smoke.suite: ibv_devices,
                     ibv_devinfo, rc/ud pingpong rxe0<->rxe1, td_probe)
Environment:
  --env NAME=VALUE   exported for every test; host variables FH_* (except
                     FH_VM_*) are passed through automatically
Control:
  --timeout SEC      kill the whole VM after SEC seconds (default 900)
  --test-timeout SEC kill one test after SEC seconds (default: --timeout)
  --memory MB        guest memory (default 2048)
  --workdir DIR      where to build the initramfs (default: a new directory
                     under ${TMPDIR:-/tmp}); removed at exit unless --keep
  --keep             keep the work dir (initramfs, console.log)
  --no-cache         rebuild the base initramfs (cached by default in
                     ${FH_VM_CACHE:-${TMPDIR:-/tmp}/firehose-vm-cache})
  --no-install       don't run tests/vm/install-deps.sh (just check)
  --quiet            don't echo the console while it runs (console.log keeps it)
  --shell-on-fail    drop to a guest shell if a test failed (interactive use)
EOF
}

die() { echo "$PROG: error: $*" >&2; exit 2; }
log() { echo "$PROG: $*"; }
now() { echo "${EPOCHREALTIME/,/.}"; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# sq WORD: WORD quoted for a POSIX shell.
sq() { local s=${1//\'/\'\\\'\'}; printf "'%s'" "$s"; }

T_START=$(now)
TIMEOUT=900
TEST_TIMEOUT=
MEMORY=2048
KEEP=0
WORKDIR=
USE_CACHE=1
INSTALL=1
QUIET=0
SHELL_ON_FAIL=0
SMOKE=0
CMD_NAME=
BINS=()
FILES=()
LIBPATHS=()
ENVS=()
SUITES=()
TESTS=()    # "name<TAB>command line"
CMD=()

need_arg() { [ "$#" -ge 2 ] || die "$1 needs an argument (see --help)"; }
while [ "$#" -gt 0 ]; do
    case "$1" in
        --timeout) need_arg "$@"; TIMEOUT=$2; shift 2 ;;
        --test-timeout) need_arg "$@"; TEST_TIMEOUT=$2; shift 2 ;;
        --memory) need_arg "$@"; MEMORY=$2; shift 2 ;;
        --keep) KEEP=1; shift ;;
        --workdir) need_arg "$@"; WORKDIR=$2; shift 2 ;;
        --no-cache) USE_CACHE=0; shift ;;
        --no-install) INSTALL=0; shift ;;
        --quiet) QUIET=1; shift ;;
        --shell-on-fail) SHELL_ON_FAIL=1; shift ;;
        --smoke) SMOKE=1; shift ;;
        --bin) need_arg "$@"; BINS+=("$2"); shift 2 ;;
        --file) need_arg "$@"; FILES+=("$2"); shift 2 ;;
        --lib-path) need_arg "$@"; LIBPATHS+=("$(cd "$2" && pwd)") || die "no dir $2"; shift 2 ;;
        --env) need_arg "$@"; [[ "$2" == [A-Za-z_]*=* ]] || die "--env wants NAME=VALUE"; ENVS+=("$2"); shift 2 ;;
        --suite) need_arg "$@"; [ -f "$2" ] || die "no suite file $2"; SUITES+=("$2"); shift 2 ;;
        --name) need_arg "$@"; CMD_NAME=$2; shift 2 ;;
        --test) [ "$#" -ge 3 ] || die "--test needs NAME and CMD"
                TESTS+=("$2"$'\t'"$3"); shift 3 ;;
        -h|--help) usage; exit 0 ;;
        --) shift; CMD=("$@"); break ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
done
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] || die "--timeout wants seconds"
TEST_TIMEOUT=${TEST_TIMEOUT:-$TIMEOUT}
[[ "$TEST_TIMEOUT" =~ ^[0-9]+$ ]] || die "--test-timeout wants seconds"

# -- COMMAND... -> one test line.
if [ "${#CMD[@]}" -gt 0 ]; then
    line='' prog=''
    for w in "${CMD[@]}"; do
        if [ -z "$prog" ] && [[ "$w" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; then
            line+="${w%%=*}=$(sq "${w#*=}") "
        else
            [ -n "$prog" ] || prog=$w
            line+="$(sq "$w") "
        fi
    done
    [ -n "$prog" ] || die "-- COMMAND has no command"
    TESTS+=("${CMD_NAME:-$(basename "$prog")}"$'\t'"${line% }")
fi

# ----------------------------------------------------------------------
# Host prerequisites
# ----------------------------------------------------------------------
if [ "$INSTALL" = 1 ]; then
    "$HERE/install-deps.sh" >&2 || die "installing the VM packages failed"
else
    "$HERE/install-deps.sh" --check || die "packages missing: run tests/vm/install-deps.sh"
fi

# The kernel of Debian's linux-image-amd64 package (not the host's kernel).
KVER=${FH_VM_KVER:-}
if [ -z "$KVER" ]; then
    KVER=$(dpkg-query -W -f='${Depends}' linux-image-amd64 2>/dev/null |
           sed -n 's/^linux-image-\([^ ,]*\).*/\1/p')
fi
[ -n "$KVER" ] || die "cannot tell the kernel version of linux-image-amd64"
VMLINUZ=/boot/vmlinuz-$KVER
MODDIR=/lib/modules/$KVER
[ -r "$VMLINUZ" ] || die "$VMLINUZ missing or unreadable (need root?)"
[ -d "$MODDIR" ] || die "$MODDIR missing"

if [ "$SMOKE" = 1 ]; then
    SUITES+=("$HERE/smoke.suite")
    for b in ibv_devices ibv_devinfo ibv_rc_pingpong ibv_ud_pingpong; do
        BINS+=("$(command -v "$b")") || die "$b not found (ibverbs-utils)"
    done
    FILES+=("$HERE/pair.sh:/fh/vm/pair.sh")
fi
if [ "${#SUITES[@]}" -eq 0 ] && [ "${#TESTS[@]}" -eq 0 ]; then
    die "nothing to run: give --smoke, --suite FILE, --test NAME CMD or -- COMMAND"
fi

# ----------------------------------------------------------------------
# Work dir
# ----------------------------------------------------------------------
if [ -n "$WORKDIR" ]; then
    mkdir -p "$WORKDIR"
    WORKDIR=$(cd "$WORKDIR" && pwd)
    [ "$WORKDIR" != "$(cd "$HERE/../.." && pwd)" ] || die "--workdir must not be the source tree"
    case "$WORKDIR/" in "$(cd "$HERE" && pwd)/"*) die "--workdir must not be in tests/vm" ;; esac
else
    WORKDIR=$(mktemp -d "${TMPDIR:-/tmp}/fh-vm.XXXXXX")
fi
cleanup() {
    if [ "$KEEP" = 1 ]; then
        log "work dir kept: $WORKDIR"
    else
        rm -rf "$WORKDIR"
    fi
}
trap cleanup EXIT

# ----------------------------------------------------------------------
# Staging helpers.  A stage is a directory laid out like Debian 12's merged
# /usr (/bin, /sbin, /lib, /lib64 are symlinks into /usr), so files land at
# the paths ldd prints and the archives agree on every directory.
# ----------------------------------------------------------------------
new_stage() {
    local s=$1
    rm -rf "$s"
    mkdir -p "$s"/usr/bin "$s"/usr/sbin "$s"/usr/lib "$s"/usr/lib64 "$s"/fh/vm
    ln -s usr/bin "$s/bin"; ln -s usr/sbin "$s/sbin"
    ln -s usr/lib "$s/lib"; ln -s usr/lib64 "$s/lib64"
}

# guest_dst PATH: where PATH goes in the guest (relative -> /fh/PATH).
guest_dst() {
    local p=$1
    case "$p" in
        /*) ;;
        *) p=/fh/${p#./} ;;
    esac
    echo "$p"
}

# put STAGE SRC DST: copy file SRC (following links) to DST in STAGE.
put() {
    local s=$1 src=$2 dst=$3
    case "$dst" in
        /usr/bin/sh|/bin/sh|/init|/bb/*) die "refusing to overwrite $dst in the guest" ;;
    esac
    mkdir -p "$s$(dirname "$dst")"
    cp -L --preserve=mode "$src" "$s$dst" || die "cannot copy $src"
}

is_elf() { [ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; }
is_system_dir() {
    case "$1" in
        /lib|/lib64|/usr/lib|/usr/lib64|/lib/x86_64-linux-gnu|/usr/lib/x86_64-linux-gnu) return 0 ;;
    esac
    return 1
}

GUEST_LIBDIRS=()   # non-system dirs holding copied libraries
add_guest_libdir() {
    local d
    for d in "${GUEST_LIBDIRS[@]}"; do [ "$d" = "$1" ] && return 0; done
    GUEST_LIBDIRS+=("$1")
}

# put_libs STAGE FILE [LDPATH]: copy every library ldd names for FILE to the
# path ldd names (the loader finds it there in the guest, or through the
# exported LD_LIBRARY_PATH for non-system dirs).
put_libs() {
    local s=$1 f=$2 ldpath=${3:-} out lib
    is_elf "$f" || return 0
    out=$(LD_LIBRARY_PATH="$ldpath${ldpath:+${LD_LIBRARY_PATH:+:}}${LD_LIBRARY_PATH:-}" ldd "$f" 2>&1) || {
        case "$out" in *"not a dynamic executable"*|*"statically linked"*) return 0 ;; esac
        die "ldd $f failed: $out"
    }
    if grep -q 'not found' <<<"$out"; then
        die "ldd $f: missing libraries:"$'\n'"$(grep 'not found' <<<"$out")"$'\n'"(give --lib-path DIR)"
    fi
    while read -r lib; do
        [ -n "$lib" ] || continue
        [ -e "$s$lib" ] || put "$s" "$lib" "$lib"
        is_system_dir "$(dirname "$lib")" || add_guest_libdir "$(dirname "$lib")"
    done < <(sed -n -e 's/^.*=> \(\/[^ ]*\) (0x.*$/\1/p' -e 's/^[[:space:]]*\(\/[^ ]*\) (0x.*$/\1/p' <<<"$out")
}

# libtool_real WRAPPER: prints the real binary a libtool wrapper script runs
# and, on a second line, the LD_LIBRARY_PATH it sets; fails if not a wrapper.
libtool_real() {
    local w=$1 rel dir real ldp
    is_elf "$w" && return 1
    rel=$(sed -n '1,5s/^# .* - temporary wrapper script for \(.*\)$/\1/p' "$w" 2>/dev/null | head -1)
    [ -n "$rel" ] || return 1
    dir=$(dirname "$w")
    real=$dir/$rel
    local lt
    lt="$dir/$(dirname "$rel")/lt-$(basename "$rel")"
    if [ ! -f "$real" ] && [ -f "$lt" ]; then real=$lt; fi
    [ -f "$real" ] || die "libtool wrapper $w: real binary $real missing (run make first)"
    ldp=$(sed -n 's/^[[:space:]]*LD_LIBRARY_PATH="\(.*\)"$/\1/p' "$w" | head -1)
    ldp=${ldp%:\$LD_LIBRARY_PATH}
    printf '%s\n%s\n' "$real" "$ldp"
}

# ----------------------------------------------------------------------
# Base initramfs (busybox, modules, iproute2, kmod, rxe provider): cached.
# ----------------------------------------------------------------------
T_BUILD=$(now)
MODULES="rdma_rxe veth crc32_generic"
CACHE_DIR=${FH_VM_CACHE:-${TMPDIR:-/tmp}/firehose-vm-cache}
pkgvers=$(dpkg-query -W -f='${Package}=${Version} ' busybox-static kmod iproute2 \
          rdma-core ibverbs-providers libibverbs1 libc6 libgcc-s1 2>/dev/null || true)
key=$( { echo "$KVER $MODULES $pkgvers"; sha256sum "$0"; } | sha256sum | cut -c1-16)
BASE=$CACHE_DIR/base-$KVER-$key.cpio.gz

build_base() {
    local s=$WORKDIR/base m a
    new_stage "$s"
    mkdir -p "$s"/bb "$s"/dev "$s"/proc "$s"/sys "$s"/tmp "$s"/run "$s"/root "$s"/etc/libibverbs.d
    chmod 1777 "$s/tmp"
    # busybox, with its applets in /bb only (so a real binary copied to
    # /usr/bin can never overwrite busybox through an applet symlink)
    cp /bin/busybox "$s/bb/busybox"
    for a in $("$s/bb/busybox" --list); do
        [ "$a" = busybox ] || ln -s busybox "$s/bb/$a"
    done
    ln -s /bb/busybox "$s/usr/bin/sh"
    # the kernel opens /dev/console for init before devtmpfs is mounted
    mknod -m 600 "$s/dev/console" c 5 1 2>/dev/null ||
        echo "$PROG: warning: cannot mknod /dev/console (no console output before /dev is mounted)" >&2
    # kernel modules of the Debian kernel, and their index
    while read -r cmd path _; do
        [ "$cmd" = insmod ] || continue
        put "$s" "$path" "$path"
    done < <(modprobe -a -S "$KVER" --show-depends $MODULES)
    for m in modules.order modules.builtin modules.builtin.modinfo; do
        [ -f "$MODDIR/$m" ] && put "$s" "$MODDIR/$m" "$MODDIR/$m"
    done
    depmod -b "$s" "$KVER" || die "depmod -b failed"
    # tools run by /init (by full path) and their libraries
    for m in /usr/bin/kmod /usr/sbin/ip /usr/bin/rdma; do
        put "$s" "$m" "$m"; put_libs "$s" "$m"
    done
    ln -s ../bin/kmod "$s/usr/sbin/modprobe"
    ln -s ../bin/kmod "$s/usr/sbin/lsmod"
    # libibverbs' rxe provider (dlopened, so ldd of a program never names it)
    m=/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so
    [ -f "$m" ] || die "$m missing (ibverbs-providers)"
    put "$s" "$m" "$m"; put_libs "$s" "$m"
    put "$s" /etc/libibverbs.d/rxe.driver /etc/libibverbs.d/rxe.driver
    # pthread_exit/cancel dlopen libgcc_s
    put "$s" /usr/lib/x86_64-linux-gnu/libgcc_s.so.1 /usr/lib/x86_64-linux-gnu/libgcc_s.so.1
    echo 'root:x:0:0:root:/root:/bin/sh' > "$s/etc/passwd"
    echo 'root:x:0:' > "$s/etc/group"
    printf '127.0.0.1 localhost\n10.0.0.1 vm0\n10.0.0.2 vm1\n' > "$s/etc/hosts"
    echo 'hosts: files' > "$s/etc/nsswitch.conf"
    mkdir -p "$CACHE_DIR"
    (cd "$s" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) |
        gzip -1 > "$BASE.tmp.$$"
    mv -f "$BASE.tmp.$$" "$BASE"
    rm -rf "$s"
}

if [ "$USE_CACHE" = 1 ] && [ -s "$BASE" ]; then
    log "base initramfs: cached $BASE"
else
    log "base initramfs: building for kernel $KVER"
    build_base
fi

# ----------------------------------------------------------------------
# Run initramfs: /init, config, suite, test programs and their libraries.
# ----------------------------------------------------------------------
S=$WORKDIR/run
new_stage "$S"
cp "$HERE/init.sh" "$S/init"; chmod 755 "$S/init"
mkdir -p "$S/fh/bin"

if [ "$SMOKE" = 1 ]; then
    gcc -std=c11 -O2 -Wall -Wextra -Werror -o "$WORKDIR/td_probe" "$HERE/td_probe.c" -libverbs ||
        die "compiling td_probe.c failed (needs gcc and libibverbs-dev)"
    BINS+=("$WORKDIR/td_probe:/fh/bin/td_probe")
fi

split_spec() {   # SPEC -> SRC DST  (SRC[:DST])
    local spec=$1
    if [[ "$spec" == *:* ]]; then SPEC_SRC=${spec%%:*}; SPEC_DST=${spec#*:}
    else SPEC_SRC=$spec; SPEC_DST=$spec; fi
    SPEC_DST=$(guest_dst "$SPEC_DST")
}

hostlp=$(IFS=:; echo "${LIBPATHS[*]:-}")
for d in "${LIBPATHS[@]}"; do add_guest_libdir "$d"; done
for spec in "${BINS[@]}"; do
    split_spec "$spec"
    [ -f "$SPEC_SRC" ] || die "--bin $SPEC_SRC: no such file"
    src=$SPEC_SRC ldp=$hostlp
    if info=$(libtool_real "$SPEC_SRC"); then
        src=$(sed -n 1p <<<"$info")
        wlp=$(sed -n 2p <<<"$info")
        ldp=$wlp${ldp:+${wlp:+:}$ldp}
        IFS=: read -r -a wdirs <<<"$wlp"
        for d in "${wdirs[@]}"; do [ -n "$d" ] && add_guest_libdir "$d"; done
        log "libtool wrapper $SPEC_SRC -> $src (LD_LIBRARY_PATH $wlp)"
    fi
    put "$S" "$src" "$SPEC_DST"
    chmod +x "$S$SPEC_DST"
    put_libs "$S" "$src" "$ldp"
done
for spec in "${FILES[@]}"; do
    split_spec "$spec"
    if [ -d "$SPEC_SRC" ]; then
        mkdir -p "$S$SPEC_DST"
        cp -rL "$SPEC_SRC/." "$S$SPEC_DST/" || die "cannot copy dir $SPEC_SRC"
    elif [ -f "$SPEC_SRC" ]; then
        put "$S" "$SPEC_SRC" "$SPEC_DST"
    else
        die "--file $SPEC_SRC: no such file or directory"
    fi
done

# The suite the guest runs.
: > "$S/fh/vm/suite"
for f in "${SUITES[@]}"; do
    grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$f" >> "$S/fh/vm/suite" || true
done
for t in "${TESTS[@]}"; do
    name=${t%%$'\t'*} cmd=${t#*$'\t'}
    [[ "$name" =~ ^[A-Za-z0-9_.+-]+$ ]] || die "bad test name '$name' (letters, digits, _.+- only)"
    [[ "$cmd" != *$'\n'* ]] || die "test $name: the command must be one line"
    printf '%s %s\n' "$name" "$cmd" >> "$S/fh/vm/suite"
done
mapfile -t TEST_NAMES < <(awk '{ print $1 }' "$S/fh/vm/suite")
[ "${#TEST_NAMES[@]}" -gt 0 ] || die "the suite is empty"

# The guest's environment.
{
    echo "# written by run-vm.sh"
    echo "KVER=$(sq "$KVER")"
    echo "FH_VM_TEST_TIMEOUT=$TEST_TIMEOUT"
    echo "FH_VM_SHELL_ON_FAIL=$SHELL_ON_FAIL"
    if [ "${#GUEST_LIBDIRS[@]}" -gt 0 ]; then
        echo "export LD_LIBRARY_PATH=$(sq "$(IFS=:; echo "${GUEST_LIBDIRS[*]}")")"
    fi
    while IFS='=' read -r n _; do
        case "$n" in FH_VM_*) continue ;; FH_*) echo "export $n=$(sq "${!n}")" ;; esac
    done < <(env | grep -E '^FH_[A-Za-z0-9_]*=' || true)
    for e in "${ENVS[@]}"; do echo "export ${e%%=*}=$(sq "${e#*=}")"; done
} > "$S/fh/vm/config.sh"

RUN_CPIO=$WORKDIR/run.cpio.gz
(cd "$S" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -1 > "$RUN_CPIO"
INITRD=$WORKDIR/initrd.cpio.gz
cat "$BASE" "$RUN_CPIO" > "$INITRD"
T_BUILD_S=$(since "$T_BUILD")
log "initramfs: $(du -h "$INITRD" | cut -f1) built in ${T_BUILD_S}s; tests: ${TEST_NAMES[*]}"

# ----------------------------------------------------------------------
# Boot and read the serial console.
# ----------------------------------------------------------------------
CONSOLE=$WORKDIR/console.log
# shellcheck disable=SC2054  # the commas are qemu's
QEMU=(qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp 2 -m "$MEMORY"
      -nographic -nic none -no-reboot -kernel "$VMLINUZ" -initrd "$INITRD"
      -append 'console=ttyS0 panic=-1 loglevel=4')
log "booting kernel $KVER (timeout ${TIMEOUT}s): ${QEMU[*]}"
T_BOOT=$(now)
: > "$CONSOLE"
: > "$WORKDIR/init.time"
set +e
timeout -k 10 "$TIMEOUT" "${QEMU[@]}" < /dev/null 2>&1 |
    while IFS= read -r line || [ -n "$line" ]; do
        line=${line//$'\r'/}
        line=${line//$'\e'\[*([0-9;?])[A-Za-z]/}   # SeaBIOS's terminal codes
        line=${line//$'\e'c/}
        printf '%s\n' "$line" >> "$CONSOLE"
        [ "$QUIET" = 1 ] || printf 'vm| %s\n' "$line"
        case "$line" in
            *FH-VM-INIT*) [ -s "$WORKDIR/init.time" ] || since "$T_BOOT" > "$WORKDIR/init.time" ;;
        esac
    done
rc=${PIPESTATUS[0]}
set -e
T_VM_S=$(since "$T_BOOT")

# ----------------------------------------------------------------------
# Verdict
# ----------------------------------------------------------------------
fail_loudly() {
    echo
    echo "$PROG: FAILED: $*" >&2
    echo "---- last 50 console lines ($CONSOLE) ----" >&2
    tail -n 50 "$CONSOLE" >&2
    echo "---- end of console ----" >&2
    KEEP=1
}

echo
echo "==== VM results (kernel $KVER) ===="
pass=0 fail=0 missing=()
for n in "${TEST_NAMES[@]}"; do
    r=$(grep -a -o "FH-VM-RESULT: [A-Z]* $n [0-9]* [0-9.]*s" "$CONSOLE" | tail -1 || true)
    if [ -z "$r" ]; then
        missing+=("$n"); fail=$((fail + 1))
        echo "FH-VM-RESULT: MISSING $n"
    else
        echo "$r"
        case "$r" in "FH-VM-RESULT: PASS "*) pass=$((pass + 1)) ;; *) fail=$((fail + 1)) ;; esac
    fi
done
if grep -aq 'FH-VM-RESULT: FAIL vm-setup' "$CONSOLE"; then
    grep -a 'FH-VM-SETUP-ERROR' "$CONSOLE" || true
    fail=$((fail + 1))
fi
echo "---- timings ----"
echo "initramfs build:     ${T_BUILD_S}s"
if [ -s "$WORKDIR/init.time" ]; then
    echo "boot to init:        $(cat "$WORKDIR/init.time")s"
else
    echo "boot to init:        never reached /init"
fi
grep -a -o 'FH-VM-TIME: [a-z]* [0-9.]*s' "$CONSOLE" | sed 's/FH-VM-TIME: \([a-z]*\) /guest \1:               /' |
    awk '{ printf "%-21s%s\n", $1 " " $2, $3 }' || true
echo "VM run (qemu):       ${T_VM_S}s"
echo "total:               $(since "$T_START")s"

status=0
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    fail_loudly "the VM timed out after ${TIMEOUT}s (qemu killed)"
    status=3
elif ! grep -aq 'FH-VM-INIT' "$CONSOLE"; then
    fail_loudly "the VM never reached /init (qemu exit $rc)"
    status=3
elif ! grep -aq 'FH-VM-DONE' "$CONSOLE"; then
    fail_loudly "the VM stopped before FH-VM-DONE (crash or panic? qemu exit $rc)"
    status=3
elif [ "$rc" != 0 ]; then
    fail_loudly "qemu exited with status $rc"
    status=3
elif [ "$fail" -ne 0 ]; then
    fail_loudly "$fail test(s) failed${missing[0]:+ (no result: ${missing[*]})}"
    status=1
fi
echo "vm: $pass passed, $fail failed"
exit "$status"
