#!/bin/sh
# report.sh -- Markdown tables of one run-caf-bench.sh run, for
# docs/performance.md's Co-Array Fortran section.
#
#   bench/caf/report.sh RESULTS_DIR > tables.md
#
# Reads RESULTS_DIR/results.csv (round,side,transport,bench,images,size,
# metric,value).  Ours and theirs ran interleaved in each round, so every
# ratio is computed per round (ours_r / theirs_r) and shown as
# "median [lowest-highest]" over the rounds; the times beside it are the
# medians over rounds of each side.  Nothing is typed by hand: every number
# comes from the CSV.
set -u
d=${1:?usage: report.sh RESULTS_DIR}
csv=$d/results.csv
[ -f "$csv" ] || { echo "report.sh: $csv not found" >&2; exit 1; }

awk -F, -v git="$(sed -n 's/^run-caf-bench: .* git \([^ ]*\).*/\1/p' "$d/run.log" 2>/dev/null | head -n 1)" '
function sortv(v, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
}
function med(v, n) { sortv(v, n); return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }
# m(side, key): median over rounds of one side
function m(side, key,   r, n, v) {
    n = 0
    for (r = 1; r <= maxr; r++) if ((r, side, key) in val) v[++n] = val[r, side, key] + 0
    return n ? med(v, n) : ""
}
# ratio(numside, denside, key): per-round ratio, "median [lo-hi]"
function ratio(a, b, key, ka, kb,   r, n, v, x) {
    if (ka == "") ka = key
    if (kb == "") kb = key
    n = 0
    for (r = 1; r <= maxr; r++)
        if ((r, a, ka) in val && (r, b, kb) in val && val[r, b, kb] + 0 != 0)
            v[++n] = val[r, a, ka] / val[r, b, kb]
    if (n == 0) return "n/a"
    x = med(v, n)
    return n == 1 ? rf(x) : rf(x) " [" rf(v[1]) "-" rf(v[n]) "]"
}
# rf(x): a ratio with two decimals, three below 0.1 (a ratio of 0.004 is
# not 0.00)
function rf(x) {
    return sprintf(x < 0.095 ? "%.3f" : "%.2f", x)
}
function f(x, fmt) { return x == "" ? "n/a" : sprintf(fmt, x) }
# putget_table(metric, fmt, min_size): one row per transport and size >=
# min_size, put and get side by side.
function putget_table(metric, fmt, min_size,   ti, t, i, p, op, key) {
    printf "| bytes | transport | put ours / theirs | put ratio | get ours / theirs | get ratio |\n|---|---|---|---|---|---|\n"
    for (ti = 1; ti <= ntr; ti++) if ((t = trl[ti]) in tr) for (i = 1; i <= ns; i++) {
        if (sz[i] < min_size) continue
        printf "| %s | %s", human(sz[i]), t
        for (p = 1; p <= 2; p++) {
            op = p == 1 ? "caf_put" : "caf_get"; key = k(t, op, 2, sz[i], metric)
            printf " | %s / %s | %s", f(m("ours", key), fmt), f(m("theirs", key), fmt), ratio("ours", "theirs", key)
        }
        printf " |\n"
    }
}
# one_row(what, transport, key, fmt): a row of the one-node table
function one_row(what, t, key, fmt) {
    printf "| %s | %s | %s / %s | %s |\n", what, t, f(m("ours", key), fmt), f(m("theirs", key), fmt), ratio("ours", "theirs", key)
}
function k(tr, b, np, sz, met) { return tr SUBSEP b SUBSEP np SUBSEP sz SUBSEP met }
function human(n) { return n >= 1048576 ? n / 1048576 " MiB" : n >= 1024 ? n / 1024 " KiB" : n " B" }
NR == 1 { next }
{
    val[$1, $2, k($3, $4, $5, $6, $7)] = $8
    if ($1 + 0 > maxr) maxr = $1 + 0
    tr[$3] = 1
    if ($4 == "caf_put") sizes[$6 + 0] = 1
    if ($4 == "caf_sput" || $4 == "caf_sget") ssz[$6 + 0] = 1
    if ($4 ~ /^caf_event$|^caf_atomic_|^caf_elem_/) evop[$4] = 1
    if ($4 == "caf_cosum") { cnp[$5 + 0] = 1; csz[$6 + 0] = 1 }
    if ($4 == "caf_syncall") snp[$5 + 0] = 1
    if ($4 == "caf_imagecost") inp[$5 + 0] = 1
    if ($4 == "caf_cannon" || $4 == "caf_bitonic") app[$4 SUBSEP $5 SUBSEP $6] = 1
}
END {
    ntr = split("tcp shm", trl, " ")
    ns = 0; for (s in sizes) sz[++ns] = s + 0; sortv(sz, ns)
    printf "run-caf-bench.sh: %d round(s)%s; ratio = ours / theirs per round, median [lowest-highest] over rounds;\n", maxr, git == "" ? "" : ", git `" git "`"
    printf "times are each side'"'"'s median over rounds.\n\n"
    printf "**Layer overhead** (coarray 8 B put / `fh_put` of 8 B, same rounds):"
    for (ti = 1; ti <= ntr; ti++) if ((t = trl[ti]) in tr) printf " %s %s us / %s us = **%s**;", t, f(m("ours", k(t, "caf_put", 2, 8, "median_us")), "%.3f"),
        f(m("fh", k(t, "fh_put", 2, 8, "median_us")), "%.3f"), ratio("ours", "fh", "", k(t, "caf_put", 2, 8, "median_us"), k(t, "fh_put", 2, 8, "median_us"))
    printf "\n\n**One node: 8 B put, 1 MiB put, SYNC ALL** (the node path'"'"'s coarray comparisons, issue 27; shm is ours on the node path, FH_SHM=auto, against Open MPI vader + osc rdma; tcp through the network on both sides):\n\n"
    printf "| what | transport | ours / theirs | ratio |\n|---|---|---|---|\n"
    for (ti = ntr; ti >= 1; ti--) if ((t = trl[ti]) in tr) {
        one_row("8 B put latency, us", t, k(t, "caf_put", 2, 8, "median_us"), "%.3f")
        one_row("1 MiB put latency, us", t, k(t, "caf_put", 2, 1048576, "median_us"), "%.1f")
        one_row("1 MiB put bandwidth, MB/s (> 1: ours faster)", t, k(t, "caf_put", 2, 1048576, "mb_s"), "%.0f")
        for (np = 1; np <= 4096; np++) if (np in snp)
            one_row("SYNC ALL, " np " images, us", t, k(t, "caf_syncall", np, 0, "median_us"), "%.3f")
    }
    printf "\n**Latency** (us, median, image 1 -> 2, blocking coindexed assignment):\n\n"
    putget_table("median_us", "%.3f", 0)
    printf "\n**Bandwidth** (MB/s, the statement in a loop; ratio > 1: ours faster):\n\n"
    putget_table("mb_s", "%.0f", 65536)
    printf "\n**Strided** (every 2nd real(8) of an array, one statement `x(1:2n-1:2)[2] = y(1:2n-1:2)` and its get; us, median; MB/s of payload; on tcp only up to 32 Ki elements, see run-caf-bench.sh):\n\n"
    printf "| elements | transport | put ours / theirs | put ratio | put MB/s ours / theirs | get ours / theirs | get ratio |\n|---|---|---|---|---|---|---|\n"
    for (ti = 1; ti <= ntr; ti++) if ((t = trl[ti]) in tr) for (e = 1; e <= 1073741824; e *= 2) {
        if (!(e in ssz)) continue
        kp = k(t, "caf_sput", 2, e, "median_us"); kg = k(t, "caf_sget", 2, e, "median_us")
        if (m("ours", kp) == "" && m("theirs", kp) == "") continue
        printf "| %s | %s | %s / %s | %s | %s / %s | %s / %s | %s |\n", (e >= 1048576 ? e / 1048576 " Mi" : e >= 1024 ? e / 1024 " Ki" : e), t,
            f(m("ours", kp), "%.1f"), f(m("theirs", kp), "%.1f"), ratio("ours", "theirs", kp),
            f(m("ours", k(t, "caf_sput", 2, e, "mb_s")), "%.1f"), f(m("theirs", k(t, "caf_sput", 2, e, "mb_s")), "%.1f"),
            f(m("ours", kg), "%.1f"), f(m("theirs", kg), "%.1f"), ratio("ours", "theirs", kg)
    }
    printf "\n**Events and atomics** (us, median of individually timed statements, image 1 <-> 2; event = EVENT POST to image 2 and EVENT WAIT for its answer, a round trip; the element rows: a loop of 64 one-element statements, per element; n/a: no correct answer to time, see the run'"'"'s skipped list):\n\n"
    printf "| what | transport | ours / theirs | ratio |\n|---|---|---|---|\n"
    nev = split("caf_event caf_atomic_add caf_atomic_fetch_add caf_elem_put caf_elem_get", evl, " ")
    evname["caf_event"] = "event ping-pong, round trip"; evname["caf_atomic_add"] = "atomic_add"
    evname["caf_atomic_fetch_add"] = "atomic_fetch_add"
    evname["caf_elem_put"] = "`x(j)[2] = y(j)`, one element per statement, per element"
    evname["caf_elem_get"] = "`y(j) = x(j)[2]`, one element per statement, per element"
    for (ti = 1; ti <= ntr; ti++) if ((t = trl[ti]) in tr) for (i = 1; i <= nev; i++) if (evl[i] in evop)
        one_row(evname[evl[i]], t, k(t, evl[i], 2, 0, "median_us"), "%.3f")
    printf "\n**co_sum** (us, median of the slowest image):\n\n"
    printf "| images | bytes | transport | ours / theirs | ratio |\n|---|---|---|---|---|\n"
    for (np = 1; np <= 4096; np++) {
        if (!(np in cnp)) continue
        for (s = 1; s <= 1073741824; s *= 2) {
            if (!(s in csz)) continue
            for (ti = 1; ti <= ntr; ti++) if ((t = trl[ti]) in tr) {
                key = k(t, "caf_cosum", np, s, "median_us")
                printf "| %d | %s | %s | %s / %s | %s |\n", np, human(s), t, f(m("ours", key), "%.1f"), f(m("theirs", key), "%.1f"), ratio("ours", "theirs", key)
            }
        }
    }
    printf "\n**SYNC ALL** (us, median of image 1'"'"'s individually timed statements; loop: back to back, per statement):\n\n"
    printf "| images | transport | ours / theirs | ratio | loop ours / theirs | loop ratio |\n|---|---|---|---|---|---|\n"
    for (np = 1; np <= 4096; np++) {
        if (!(np in snp)) continue
        for (ti = 1; ti <= ntr; ti++) if ((t = trl[ti]) in tr) {
            key = k(t, "caf_syncall", np, 0, "median_us"); kl = k(t, "caf_syncall", np, 0, "loop_us")
            printf "| %d | %s | %s / %s | %s | %s / %s | %s |\n", np, t, f(m("ours", key), "%.2f"), f(m("theirs", key), "%.2f"),
                ratio("ours", "theirs", key), f(m("ours", kl), "%.2f"), f(m("theirs", kl), "%.2f"), ratio("ours", "theirs", kl)
        }
    }
    printf "\n**SYNC IMAGES** with each image'"'"'s ring neighbours (left and right; the one other image on 2) -- a halo exchange'"'"'s synchronization (us, as SYNC ALL):\n\n"
    printf "| images | transport | ours / theirs | ratio | loop ours / theirs | loop ratio |\n|---|---|---|---|---|---|\n"
    for (np = 1; np <= 4096; np++) {
        if (!(np in snp)) continue
        for (ti = 1; ti <= ntr; ti++) if ((t = trl[ti]) in tr) {
            key = k(t, "caf_syncimages", np, 0, "median_us"); kl = k(t, "caf_syncimages", np, 0, "loop_us")
            if (m("ours", key) == "" && m("theirs", key) == "") continue
            printf "| %d | %s | %s / %s | %s | %s / %s | %s |\n", np, t, f(m("ours", key), "%.2f"), f(m("theirs", key), "%.2f"),
                ratio("ours", "theirs", key), f(m("ours", kl), "%.2f"), f(m("theirs", kl), "%.2f"), ratio("ours", "theirs", kl)
        }
    }
    printf "\n**What an image costs** (an empty program, `caf_imagecost`: resident memory per image after SYNC ALL, the mean over images; launch to exit: the job'"'"'s wall time around `cafrun` / `cafrun.openmpi`):\n\n"
    printf "| images | transport | RSS/image MiB ours / theirs | ratio | launch to exit s ours / theirs | ratio |\n|---|---|---|---|---|---|\n"
    for (np = 1; np <= 4096; np++) {
        if (!(np in inp)) continue
        for (ti = 1; ti <= ntr; ti++) if ((t = trl[ti]) in tr) {
            key = k(t, "caf_imagecost", np, 0, "rss_mib"); kl = k(t, "caf_imagecost", np, 0, "wall_s")
            printf "| %d | %s | %s / %s | %s | %s / %s | %s |\n", np, t, f(m("ours", key), "%.1f"), f(m("theirs", key), "%.1f"),
                ratio("ours", "theirs", key), f(m("ours", kl), "%.2f"), f(m("theirs", kl), "%.2f"), ratio("ours", "theirs", kl)
        }
    }
    printf "\n**Applications** (s, median; hit rate = reg_hits / (reg_hits + reg_misses) over all images, ours):\n\n"
    printf "| program | images | size | transport | ours / theirs (s) | ratio | hit rate | hits / misses |\n|---|---|---|---|---|---|---|---|\n"
    for (a in app) {
        split(a, x, SUBSEP)
        for (ti = 1; ti <= ntr; ti++) if ((t = trl[ti]) in tr) {
            key = k(t, x[1], x[2], x[3], "seconds"); h = m("ours", k(t, x[1], x[2], x[3], "hit_rate"))
            printf "| %s | %s | %s | %s | %s / %s | %s | %s | %s / %s |\n", x[1], x[2], x[3], t,
                f(m("ours", key), "%.5f"), f(m("theirs", key), "%.5f"), ratio("ours", "theirs", key),
                h == "" ? "n/a" : sprintf("%.1f %%", 100 * h),
                f(m("ours", k(t, x[1], x[2], x[3], "reg_hits")), "%d"), f(m("ours", k(t, x[1], x[2], x[3], "reg_misses")), "%d")
        }
    }
}' "$csv"
