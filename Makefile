# coresight-panic-dump: the two commands are `make demo` and `make check` (see README.md).
# Everything big lives in $(CSPD_CACHE) (default /var/tmp/coresight-panic-dump).

SHELL := /bin/bash
CARGO ?= cargo
CSPD_CACHE ?= /var/tmp/coresight-panic-dump
# The OpenCSD test snapshots scripts/setup.sh fetches, for the host tests.
export CSPD_OPENCSD_TESTDATA ?= $(CSPD_CACHE)/opencsd/snapshots

.PHONY: demo check setup kernel kernel-builtin kunit guest-perf host-perf initramfs e2e host-test lint fuzz kernel-gates plugin bench bench-panic bench-perf bench-csdump help

help:
	@sed -n '/^## /s/^## //p' README.md | head -n 20

# Each step of demo and check says how long it took ("==> time: NAME N s").
T := bash scripts/timed.sh

## setup            install toolchain, QEMU, guest packages and kernel source (root, idempotent)
setup:
	$(T) setup bash scripts/setup.sh

## kernel           extract Linux 7.3, overlay this repo, build the module variant
kernel: setup
	bash scripts/kernel.sh all mod

## kernel-builtin   build the variant with everything built in (W=1, CLIPPY=1)
kernel-builtin: setup
	bash scripts/kernel.sh all builtin

## kunit            KUnit tests of the in-kernel logic (kunit.py, arm64 under QEMU)
kunit: setup
	bash scripts/kunit.sh

## guest-perf       a static arm64 perf from the kernel tree's tools/perf, for the guest's /bin/perf
guest-perf: setup
	bash scripts/guest-perf.sh

## host-perf        the host's perf from the kernel tree's tools/perf with CoreSight decoding (OpenCSD 1.5.5), for the perf-mode judges
host-perf: setup
	bash scripts/host-perf.sh

## initramfs        guest initramfs images for both variants
initramfs: kernel kernel-builtin guest-perf
	bash scripts/initramfs.sh mod
	bash scripts/initramfs.sh builtin

## host-test        cargo test of the host crates (format, hardware logic, models, csdump), and the judges' walk of an execution record
host-test:
	@rm -f target/skipped-tests.log
	CSPD_SKIP_LOG=$(CURDIR)/target/skipped-tests.log $(CARGO) test --workspace --locked
	python3 scripts/test_exec_ring.py
	@n=$$(cat target/skipped-tests.log 2>/dev/null | wc -l); \
	if [ "$$n" -gt 0 ]; then echo "host-test: $$n tests opted out (CSPD_TESTS_MAY_SKIP=1), their data or tool missing:"; \
		sort target/skipped-tests.log | uniq -c; else echo "host-test: no test opted out"; fi

## lint             rustfmt check of the kernel Rust files and clippy of the host crates
lint:
	bash scripts/lint.sh

## fuzz             a bounded (60 s) run of csdump's fuzz target: regions, vmcores, snapshots, vmlinux, report
fuzz:
	bash scripts/fuzz.sh $${FUZZ_SECONDS:-60}

## kernel-gates     checkpatch --strict and make dt_binding_check on this repo's kernel files
kernel-gates: setup
	bash scripts/kernel.sh source
	bash scripts/kernel.sh overlay
	bash scripts/kernel-gates.sh

## plugin           the QEMU TCG plugins: the CoreSight components (target/release/libqemu_coresight.so) and the execution recorder (libexec_record.so)
plugin:
	$(CARGO) build --release --locked -p qemu-coresight -p exec-record

## e2e              QEMU end-to-end scenarios (needs kernels and initramfs)
e2e: plugin
	bash scripts/e2e.sh

## bench            the plugin's cost (boot-to-panic time, QEMU's RSS), the panic path's (make bench-panic), a CPU-wide perf session's (make bench-perf) and csdump's (make bench-csdump)
bench: plugin
	bash scripts/bench-plugin.sh
	bash scripts/bench-panic.sh
	$(MAKE) bench-perf
	$(MAKE) bench-csdump

