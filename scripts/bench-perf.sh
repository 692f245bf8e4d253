#!/usr/bin/env bash
# What a CPU-wide perf session costs on the QEMU CoreSight plugin (issue 32's benchmark): one boot
# of the module kernel with the production drivers, where the guest (cspd.perf=bench in
# scripts/guest/init) runs a workload of about a second on every CPU untraced, then the same under
# `perf record -e cs_etm/@tmc_etf0,.../ -a`, both timed by the guest's clock. One run.
#
#   scripts/bench-perf.sh
#
# Prints "perf slowdown: X.XXx (traced A s, untraced B s)". The number is reported, not judged.
# The run is kept in $CSPD_CACHE/bench/perf/.
source "$(dirname "${BASH_SOURCE[0]}")/e2e.sh"

require_mod_guest

out=$CSPD_CACHE/bench
mkdir -p "$out"
d=$out/perf
make_dtb "$out/virt-coresight.dtb" none coresight || die "could not make the coresight device tree"
rm -rf "$d"
mkdir -p "$d"
python3 "$REPO/scripts/qemu.py" boot --kernel "$(kernel_of mod)" --initrd "$(initrd_of mod)" \
	--append "$BASE_APPEND cspd.test=panic reserve_mem=4M:4096:coresight_dump cspd.insmod=$TRACE_MODS cspd.perf=bench" \
	--workdir "$d" --qemu-arg "-dtb $out/virt-coresight.dtb" --coresight --cs-arg "tmc_size=$CS_TMC_SIZE" \
	--exec-record '' --wait-for "---[ end Kernel panic" --panic-timeout 600 >/dev/null ||
	die "the perf bench run failed (logs in $d)"
untraced=$(sed -n 's/^CSPD: perf: bench untraced \([0-9.]*\) s.*/\1/p' "$d/console.log" | head -n 1)
traced=$(sed -n 's/^CSPD: perf: record took \([0-9.]*\) s.*/\1/p' "$d/console.log" | head -n 1)
[ -n "$untraced" ] && [ -n "$traced" ] ||
	die "the guest printed no timing (see $d/console.log; perf record ok? $(grep -ac 'CSPD: perf: record ok' "$d/console.log"))"
python3 -c "import sys; t, u = float(sys.argv[1]), float(sys.argv[2]); print(f'perf slowdown: {t / u:.2f}x (traced {t:.2f} s, untraced {u:.2f} s; CPU-wide perf record on the plugin, one run)')" \
	"$traced" "$untraced" | tee "$out/bench-perf.txt"
