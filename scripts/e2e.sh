#!/usr/bin/env bash
# End-to-end tests in QEMU: boot the built kernels, panic them, capture vmcores two ways, and check
# what the vmcores hold.
#
#   scripts/e2e.sh [SCENARIO...]     default: all scenarios
#
# Scenarios:
#   sample-qemu-dump     module variant, rust_panic_record.ko loaded, QMP dump-guest-memory
#   sample-kdump         module variant, rust_panic_record.ko loaded, kdump capture kernel
#   sample-builtin       builtin variant (sample built in), QMP dump-guest-memory
#   dump-qemu-dump       panic-dump core + Rust and C clients, QMP dump, csdump extract checked
#   dump-kdump           the same through kdump (the core sets crash_kexec_post_notifiers itself)
#   harness-no-module    the record check must FAIL when the sample is not loaded
#   harness-no-panic     the capture must FAIL (bounded) when the guest does not panic
#   harness-wrong-record the record check must FAIL on a record with another message
#
# Each scenario leaves console.log, qemu.log and the vmcore in $CSPD_CACHE/e2e/<scenario>/.
# Prints "N passed, M failed" at the end and exits non-zero if any failed.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS=$CSPD_CACHE/e2e
MESSAGE="sysrq triggered crash"
BASE_APPEND="console=ttyAMA0 panic=0 loglevel=7"

kernel_of() { echo "$CSPD_CACHE/build-$1/arch/arm64/boot/Image"; }
initrd_of() { echo "$CSPD_CACHE/guest-$1/main.cpio.gz"; }

qemu() {
	local mode=$1 variant=$2 dir=$3 append=$4
	shift 4
	rm -rf "$dir"
	mkdir -p "$dir"
	python3 "$REPO/scripts/qemu.py" "$mode" --kernel "$(kernel_of "$variant")" \
		--initrd "$(initrd_of "$variant")" --append "$BASE_APPEND $append" \
		--workdir "$dir" --vmcore "$dir/vmcore.elf" "$@"
}

check_record() {
	local dir=$1
	python3 "$REPO/scripts/check_record.py" --console "$dir/console.log" \
		--vmcore "$dir/vmcore.elf" --message "$MESSAGE"
}

scenario_sample-qemu-dump() {
	local d=$RUNS/sample-qemu-dump
	qemu qemu-dump mod "$d" "cspd.test=panic cspd.insmod=rust_panic_record.ko" &&
		check_record "$d"
}

scenario_sample-kdump() {
	local d=$RUNS/sample-kdump
	qemu kdump mod "$d" \
		"cspd.test=kdump cspd.insmod=rust_panic_record.ko crashkernel=256M crash_kexec_post_notifiers" &&
		check_record "$d"
}

scenario_sample-builtin() {
	local d=$RUNS/sample-builtin
	qemu qemu-dump builtin "$d" "cspd.test=panic" &&
		grep -q "built-in: true" "$d/console.log" &&
		check_record "$d"
}

# The panic-dump core with the Rust and C sample clients; csdump extracts, check_dump.py judges.
DUMP_APPEND="reserve_mem=1M:4096:coresight_dump cspd.insmod=rust_dump_client.ko,c_dump_client.ko"

check_dump() {
	local dir=$1
	"$CSDUMP" extract "$dir/vmcore.elf" -o "$dir/extract" >"$dir/csdump.txt" 2>&1 || {
		cat "$dir/csdump.txt"
		return 1
	}
	cat "$dir/csdump.txt"
	python3 "$REPO/scripts/check_dump.py" --dir "$dir/extract" --message "$MESSAGE"
}

scenario_dump-qemu-dump() {
	local d=$RUNS/dump-qemu-dump
	qemu qemu-dump mod "$d" "cspd.test=panic $DUMP_APPEND" && check_dump "$d"
}

scenario_dump-kdump() {
	local d=$RUNS/dump-kdump
	qemu kdump mod "$d" "cspd.test=kdump crashkernel=256M $DUMP_APPEND" && check_dump "$d"
}

# Harness self-tests: each runs a broken setup and passes only if the check above catches it.
expect_failure() {
	local what=$1
	shift
	local out
	if out=$("$@" 2>&1); then
		echo "$out"
		echo "harness did not detect: $what" >&2
		return 1
	fi
	echo "$out" | tail -n 2
	echo "detected as expected: $what"
}

scenario_harness-no-module() {
	local d=$RUNS/harness-no-module
	qemu qemu-dump mod "$d" "cspd.test=panic" || return 1
	expect_failure "sample module not loaded" check_record "$d"
}

scenario_harness-no-panic() {
	local d=$RUNS/harness-no-panic
	expect_failure "guest that never panics" \
		qemu qemu-dump mod "$d" "cspd.test=idle cspd.insmod=rust_panic_record.ko" --panic-timeout 45
}

scenario_harness-wrong-record() {
	local d=$RUNS/sample-qemu-dump
	[ -f "$d/vmcore.elf" ] || scenario_sample-qemu-dump || return 1
	expect_failure "record with another message" \
		python3 "$REPO/scripts/check_record.py" --console "$d/console.log" \
		--vmcore "$d/vmcore.elf" --message "a different panic"
}

# sample-builtin needs the builtin variant (make check-builtin); the default list does not.
ALL=(sample-qemu-dump sample-kdump dump-qemu-dump dump-kdump harness-no-module harness-no-panic
	harness-wrong-record)

main() {
	ensure_cache_dir
	command -v qemu-system-aarch64 >/dev/null ||
		die "qemu-system-aarch64 is missing: run scripts/setup.sh (package qemu-system-arm)"
	CSDUMP=${CSDUMP:-$REPO/target/release/csdump}
	(cd "$REPO" && cargo build --release --locked -q -p csdump) || die "could not build csdump"
	local -a list=("$@")
	[ ${#list[@]} -gt 0 ] || list=("${ALL[@]}")
	local s passed=0 failed=0 start
	local -a failures=()
	for s in "${list[@]}"; do
		declare -F "scenario_$s" >/dev/null || die "unknown scenario '$s' (known: ${ALL[*]})"
	done
	for s in "${list[@]}"; do
		say "e2e: $s"
		start=$SECONDS
		if "scenario_$s"; then
			say "e2e: $s passed ($((SECONDS - start)) s)"
			passed=$((passed + 1))
		else
			say "e2e: $s FAILED ($((SECONDS - start)) s; logs in $RUNS/$s)"
			failed=$((failed + 1))
			failures+=("$s")
		fi
	done
	echo "e2e: $passed passed, $failed failed"
	[ $failed = 0 ] || die "failed scenarios: ${failures[*]}"
}

main "$@"
