#!/usr/bin/env bash
# What the panic path costs on the emulated CoreSight components (`make bench-panic`, part of
# `make bench`): the module kernel traces on the QEMU plugin's ETF, funnel, ETMs and CPU debug
# interfaces (the trace scenarios' set-up), panics through sysrq, and QEMU dumps it. For 2 and 8
# CPUs it prints, per phase of the panic path, the wall time the dump's phase times record and the
# register accesses the plugin counted from the crash entry (the ETM stop point at panic()) to
# the end; and the trace bytes the panic path added to the ETF: from the crash entry until the
# last source stopped, by CPU, and after that (the target: none). A third run, 2 CPUs with the
# hardware stop off (stop_at emptied), says how much of the ETF the panicking CPU's own trace
# after panic()'s entry would take without it (the plugin marks panic()'s entry at the address
# the first run's stop point had).
#
#   scripts/bench-panic.sh
#
# Runs are kept in $CSPD_CACHE/bench/panic-*; the result is also in $CSPD_CACHE/bench/panic.txt.
source "$(dirname "${BASH_SOURCE[0]}")/e2e.sh"

require_mod_guest
plugin=${CSPD_PLUGIN:-$REPO/target/release/libqemu_coresight.so}
[ -f "$plugin" ] ||
	die "the QEMU CoreSight plugin $plugin is missing: build it with cargo build --release -p qemu-coresight"
CSDUMP=${CSDUMP:-$REPO/target/release/csdump}
(cd "$REPO" && cargo build --release --locked -q -p csdump) || die "could not build csdump"

out=$CSPD_CACHE/bench
mkdir -p "$out"

# run NAME CPUS [APPEND [PLUGIN ARGS...]]: one traced sysrq panic, QMP-dumped.
run() {
	local name=$1 cpus=$2 extra=${3:-} d=$out/panic-$1
	shift 3 || shift $#
	local -a cs=()
	local a
	for a in "$@"; do cs+=(--cs-arg "$a"); done
	SMP=$cpus make_dtb "$out/virt-coresight-$cpus.dtb" none coresight ||
		die "could not make the coresight device tree"
	rm -rf "$d"
	mkdir -p "$d"
	python3 "$REPO/scripts/qemu.py" qemu-dump --kernel "$(kernel_of mod)" --initrd "$(initrd_of mod)" \
		--append "$BASE_APPEND cspd.test=panic $TRACE_MOD_APPEND $extra" --workdir "$d" \
		--vmcore "$d/vmcore.elf" --smp "$cpus" --coresight --plugin "$plugin" --exec-record '' \
		--cs-arg "tmc_size=$CS_TMC_SIZE" --cs-arg "tmc_dump=$d/tmc.bin" "${cs[@]}" \
		--qemu-arg "-dtb $out/virt-coresight-$cpus.dtb" --panic-timeout 600 >"$d/run.txt" 2>&1 ||
		die "the $name run failed (logs in $d)"
	"$CSDUMP" info "$d/vmcore.elf" --json >"$d/info.json" 2>"$d/info.err" ||
		die "csdump info failed on the $name run: $(tail -n 3 "$d/info.err")"
}

say "bench-panic: 2 CPUs, hardware stop on"
run stop-2 2
stop=$(grep -aoE "stop point 0x[0-9a-f]+ reached" "$out/panic-stop-2/plugin.log" | head -n 1 | awk '{print $3}')
[ -n "$stop" ] || die "the 2-CPU run reached no stop point (plugin.log in $out/panic-stop-2)"
say "bench-panic: 8 CPUs, hardware stop on"
run stop-8 8
say "bench-panic: 2 CPUs, hardware stop off (stop_at empty), panic()'s entry $stop marked"
run nostop-2 2 "cspd.stop_at=off" "mark=$stop"

python3 - "$out" <<'PY' | tee "$out/panic.txt"
import json, os, re, sys

out = sys.argv[1]
C = re.compile(r"\[counters: accesses tmc=(\d+) funnel=(\d+) etm=(\d+) debug=(\d+); "
               r"trace bytes (\d+) by cpu ([\d,]+)\]")