## bench-perf       perf mode: the ETF's register accesses per drain into the AUX buffer, and a 1 s CPU-wide perf record on the plugin against the same workload untraced
bench-perf: plugin
	$(CARGO) bench --locked -p cspd-hw --bench tmc
	bash scripts/bench-perf.sh

## bench-panic      the panic path on the emulated components: time and register accesses per phase (2 and 8 CPUs), trace bytes it adds
bench-panic: plugin
	bash scripts/bench-panic.sh

## bench-csdump     csdump report on a 16 MiB trace (peak RSS, stray files) and decode MB/s vs trc_pkt_lister
bench-csdump:
	$(CARGO) bench --locked -p csdump --bench decode

## demo             fresh machine to a traced panic recovered by kdump, ending with csdump's report
demo: setup plugin
	$(T) kernel-mod bash scripts/kernel.sh all mod
	$(T) guest-perf bash scripts/guest-perf.sh
	$(T) initramfs-mod bash scripts/initramfs.sh mod
	$(T) e2e-demo bash scripts/e2e.sh sample-qemu-dump sample-kdump dump-qemu-dump dump-kdump cpu-debug-module trace-kdump
	@echo; echo "== csdump's summary of the dump kdump recovered"
	@cat $${CSPD_CACHE:-/var/tmp/coresight-panic-dump}/e2e/dump-kdump/csdump.txt
	@echo; echo "== the CPU debug report the panicking kernel printed (the QEMU plugin's debug interfaces)"
	@grep -a "ARM external debug module\|coresight-cpu-debug" \
		$${CSPD_CACHE:-/var/tmp/coresight-panic-dump}/e2e/cpu-debug-module/console.log
	@echo; echo "== csdump report: what each CPU executed before the panic (trace-kdump's vmcore, traced by"
	@echo "   the production drivers on the QEMU plugin's ETMs and ETF; the panicking CPU first)"
	@target/release/csdump report $${CSPD_CACHE:-/var/tmp/coresight-panic-dump}/e2e/trace-kdump/vmcore.elf \
		--vmlinux $${CSPD_CACHE:-/var/tmp/coresight-panic-dump}/build-mod/vmlinux --last 24
	@echo; grep -h "^ground truth CPU\|^panicking CPU" \
		$${CSPD_CACHE:-/var/tmp/coresight-panic-dump}/e2e/trace-kdump/check.txt | cut -c1-150
	@echo "checked: every branch, waypoint and exception of each CPU that csdump decodes from this dump"
	@echo "equals QEMU's ground truth (what the vCPUs executed, recorded by the plugin when each ETM"
	@echo "stopped) and the independent execution record, and the panicking CPU's decoded flow runs"
	@echo "through sysrq_handle_crash into panic()"

## check            every test: host tests, lint, the three kernel builds, the coresight directory of allmodconfig (each driver choice), all QEMU scenarios
check: setup
	$(T) host-test $(MAKE) host-test
	$(T) lint $(MAKE) lint
	$(T) fuzz $(MAKE) fuzz
	$(T) kernel-mod bash scripts/kernel.sh all mod
	$(T) kernel-gates bash scripts/kernel-gates.sh
	$(T) rustdoc bash scripts/kernel.sh rustdoc mod
	$(T) kunit bash scripts/kunit.sh
	$(T) kernel-builtin bash scripts/kernel.sh all builtin
	$(T) kernel-upstream bash scripts/kernel.sh all upstream
	$(T) kernel-allmod bash scripts/kernel.sh allmod rust c
	$(T) guest-perf bash scripts/guest-perf.sh
	$(T) initramfs bash -c 'for v in mod builtin upstream; do bash scripts/initramfs.sh $$v || exit; done'
	$(T) plugin $(MAKE) plugin
	$(T) host-perf bash scripts/host-perf.sh
	$(T) e2e bash scripts/e2e.sh
	$(T) bench $(MAKE) bench
	$(T) bench-gdb $(MAKE) bench-gdb

## bench-gdb        csdump gdb: target remote to the first record instruction-history, largest e2e trace
.PHONY: bench-gdb
bench-gdb:
	$(CARGO) build --release --locked -q -p csdump
	python3 scripts/bench-gdb.py
