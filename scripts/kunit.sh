#!/usr/bin/env bash
# KUnit tests of the in-kernel logic (DESIGN.md testing layer 3), run by the kernel's kunit.py:
# it configures $CSPD_CACHE/build-kunit from configs/kunit.config, builds an arm64 Image with the
# same toolchain as scripts/kernel.sh, boots it under QEMU and parses the KTAP results.
#
#   scripts/kunit.sh [FILTER_GLOB]     e.g. 'coresight_tmc_hw' or 'coresight_*.drain*'
#
# Exits non-zero if the configuration, the build or any test fails, or if an expected suite
# did not run. KUNIT_TIMEOUT (seconds, default 600) bounds the QEMU run.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Suites that must appear in the results: this project's, and the kernel crate's doctests
# (CONFIG_RUST_KERNEL_DOCTESTS, which include the examples of this project's rust/kernel files).
SUITES=(
	rust_doctests_kernel
	coresight_panic_dump_format
	coresight_panic_dump_core
	coresight_perf_aux
	coresight_tmc_hw
	coresight_tmc_etr
	coresight_etm4x_hw
	coresight_cpu_debug_hw
)

main() {
	local filter=${1:-}
	ensure_cache_dir
	command -v qemu-system-aarch64 >/dev/null || die "qemu-system-aarch64 not found: run scripts/setup.sh"
	bash "$REPO/scripts/kernel.sh" source
	bash "$REPO/scripts/kernel.sh" overlay

	local out="$CSPD_CACHE/build-kunit"
	local json="$out/cspd-results.json" log="$out/cspd-kunit.log"
	mkdir -p "$out"
	rm -f "$json"
	say "KUnit: build-kunit from configs/kunit.config, arm64 under QEMU (log: $log)"
	local start=$SECONDS rc=0
	# The make options are kmake's (scripts/lib.sh): the tools are plain Makefile assignments.
	# CLIPPY=1: the tests are built only here, so this is where clippy sees them.
	python3 "$KSRC/tools/testing/kunit/kunit.py" run \
		--arch=arm64 \
		--build_dir="$out" \
		--kunitconfig="$REPO/configs/kunit.config" \
		--jobs="$(nproc)" \
		--timeout="${KUNIT_TIMEOUT:-600}" \
		--json="$json" \
		--make_options="LLVM=$LLVM_SUFFIX" \
		--make_options=RUSTC=/usr/bin/rustc \
		--make_options=RUSTDOC=/usr/bin/rustdoc \
		--make_options=HOSTRUSTC=/usr/bin/rustc \
		--make_options=BINDGEN=/usr/local/bin/bindgen \
		--make_options=CLIPPY_DRIVER=/usr/bin/clippy-driver \
		--make_options=RUSTFMT=/usr/bin/rustfmt \
		--make_options=CLIPPY=1 \
		${filter:+"$filter"} 2>&1 | tee "$log" || rc=$?
	say "kunit.py finished in $((SECONDS - start)) s with status $rc"

	# Our code must build without warnings (kunit.py prints the build's stderr).
	local ours
	ours=$(cd "$REPO" && { find rust drivers samples include -type f \( -name '*.rs' -o -name '*.c' -o -name '*.h' \) 2>/dev/null || true; } | sed 's/[.[\*^$]/\\&/g' | paste -sd'|')
	if [ "$rc" = 0 ] && [ -n "$ours" ] && grep -qE -- "($ours)" <(grep -A12 -E '^(warning|error)' "$log"); then
		die "the KUnit build warns about this project's code (see $log)"
	fi
	[ "$rc" = 0 ] || die "KUnit failed (status $rc): see above, $log and $out/test.log"
	# Lockdep (CONFIG_PROVE_LOCKING) saw every lock the tests took: any report is a failure.
	if grep -E "WARNING: (possible|inconsistent)|BUG: (sleeping|spinlock|lock held)" "$out/test.log"; then
		die "lockdep reported a problem during the KUnit tests (see $out/test.log)"
	fi
	grep -q "Lock dependency validator" "$out/test.log" ||
		die "the KUnit kernel ran without lockdep (CONFIG_PROVE_LOCKING): $out/test.log"
	[ -n "$filter" ] && return 0

	# A suite that silently dropped out of the build (a lost config symbol) is a failure too.
	python3 - "$json" "${SUITES[@]}" <<'EOF' || die "not every expected suite ran (see $json)"
import json, sys
with open(sys.argv[1]) as f:
    results = json.load(f)
ran = {}
for suite in results.get("sub_groups", []):
    cases = suite.get("test_cases", [])
    ran[suite.get("name")] = (len(cases), sum(1 for c in cases if c.get("status") == "PASS"))
missing = [s for s in sys.argv[2:] if ran.get(s, (0, 0))[0] == 0]
for s in sys.argv[2:]:
    n, ok = ran.get(s, (0, 0))
    print(f"    {s}: {ok}/{n} passed")
if missing:
    print("missing suites: " + ", ".join(missing), file=sys.stderr)
    sys.exit(1)
EOF
	say "KUnit: all suites passed"
}

main "$@"
