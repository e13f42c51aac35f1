# tests/stranger.sh -- sourced by the tests that attack a job as a stranger
# on the host (tests/boot/t_listen_flood.sh, tests/robust/ofi_flood.sh,
# tests/security/outsider.sh, tests/security/takeover.sh).
#
# After `. tests/stranger.sh`:
#   $as       a command prefix that runs its arguments as user nobody
#             (setpriv, else runuser) when we are root and that user exists;
#             empty otherwise: the stranger then runs as our own uid,
#             without the job's key (which no test ever gives it);
#   $as_desc  who that is, for the test's log; $nuid its uid when it is nobody;
#   stranger_python   prints a python3 that $as can run (the PATH one may
#             sit under ~root, which nobody cannot enter); fails if none.
# Plain POSIX sh: no function or variable here depends on the caller's.

as=
as_desc="uid $(id -u) (the job's own user, without the job key)"
if [ "$(id -u)" -eq 0 ] && nuid=$(id -u nobody 2>/dev/null); then
    ngid=$(id -g nobody)
    if command -v setpriv >/dev/null 2>&1 &&
       setpriv --reuid="$nuid" --regid="$ngid" --clear-groups true 2>/dev/null; then
        as="setpriv --reuid=$nuid --regid=$ngid --clear-groups"
    elif command -v runuser >/dev/null 2>&1 &&
         runuser -u nobody -- true 2>/dev/null; then
        as="runuser -u nobody --"
    fi
    [ -n "$as" ] &&
        as_desc="user nobody (uid $nuid gid $ngid), not the job's user (uid 0)"
fi

stranger_python() {
    for p in python3 /usr/bin/python3; do
        $as "$p" -c pass 2>/dev/null && { echo "$p"; return 0; }
    done
    return 1
}
