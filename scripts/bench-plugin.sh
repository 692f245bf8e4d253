#!/usr/bin/env bash
# What the QEMU CoreSight plugin (tools/qemu-coresight) costs: the time from QEMU's start to the end
# of panic() for the module kernel (cspd.test=panic: init panics it through sysrq), with the plugin
# and without it, the machine otherwise the same (guest RAM from a shared file, the coresight device
# tree, mem=1023M), and with the execution recorder (tools/exec-record) added to the plugin; best
# of RUNS each, interleaved. Also QEMU's peak RSS each way, and the plugin's own exit line
# (`qemu-coresight: exit ...`) when its log has one.
#
#   scripts/bench-plugin.sh [RUNS]     default 3
#
# Prints "plugin slowdown: X.XXx (with plugin A s, without B s)". The target is under 3x; the script
# reports the number and does not fail on it. Runs are kept in $CSPD_CACHE/bench/.
source "$(dirname "${BASH_SOURCE[0]}")/e2e.sh"

n=${1:-3}
[[ $n =~ ^[1-9][0-9]*$ ]] || die "usage: bench-plugin.sh [RUNS]"
require_mod_guest
plugin=${CSPD_PLUGIN:-$REPO/target/release/libqemu_coresight.so}
[ -f "$plugin" ] ||
	die "the QEMU CoreSight plugin $plugin is missing: build it with cargo build --release -p qemu-coresight"

out=$CSPD_CACHE/bench
mkdir -p "$out"
make_dtb "$out/virt-coresight.dtb" none coresight || die "could not make the coresight device tree"

# One boot to the end of panic(); prints "SECONDS RSS_KIB".
run() {
	local kind=$1 i=$2 d=$out/$1-$2 res
	local -a opt=(--shared-ram)
	local append="$BASE_APPEND cspd.test=panic"
	if [ "$kind" = with ] || [ "$kind" = recorder ]; then
		opt=(--coresight --plugin "$plugin")
		# The execution recorder (tools/exec-record) only where its cost is measured.
		[ "$kind" = recorder ] || opt+=(--exec-record '')
	else
		append+=" mem=1023M"
	fi
	rm -rf "$d"
	mkdir -p "$d"
	res=$(python3 "$REPO/scripts/qemu.py" boot --kernel "$(kernel_of mod)" --initrd "$(initrd_of mod)" \
		--append "$append" --workdir "$d" --qemu-arg "-dtb $out/virt-coresight.dtb" "${opt[@]}" \
		--wait-for "---[ end Kernel panic" --panic-timeout 300) || die "the $kind-plugin run $i failed (logs in $d)"
	[[ $res =~ after\ ([0-9.]+)\ s\ \(QEMU\ peak\ RSS\ ([0-9]+)\ KiB\) ]] ||
		die "no time in the output of the $kind-plugin run $i: $res"
	echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]}"
}

declare -A best=() rss=()
for ((i = 1; i <= n; i++)); do
	for kind in with recorder without; do
		read -r t r < <(run "$kind" "$i")
		say "bench: $kind plugin, run $i: $t s to the end of the panic, QEMU peak RSS $((r / 1024)) MiB"
		if [ -z "${best[$kind]:-}" ] || python3 -c "import sys; sys.exit(not $t < ${best[$kind]})"; then
			best[$kind]=$t
		fi
		[ "${rss[$kind]:-0}" -ge "$r" ] || rss[$kind]=$r
	done
done

{
	python3 - "${best[with]}" "${best[without]}" "${rss[with]}" "${rss[without]}" \
		"${best[recorder]}" "${rss[recorder]}" <<'PY'
import sys
w, wo, rw, rwo = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
wr, rr = float(sys.argv[5]), int(sys.argv[6])
print(f"plugin slowdown: {w / wo:.2f}x (with plugin {w:.2f} s, without {wo:.2f} s)")
print(f"QEMU peak RSS: with plugin {rw / 1024:.0f} MiB, without {rwo / 1024:.0f} MiB "
      f"({(rw - rwo) / 1024:+.0f} MiB)")
print(f"execution recorder on top of the plugin: {wr:.2f} s ({(wr / w - 1) * 100:+.0f} %), "
      f"QEMU peak RSS {rr / 1024:.0f} MiB ({(rr - rw) / 1024:+.0f} MiB; its record is a file mapping)")
PY
	grep -ah "qemu-coresight: exit" "$out/with-$n/plugin.log" "$out/with-$n/qemu.log" 2>/dev/null |
		head -n 3 || echo "(the plugin printed no exit line)"
} | tee "$out/bench.txt"