def counters(text):
    m = C.search(text)
    return None if not m else {
        "tmc": int(m[1]), "funnel": int(m[2]), "etm": int(m[3]), "debug": int(m[4]),
        "bytes": int(m[5]), "by_cpu": [int(x) for x in m[6].split(",")]}


def milestones(run):
    ms = []
    for line in open(os.path.join(out, "panic-" + run, "plugin.log"), errors="replace"):
        if "qemu-coresight: " not in line:
            continue
        t = line.split("qemu-coresight: ", 1)[1].strip()
        c = counters(t)
        if c:
            ms.append((t, c))
    return ms


def first(ms, pat):
    return next(((t, c) for t, c in ms if re.match(pat, t)), None)


def last(ms, pat, before=None):
    hits = [(i, t, c) for i, (t, c) in enumerate(ms) if re.match(pat, t) and (before is None or i < before)]
    return hits[-1] if hits else None


def measure(run):
    info = json.load(open(os.path.join(out, "panic-" + run, "info.json")))
    ms = milestones(run)
    start = first(ms, r"etm \d+: stop point") or first(ms, r"cpu \d+: mark")
    tmc = last(ms, r"tmc stopped")
    exit_ = last(ms, r"exit:")
    if not (start and tmc and exit_):
        sys.exit(f"bench-panic: {run}: the plugin log lacks the crash entry, the TMC stop or its exit")
    src = last(ms, r"etm \d+: stopped", before=tmc[0])
    return info, start[1], src[2], tmc[2], exit_[2]


print("The panic path on the emulated CoreSight components (module kernel, traced sysrq panic, QMP dump;")
print("times from the dump's phase record, register accesses counted by the plugin from the crash entry)")
print()
print(f"{'CPUs':>4}  {'phase':<13} {'time':>10}  {'register accesses':>18}")
for run, cpus in (("stop-2", 2), ("stop-8", 8)):
    info, c0, _, _, c3 = measure(run)
    ph = {p["phase"]: p for p in info["phases"]["phases"]}
    acc = {"stop-sources": ("etm", "ETM"), "sample-cpus": ("debug", "CPU debug"),
           "drain-sinks": ("tmc", "TMC")}
    for name in ("stop-sources", "sample-cpus", "drain-sinks", "other", "commit"):
        p = ph[name]
        a = f"{c3[acc[name][0]] - c0[acc[name][0]]} ({acc[name][1]})" if name in acc else "0"
        t = f"{p['duration_us']:.0f} us" if p["duration_us"] is not None else "-"
        print(f"{cpus:>4}  {name:<13} {t:>10}  {a:>18}")
    print(f"{cpus:>4}  {'in all':<13} {info['phases']['total_us']:>7.0f} us  "
          f"{(c3['etm'] + c3['debug'] + c3['tmc'] + c3['funnel']) - (c0['etm'] + c0['debug'] + c0['tmc'] + c0['funnel']):>18}")
print()
print("Trace bytes the panic path added to the ETF, from the crash entry to the last source stopped")
print("(by CPU, the panicking one marked *), and after that until the TMC stopped (target: 0):")
for run, label in (("stop-2", "2 CPUs, hardware stop"), ("stop-8", "8 CPUs, hardware stop"),
                   ("nostop-2", "2 CPUs, no hardware stop")):
    info, c0, c1, c2, _ = measure(run)
    pc = info["panic"]["cpu"]
    by = [b - a for a, b in zip(c0["by_cpu"], c1["by_cpu"])]
    cells = ", ".join(f"cpu{i}{'*' if i == pc else ''} {n}" for i, n in enumerate(by))
    print(f"  {label:<26} {sum(by):>7} bytes ({cells}); after the sources stopped: {c2['bytes'] - c1['bytes']}")
info, c0, c1, _, _ = measure("nostop-2")
pc = info["panic"]["cpu"]
own = c1["by_cpu"][pc] - c0["by_cpu"][pc]
print()
print(f"Without the hardware stop the panicking CPU's own trace after panic()'s entry took {own} bytes "
      f"({own / 1024:.1f} KiB) of the ETF; with it, none.")
PY
