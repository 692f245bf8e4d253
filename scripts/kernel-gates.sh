#!/usr/bin/env bash
# The kernel's own gates on this repo's files (needs the kernel source: scripts/kernel.sh source):
#
#   checkpatch   scripts/checkpatch.pl --strict on every C, header and Rust file of the overlay:
#                no error, warning or check
#   dtbinding    make dt_binding_check on every device-tree binding the overlay adds (dtschema and
#                yamllint from PyPI, in a venv in the cache): no message about the binding
#   all          both (default), each after showing that it fails on a file made to fail it
#
# Each gate first runs on a file with a known fault and must reject it, so a gate that passes
# everything cannot pass unnoticed.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# dtschema and yamllint, pinned; installed by setup.sh, checked here.
VENV=$CSPD_CACHE/dtschema-venv
cache_lock

[ -f "$KSRC/scripts/checkpatch.pl" ] || die "no kernel source in $KSRC: run scripts/kernel.sh source first"

# The overlay's C, header and Rust files, as paths inside the kernel tree.
kernel_files() {
	(cd "$REPO" && git ls-files -- 'drivers/*' 'rust/*' 'samples/*' 'include/*' |
		grep -E '\.(c|h|rs)$')
}

# checkpatch on files (paths relative to $KSRC, or absolute); prints its findings, fails on any.
checkpatch() {
	local out
	out=$(cd "$KSRC" && perl scripts/checkpatch.pl --strict --terse --no-summary --show-types \
		--ignore FILE_PATH_CHANGES -f "$@" 2>&1) || true
	out=$(grep -E ': (ERROR|WARNING|CHECK):' <<<"$out" || true)
	[ -z "$out" ] || { printf '%s\n' "$out"; return 1; }
}

cmd_checkpatch() {
	local bad=$KSRC/drivers/hwtracing/coresight/rust/.cspd-gate-selftest.c
	printf '// SPDX-License-Identifier: GPL-2.0\nint  f(int *x)\n{\n\treturn x == NULL ? 0: *x;\n}\n' >"$bad"
	if checkpatch "$bad" >/dev/null; then
		rm -f "$bad"
		die "checkpatch passed a file made to fail it: the gate cannot be trusted"
	fi
	rm -f "$bad"
	local -a files
	mapfile -t files < <(kernel_files)
	[ ${#files[@]} -gt 0 ] || die "no kernel files to check"
	checkpatch "${files[@]}" || die "checkpatch --strict found problems (above)"
	say "checkpatch --strict: ${#files[@]} files clean (and a faulty file rejected)"
}

cmd_dtbinding() {
	[ -x "$VENV/bin/dt-doc-validate" ] && [ -x "$VENV/bin/yamllint" ] ||
		die "dtschema is not installed in $VENV: run scripts/setup.sh"
	local -a bindings
	mapfile -t bindings < <(cd "$REPO" && git ls-files 'Documentation/devicetree/bindings/*.yaml')
	[ ${#bindings[@]} -gt 0 ] || die "no device-tree bindings to check"
	# A copy of the first binding with a maintainer the meta-schema refuses: it must be reported.
	local dir=${bindings[0]%/*} bad
	bad=$dir/vendor,cspd-gate-selftest.yaml
	local name
	name=$(basename "${bindings[0]}" .yaml)
	sed -e "s/$name/vendor,cspd-gate-selftest/g" -e '/^maintainers:/{n;s/.*/  - nobody/}' \
		"$REPO/${bindings[0]}" >"$KSRC/$bad"
	# An old time: the processed schema of every binding (dt-mk-schema, a minute or more) is
	# rebuilt when a binding is newer than it, and the self-test's copy is written anew each run.
	# Its fault is the meta-schema's finding (CHKDT), which needs no processed schema.
	touch -d @946684800 "$KSRC/$bad"
	local schemas=() b
	for b in "${bindings[@]}" "$bad"; do schemas+=("${b#Documentation/devicetree/bindings/}"); done
	local log=$CSPD_CACHE/dt_binding_check.log rc=0
	PATH=$VENV/bin:$PATH KOUT=$CSPD_CACHE/build-dtcheck \
		kmake dt_binding_check DT_SCHEMA_FILES="$(IFS=:; echo "${schemas[*]}")" >"$log" 2>&1 || rc=$?
	rm -f "$KSRC/$bad"
	# Every line that is not make's own progress is a finding.
	local findings
	findings=$(grep -vE '^(make(\[[0-9]+\])?: |  [A-Z][A-Z ]*(\[[A-Z]\])? +)' "$log" || true)
	grep -q "cspd-gate-selftest.yaml" <<<"$findings" ||
		die "dt_binding_check did not report the binding made to fail it: the gate cannot be trusted (see $log)"
	findings=$(grep -v "cspd-gate-selftest" <<<"$findings" | grep -v '^\s*from schema \$id' || true)
	[ "$rc" -eq 0 ] || grep -q "cspd-gate-selftest" "$log" || die "make dt_binding_check failed (log: $log)"
	[ -z "$findings" ] || { printf '%s\n' "$findings"; die "make dt_binding_check found problems (log: $log)"; }
	say "dt_binding_check: ${#bindings[@]} binding(s) clean (and a faulty copy reported)"
}

case ${1:-all} in
checkpatch) cmd_checkpatch ;;
dtbinding) cmd_dtbinding ;;
all)
	cmd_checkpatch
	cmd_dtbinding
	;;
*) die "usage: $0 [checkpatch|dtbinding|all]" ;;
esac
