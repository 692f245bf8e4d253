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
#   dump-builtin         the same with the core and both clients built into the image
#   dump-kdump           the same through kdump (crash_kexec_post_notifiers on the command line: the
#                        core sets it only while a trace sink or source is registered);
#                        the capture kernel also saves makedumpfile's -F -c -d 31 (plain and
#                        gzip'ed) and -l -d 31 files, and csdump extracts the same from them
#   dump-warm-reboot     panic, warm reboot, the second boot reads the dump from debugfs and clears it
#   dump-warm-corrupt    the dump is corrupted during the warm reset: rejected with a logged reason
#   dump-cleaned         every record and commit the panic path writes is cleaned to the point of
#                        coherency after its last write (QEMU's gdbstub watches dcache_clean_poc)
#   dump-hung-callback   a callback that never returns: reset, the committed dump names it, and the
#                        commit made before the callback ran was cleaned to the point of coherency
#   dump-nested-panic    a callback that panics: the dump runs once and stays readable
#   dump-dt-region       the region from a device-tree memory-region (no-map, WC), warm reboot readback
#   dump-dt-kdump        the device-tree region with kdump: the capture kernel hands it over as a vmcore
#                        device dump; harness-dt-kdump-no-core: without the core there, csdump says so
#   dump-region-full     an 8 KiB region: the client that does not fit is refused at dump_add time
#   amba-probe           kernel::amba binds a sample driver to QEMU's PL031 and reads it over MMIO
#   cpu-debug-module     insmod coresight_cpu_debug.ko debug=1 on the plugin's CPU debug interfaces:
#                        knob, report per CPU, each PC the plugin's sample, csdump agrees
#   cpu-debug-builtin    the same built in, enabled by coresight_cpu_debug.enable=1
#   harness-bad-input    clear messages for a non-7.3 tree, an unwritable cache, QEMU missing
#   harness-no-module    the record check must FAIL when the sample is not loaded
#   harness-no-panic     the capture must FAIL (bounded) when the guest does not panic
#   harness-wrong-record the record check must FAIL on a record with another message
#   coresight-devmem     the QEMU CoreSight plugin (tools/qemu-coresight) with device-tree nodes as
#                        on silicon: the guest reads IDs and drives the TMC with devmem; every
#                        documented value is checked (scripts/check_coresight.py)
#   harness-coresight-wrong-id  that check must FAIL when one component ID differs
#   tmc-sysfs-listing    tmc_etf0's sysfs files and mgmt/ registers as probed: upstream-drivers' and
#                        trace-builtin's listings the same names and values (one value changed and one
#                        file left out each fail)
#   upstream-drivers     the upstream kernel variant (Linux's own C coresight-tmc and coresight-etm4x)
#                        binds to the plugin's components, traces through sysfs, reads the ETF through
#                        /dev/tmc_etf0; OpenCSD decodes it to the plugin's ground truth (check_upstream.py)
#   devfile-etf          the same on this project's drivers (the module variant), /dev/tmc_etf0 also
#                        read while tracing (a second reader refused); both reads decode to the truth
#                        and the execution record (check_upstream.py --devfile --exec); after the
#                        session perf through the sink while the file is open is refused (its AUX
#                        records empty and truncated, capture not started)
#   harness-devfile      check_upstream.py --devfile must FAIL on a copy with one input altered
#                        (also one of perf's AUX records holding trace)
#   devfile-etr, harness-devfile-etr  the same with the ETR as the sink (/dev/tmc_etr0, a 1 MiB
#                        flat DMA buffer), and its negatives
#   devfile-etb, harness-devfile-etb  the same with the TMC configured as an ETB (/dev/tmc_etb0)
#   upstream-etb         upstream-drivers' sequence on that ETB (Linux's C driver, /dev/tmc_etb0)
#   tmc-etb-sysfs-listing  tmc_etb0's sysfs as probed under upstream's driver (upstream-etb) and
#                        ours (devfile-etb): the same files and values; and its negatives
#   etm-sysfs-listing    etm0's sysfs as probed under upstream's driver (upstream-drivers) and ours
#                        (trace-builtin): the same files and values but for the explained
#                        differences (what this driver does not provide); and its negatives
#   harness-last-dump    trace-warm-reboot's readback check must FAIL on its console with one line
#                        altered (a kernel with debugfs, the dump read from debugfs, a clear that
#                        failed either way)
#   trace-kdump          the production drivers trace EL1 only on the plugin's CoreSight, sysrq panic,
#                        kdump: the dump against the emulated hardware and its ground truth
#                        (check_trace.py), on the raw /proc/vmcore copy and on makedumpfile's three
#                        files of that panic
#   trace-kdump-plain    trace-kdump with crash_kexec_post_notifiers off (kdump's default): nothing runs
#                        in the crashed kernel after panic(); the ETMs' configuration recorded at
#                        enable, the capture kernel's TMC driver drains the ETF into a device dump,
#                        csdump joins them (check_trace.py --plain-kdump), panic on CPU 1; the
#                        capture kernel's CPU debug driver names CPU 0 powered off (--capture-debug)
#   trace-kdump-plain-no-driver  the same without the TMC driver in the capture kernel: the dump
#                        holds the ETMs' metadata, csdump says the trace was not collected and why
#   trace-kdump-hardlockup  CPU 0 in LKDTM HARDLOCKUP, panic on CPU 1: the capture kernel samples
#                        CPU 0 in its loop, whose entry is a stop point: none of the sink after
#                        the crash is CPU 0's (--locked-cpu)
#   trace-kdump-hardlockup-unarmed  the same with no stop point on the loop: CPU 0's trace
#                        overwrites the sink, and the report says so
#   harness-kdump-plain  check_trace.py --plain-kdump's judges fail on altered copies of the runs
#   trace-etr-kdump-plain  trace-kdump-plain with the ETR and its no-map tracedata region
#   trace-etr-dma-kdump-plain  the same with the ETR's own DMA buffer, read from the vmcore's memory
#   trace-dt-kdump       trace-kdump with the device-tree region, handed over as a vmcore device dump
#   trace-builtin        the same built in, QMP dump (EL1 only too)
#   trace-gdb            gdb-multiarch replays trace-kdump's, trace-builtin's (also as an OpenCSD
#                        snapshot), trace-module-oops's and trace-kdump-plain's dumps through
#                        `csdump gdb`, checked against the ground truth
#   trace-warm-reboot    the same built in, read back by the next boot after a warm reboot; decoded
#                        against the text of a memory dump of that boot (csdump --text-from)
#   trace-oops           the same for an LKDTM oops with oops=panic (needs CONFIG_LKDTM)
#   trace-irq-oops       an oops in a timer callback (interrupt context) with oops=panic: judged as
#                        trace-oops, the fault taken in the built-in c_crash sample
#   trace-module-oops    an oops in a loadable module's code (c_module_crash): the flow through the
#                        module's functions, named from its .ko where the dump's module list puts it
#   trace-two-cpus       CPUs 0 and 1 panic at once: the dump runs once; the other CPU's flow also
#                        reaches panic(), where its trace stopped in hardware
#   trace-no-hw-stop     stop_at emptied through sysfs: no hardware stop, the trace runs past panic()
#   trace-debug-all-off  every CPU's debug power domain stays down: the CPU debug phase keeps its
#                        time budget and every CPU's record says why it was not sampled
#   trace-tmc-stuck, trace-tmc-never-ready, trace-tmc-flush-stuck, trace-debug-power-off,
#   trace-debug-ignore-corepurq, trace-debug-double-lock, trace-etm-os-lock, trace-etm-never-idle
#                        one plugin fault each (all eight): only the faulty component's record is
#                        lost or partial, and named; trace-tmc-never-empty's partial TMC record
#                        still holds the trace, which is judged whole
#   trace-unload         unbind a tracing ETM, rmmod the drivers: clean, and the next dump is without them
#   harness-trace-ground-truth  the ground-truth comparison must FAIL with one event dropped, added
#                        or changed
#   trace-smp8           8 vCPUs, nokaslr, the panic pinned to CPU 5: every CPU's window judged whole
#   harness-judges       the TMC record, ETM records (and the session they name), phase order, cache clean,
#                        C API dump and upstream judges must each FAIL with their own message on a copy
#                        of a run with one input altered (per CPU where the judge is per CPU)
#   trace-etr-kdump      the TMC as an ETR (plugin tmc=etr) with upstream's tracedata region: the buffer
#                        stays in place at panic, the capture kernel hands it over as a vmcore device
#                        dump; the wrapped buffer against the plugin's and the ground truth
#   trace-etr-warm-reboot  the same built in, the buffer read back by the next boot into last_dump
#                        and through /dev/crash_tmc_etr0 (the C driver's crash device name)
#   harness-crash-device  that check of /dev/crash_tmc_etr0 must FAIL on its console with one line
#                        altered (other bytes, a read after the clear, no registration)
#   trace-etr-dma        an ETR with a DMA buffer of buffer_size (2 MiB, set through sysfs) in a 1 MiB
#                        slot: the newest trace copied, nothing past the slot
#   trace-etr-never-ready  fault tmc-never-ready on the ETR: only its record is partial, in time
#   upstream-etr         upstream's C ETR crash-data path (tracedata/metadata, warm reboot,
#                        /dev/crash_tmc_etr0) on the same emulated ETR, decoded to the ground truth
#   tmc-etr-sysfs-listing  tmc_etr0's sysfs as probed under upstream's driver (upstream-etr) and
#                        ours (trace-etr-warm-reboot): the same files and values, one difference
#                        explained; and its negatives
#   perf-cpu-wide        perf mode: the guest's perf records cs_etm CPU-wide through tmc_etf0 on the
#                        production drivers; the host's perf decodes perf.data, each CPU's whole window
#                        judged against the execution record and the ground truth (check_perf.py)
#   perf-per-thread      perf mode per thread, user space only: /bin/cspd-loop's decoded flow is the
#                        program's (1000 iterations) and what the CPU did (check_perf.py --per-thread)
#   harness-perf         check_perf.py must FAIL with its own message on a copy of perf-cpu-wide's
#                        run with the AUX data cut, one decoded branch changed, one event of the
#                        truth changed, a trace ID or a byte of the ETF changed; and of
#                        perf-per-thread's with an iteration or one branch changed
#   perf-filter          perf record --filter per thread (cspd-loop on CPU 1, user space): the range
#                        'filter step_b @ /bin/cspd-loop', then in a second boot (run directory
#                        perf-filter-start-stop) 'start step_a @ ..., stop step_b @ ...'; the decode
#                        exactly what the filter lets through of what the execution record says the
#                        program ran, as IHI 0064 defines ViewInst (check_perf.py --filter-range,
#                        --filter-start-stop)
#   harness-perf-filter  check_perf.py --filter-range must FAIL with its own message on perf-filter's
#                        decode with one sample outside the range added, one entry into step_b
#                        dropped, one parity branch flipped; --filter-start-stop with the trace
#                        going on past one stop
#   perf-pause           perf's AUX pause per thread (cspd-loop on CPU 1, user space): the cs_etm event
#                        starts paused, a hardware breakpoint at step_b's entry resumes it and one at
#                        each of step_b's returns pauses it; the decode exactly what the execution
#                        record ran from each resume up to the pause, one AUX record per pause
#                        (check_perf.py --pause-window)
#   harness-perf-pause   check_perf.py --pause-window must FAIL with its own message on perf-pause's
#                        decode with one resume's segments dropped, one instruction outside the
#                        window added, one parity branch flipped; on its perf.data with one AUX
#                        record fewer than the pauses, on its plugin.log with one drain longer
#   perf-snapshot        perf's snapshot mode on the ETF: perf record --snapshot=e CPU-wide, two
#                        snapshots on SIGUSR2 and one at exit, each after its own marker on every CPU;
#                        each snapshot's whole window in the host perf's decode judged against the
#                        execution record, the newest also against the ground truth and the ETF
#                        (check_perf.py --snapshot)
#   perf-panic           a sysrq panic while perf record --snapshot -a owns the sink and the sources:
#                        the dump judged as trace-kdump's (check_trace.py --perf-session)
#   harness-perf-snapshot  check_perf.py --snapshot must FAIL with its own message on a copy of
#                        perf-snapshot's run with snapshots 1 and 2 swapped, the newest one cut, one
#                        branch of the oldest one changed, a restart of the trace in a snapshot, the
#                        trace end between two snapshots moved; check_trace.py --perf-session on a copy of
#                        perf-panic's with an ETM enabled through sysfs or enabled twice, and
#                        check_trace.py without it on perf-panic's run
#   perf-etr, perf-etr-snapshot, perf-etr-panic  perf-cpu-wide's, perf-snapshot's and perf-panic's
#                        runs and judges with the ETR as perf's sink (tmc_etr0: a flat DMA buffer per
#                        session); harness-perf-etr: a negative for each
#   upstream-perf, upstream-perf-snapshot  the same perf commands on upstream's C drivers (the
#                        upstream kernel), judged as perf-cpu-wide's and perf-snapshot's;
#                        harness-upstream-perf: a negative for each
#
# Each scenario leaves console.log, qemu.log, cmdline.txt and the vmcore in
# $CSPD_CACHE/e2e/<scenario>/ (with the plugin, also its truth.json* and plugin.log).
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
		grep -qF "$AMBA_LINE" <(grep -F "rust_amba_probe" "$d/console.log") &&
		check_record "$d"
}

# kernel::amba at probe: the sample binds to QEMU's PL031 and reads its ID registers over MMIO.
AMBA_LINE="periphid 0x00141031 read over MMIO (bus: 0x00141031), cid 0xb105f00d, matched 0x41031/0xfffff"

scenario_amba-probe() {
	local d=$RUNS/amba-probe
	rm -rf "$d"
	mkdir -p "$d"
	python3 "$REPO/scripts/qemu.py" boot --kernel "$(kernel_of mod)" --initrd "$(initrd_of mod)" \
		--append "$BASE_APPEND cspd.insmod=rust_amba_probe.ko" --workdir "$d" \
		--panic-timeout 120 || return 1
	grep -F "rust_amba_probe" "$d/console.log" | grep -F "$AMBA_LINE" ||
		{ echo "the AMBA sample did not bind and read the PL031 IDs" >&2; return 1; }
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

# What the panic path cleans to the point of coherency, watched through QEMU's gdbstub
# (scripts/gdb_observe.py; breakpoints from System.map, hence nokaslr): every line of the
# committed dump it wrote was cleaned after its last write (scripts/check_clean.py).
check_clean() {
	local d=$1
	shift
	python3 "$REPO/scripts/check_clean.py" --dir "$d" --csdump "$CSDUMP" "$@" | tee "$d/clean.txt"
	return "${PIPESTATUS[0]}"
}

scenario_dump-cleaned() {
	local d=$RUNS/dump-cleaned
	qemu qemu-dump mod "$d" "cspd.test=panic nokaslr $DUMP_APPEND" \
		--observe-cleans "$CSPD_CACHE/build-mod/System.map" && check_dump "$d" &&
		check_clean "$d" --expect-record rust-sample:ok --expect-record c-sample:ok
}

# makedumpfile's files of the same panic (scripts/qemu.py --makedumpfile): csdump's extract of
# each equals the raw copy's, the format is said, damage is named (scripts/check_vmcores.py).
check_vmcores() {
	python3 "$REPO/scripts/check_vmcores.py" --dir "$1" --csdump "$CSDUMP" --oracle "$VMCORE_ORACLE"
}

scenario_dump-kdump() {
	local d=$RUNS/dump-kdump
	qemu kdump mod "$d" "cspd.test=kdump crashkernel=256M crash_kexec_post_notifiers $DUMP_APPEND" --makedumpfile &&
		check_dump "$d" && check_vmcores "$d"
}

scenario_dump-builtin() {
	local d=$RUNS/dump-builtin
	qemu qemu-dump builtin "$d" "cspd.test=panic reserve_mem=1M:4096:coresight_dump" && check_dump "$d"
}

# A region too small for every client: the registration that does not fit fails with a clear
# error at dump_add time (never at panic time), and the others are dumped.
scenario_dump-region-full() {
	local d=$RUNS/dump-region-full
	qemu qemu-dump mod "$d" \
		"cspd.test=panic reserve_mem=8K:4096:coresight_dump cspd.insmod=rust_dump_client.ko,c_dump_client.ko" ||
		return 1
	grep -q "coresight_panic_dump: region full: c-sample cannot have 1040 bytes" "$d/console.log" ||
		{ echo "the core did not say the region was full" >&2; return 1; }
	grep -q "c_dump_client: coresight_dump_add failed: -28" "$d/console.log" ||
		{ echo "the C client did not get -ENOSPC" >&2; return 1; }
	"$CSDUMP" extract "$d/vmcore.elf" -o "$d/extract" >"$d/csdump.txt" 2>&1 || { cat "$d/csdump.txt"; return 1; }
	python3 - "$d/extract/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
names = sorted(r["name"] for r in s["records"])
assert s["commit"]["state"] == "ok", s["commit"]
assert names == ["identity", "modules", "panic", "phases", "rust-failing", "rust-sample"], names
print("region full: c-sample refused at registration; the others dumped and committed:", names)
PY
}

# CPU debug: the Rust coresight_cpu_debug bound to the QEMU plugin's CPU debug interfaces (one per
# CPU, make_dtb coresight) prints the C driver's report at panic with symbolised PCs; each PC is the
# sample the plugin says that EDPCSR read returned (plugin.log), and csdump shows the same registers.
check_cpu_debug() {
	local d=$1 variant=$2
	"$CSDUMP" extract "$d/vmcore.elf" -o "$d/extract" >"$d/csdump.txt" 2>&1 || { cat "$d/csdump.txt"; return 1; }
	local rc=0
	"$CSDUMP" report "$d/vmcore.elf" --vmlinux "$CSPD_CACHE/build-$variant/vmlinux" --json \
		>"$d/report.json" 2>"$d/report.err" || rc=$?
	[ $rc = 0 ] || [ $rc = 3 ] || { cat "$d/report.err"; return 1; }
	python3 - "$d/console.log" "$d/report.json" "$d/plugin.log" "$SMP" <<'PY'
import json, re, sys
text = open(sys.argv[1], errors="replace").read()
rep = json.load(open(sys.argv[2]))
plog = open(sys.argv[3], errors="replace").read()
ncpu = int(sys.argv[4])
assert "ARM external debug module:" in text, "no report header"
plugin = {int(c): int(v, 16) for c, v in
          re.findall(r"qemu-coresight: debug (\d+): EDPCSR read by cpu \d+, sample (0x[0-9a-f]+)", plog)}
samples = {c["cpu"]: c["sample"] for c in rep["cpus"] if c.get("sample")}
for cpu in range(ncpu):
    p = f"coresight-cpu-debug 7ff2{cpu:x}000.debug: "
    assert p + f"CPU[{cpu}]:" in text, f"no report for CPU {cpu}"
    assert p + " EDPRSR:  00000001 (Power:On DLK:Unlock)" in text, f"EDPRSR line of CPU {cpu}"
    assert p + " EDVIDSR: 90000000 (State:Non-secure Mode:EL1/0 Width:64bits VMID:0)" in text, \
        f"EDVIDSR of CPU {cpu}"
    assert cpu in plugin, f"the plugin never served an EDPCSR read of CPU {cpu}"
    s = samples.get(cpu)
    assert s and s["outcome"] == "sampled", f"csdump has no sample for CPU {cpu}: {s}"
    pc = int(s["pc"]["addr"], 16)
    assert pc == plugin[cpu], f"CPU {cpu}: the record's PC {pc:#x}, the plugin's sample {plugin[cpu]:#x}"
    m = re.search(re.escape(p) + r" EDPCSR:  (\S+)", text)
    fn = (s["pc"].get("symbol") or "").split("+")[0]
    assert m and fn and m.group(1).split("+")[0] == fn, \
        f"EDPCSR of CPU {cpu}: the kernel printed {m and m.group(1)}, csdump symbolises {pc:#x} as {fn}"
    for reg in ("EDPRSR", "EDCIDSR", "EDVIDSR"):
        kline = re.search(re.escape(p) + r" (" + reg + r":.*)", text).group(1).strip()
        assert any(l.strip() == kline for l in s["text"].splitlines()), \
            f"CPU {cpu} {reg}: kernel {kline!r}, csdump {s['text']!r}"
    print(f"CPU {cpu}: EDPCSR {pc:#x} ({fn}) is the plugin's sample; csdump shows the kernel's registers")
PY
}

# The CoreSight device tree and plugin options of the scenarios on emulated CoreSight. The ETMs
# stop tracing in hardware at the crash path's entry (the core's stop_at), so the ETF holds the
# trace up to the crash whatever panic() prints after it; CS_TMC_SIZE is its size (see
# README.md for what was measured). The dump region is 4 MiB.
# CS_REGION=region adds the device-tree dump region (make_dtb) to the CoreSight device tree.
# CS_TMC=etr makes the TMC an ETR (the plugin's tmc=etr, the node named etr@...), and
# CS_TRACEDATA=1 gives it upstream's crash-data regions ("tracedata", "metadata"; see
# coresight_nodes).
CS_TMC_SIZE=256K
cs_qemu() {
	local mode=$1 variant=$2 dir=$3 append=$4 region=${CS_REGION:-none} dtb=$3.dtb
	shift 4
	mkdir -p "${dir%/*}"
	# The plugin's truth keeps every event whose bytes the sink may still hold (truth_bytes: the
	# ETF's RAM, or the largest ETR buffer a scenario uses), so that check_trace.py compares the
	# whole decoded window.
	local -a tmc=(--cs-arg "truth_bytes=$CS_TMC_SIZE")
	if [ "${CS_TMC:-etf}" = etr ]; then
		tmc=(--cs-arg tmc=etr --cs-arg truth_bytes=2M)
	fi
	make_dtb "$dtb" "$region" coresight || { echo "could not make the coresight device tree" >&2; return 1; }
	# CS_EXEC_ENTRIES: a longer ring for the execution record, where a run judges windows far
	# back from its end (perf's snapshots).
	qemu "$mode" "$variant" "$dir" "$append" --coresight --cs-arg "tmc_size=$CS_TMC_SIZE" "${tmc[@]}" \
		--cs-arg "tmc_dump=$dir/tmc.bin" --qemu-arg "-dtb $dtb" ${CS_EXEC_ENTRIES:+--exec-entries "$CS_EXEC_ENTRIES"} "$@"
}

scenario_cpu-debug-module() {
	local d=$RUNS/cpu-debug-module
	cs_qemu qemu-dump mod "$d" "cspd.test=panic reserve_mem=1M:4096:coresight_dump cspd.knob=1 cspd.insmod=coresight_cpu_debug.ko cspd.modparm_coresight_cpu_debug=debug=1" ||
		return 1
	grep -q "CSPD: knob read 1" "$d/console.log" &&
		grep -q "CSPD: knob after 0: 0" "$d/console.log" &&
		grep -q "CSPD: knob rejected 2: 0" "$d/console.log" &&
		grep -q "CSPD: knob after 1: 1" "$d/console.log" ||
		{ echo "the debugfs enable knob did not toggle as expected" >&2; return 1; }
	check_cpu_debug "$d" mod
}

scenario_cpu-debug-builtin() {
	local d=$RUNS/cpu-debug-builtin
	cs_qemu qemu-dump builtin "$d" "cspd.test=panic reserve_mem=1M:4096:coresight_dump coresight_cpu_debug.enable=1" &&
		check_cpu_debug "$d" builtin
}

# Warm reboot: the first boot panics and reboots itself (panic=1) with its RAM; the second boot
# finds the dump, saves it to the disk (the host's region file), then clears it: here through
# debugfs (last_dump, clear), elsewhere through /dev/coresight_panic_dump.
WARM_APPEND="panic=1 reserve_mem=1M:4096:coresight_dump cspd.test=warm cspd.insmod=rust_dump_client.ko,c_dump_client.ko"
LAST_DEV=/dev/coresight_panic_dump
LAST_DEBUGFS=/sys/kernel/debug/coresight_panic_dump/last_dump

# check_readback CONSOLE SIZE FROM [no-debugfs]: the second boot read the previous dump (SIZE
# bytes) from FROM, a bad clear request left it whole, clearing (through the same file system)
# emptied it; with no-debugfs, the kernel had no debugfs.
check_readback() {
	local log=$1 size=$2 from=$3 debugfs=${4:-}
	grep -q "coresight_panic_dump: previous dump: .*records.*read it from $LAST_DEV" "$log" ||
		{ echo "the second boot did not report the previous dump and its device file" >&2; return 1; }
	if [ "$debugfs" = no-debugfs ]; then
		grep -q "CSPD: debugfs: not in this kernel" "$log" ||
			{ echo "the kernel had debugfs: the readback without it is not shown" >&2; return 1; }
	fi
	grep -qF "CSPD: last dump read from $from" "$log" ||
		{ echo "the previous dump was not read from $from ($(grep -a "CSPD: last dump read from" "$log" || echo "no read"))" >&2; return 1; }
	grep -q "CSPD: clear rejected a bad value; last dump still $size bytes" "$log" ||
		{ echo "writing 2 to clear was not rejected, or changed the dump" >&2; return 1; }
	grep -q "CSPD: last dump after clear: 0 bytes" "$log" ||
		{ echo "clearing did not empty $from" >&2; return 1; }
	echo "warm reboot: $size byte dump read back from $from${debugfs:+ (a kernel without debugfs)}, bad clear value rejected, clear emptied it"
}

# check_crash_device LOG DUMP SINK: /dev/crash_SINK as the second boot read it (its size and md5)
# is SINK's trace in the previous dump DUMP as csdump extracts it (oldest first, the barrier packet
# first when the buffer wrapped), and opening it once the dump was cleared is refused (ENOENT).
check_crash_device() {
	local log=$1 dump=$2 sink=$3 x want got
	grep -q "coresight_panic_dump: previous dump: the crash trace of $sink is /dev/crash_$sink" "$log" ||
		{ echo "the second boot did not register /dev/crash_$sink" >&2; return 1; }
	x=$(mktemp -d)
	"$CSDUMP" extract "$dump" -o "$x" >"$x.txt" 2>&1 || { cat "$x.txt" >&2; rm -rf "$x" "$x.txt"; return 1; }
	local f=("$x"/*-sink-"$sink".trace.bin)
	if [ -f "${f[0]}" ]; then
		want="$(stat -c %s "${f[0]}") bytes, md5 $(md5sum <"${f[0]}" | cut -d' ' -f1)"
	fi
	rm -rf "$x" "$x.txt"
	[ -n "${want:-}" ] || { echo "csdump extracts no trace of $sink from $dump" >&2; return 1; }
	# The line is on the console twice (printed, and from the kernel log): the same text.
	got=$(grep -a "CSPD: crash device crash_$sink: " "$log" | sed "s/.*crash_$sink: //" | tr -d '\r' | sort -u)
	[ "$got" = "$want" ] ||
		{ echo "/dev/crash_$sink read ${got:-nothing}; the dump's trace of $sink is $want" >&2; return 1; }
	grep -q "CSPD: crash device crash_$sink after clear: refused: .*No such file or directory" "$log" ||
		{ echo "/dev/crash_$sink was not refused (ENOENT) once the dump was cleared" >&2; return 1; }
	echo "/dev/crash_$sink: $want, the trace of $sink csdump extracts from the dump; refused (ENOENT) once the dump was cleared"
}

scenario_dump-warm-reboot() {
	local d=$RUNS/dump-warm-reboot
	qemu warm mod "$d" "$WARM_APPEND cspd.last_from=debugfs" || return 1
	[ -f "$d/vmcore.elf" ] || { echo "the second boot found no dump" >&2; return 1; }
	check_dump "$d" || return 1
	grep -q "coresight_panic_dump: previous dump: 7 records" "$d/console.log" ||
		{ echo "the second boot did not report the previous dump" >&2; return 1; }
	check_readback "$d/console.log" "$(stat -c %s "$d/vmcore.elf")" "$LAST_DEBUGFS"
}

# A callback that never returns: the first boot hangs in its panic path; the harness resets the
# machine as a watchdog would; the dump committed before the callback ran names it as unfinished
# (partial, -ETIMEDOUT), keeps what ran before it, and shows what never ran (c-sample, later).
scenario_dump-hung-callback() {
	local d=$RUNS/dump-hung-callback
	qemu warm mod "$d" "$WARM_APPEND nokaslr cspd.modparm_rust_dump_client=hang=1" \
		--reset-on "rust-hang: spinning forever" --observe-cleans "$CSPD_CACHE/build-mod/System.map" ||
		return 1
	# The commit made before the hung callback ran is what the reset finds: cleaned.
	check_clean "$d" --expect-record rust-hang:partial || return 1
	[ -f "$d/vmcore.elf" ] || { echo "the second boot found no dump" >&2; return 1; }
	"$CSDUMP" extract "$d/vmcore.elf" -o "$d/extract" >"$d/csdump.txt" 2>&1 || { cat "$d/csdump.txt"; return 1; }
	python3 - "$d/extract/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["commit"]["state"] == "ok", s["commit"]
r = {x["name"]: (x["status"], x["error"]) for x in s["records"]}
assert r["rust-sample"] == ("ok", 0), r
assert r["rust-failing"] == ("partial", -5), r
assert r["rust-hang"] == ("partial", -110), r
assert r["c-sample"] == ("not-run", 0), r
assert s["panic"]["message"] == "sysrq triggered crash", s["panic"]
print("hung callback: committed dump names it partial/-ETIMEDOUT; earlier records kept; later not run")
PY
}

# A callback that panics: the nested panic must not run the dump again nor corrupt it; the dump
# committed before that callback ran names it, and the panic message stays the first one.
scenario_dump-nested-panic() {
	local d=$RUNS/dump-nested-panic
	qemu qemu-dump mod "$d" "cspd.test=panic $DUMP_APPEND cspd.modparm_rust_dump_client=panic_in_dump=1" ||
		return 1
	grep -q "rust-panics: a panic inside a dump callback" "$d/console.log" ||
		{ echo "the callback did not panic" >&2; return 1; }
	"$CSDUMP" extract "$d/vmcore.elf" -o "$d/extract" >"$d/csdump.txt" 2>&1 || { cat "$d/csdump.txt"; return 1; }
	python3 - "$d/extract/summary.json" "$d/console.log" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
console = open(sys.argv[2], errors="replace").read()
assert s["commit"]["state"] == "ok", s["commit"]
r = {x["name"]: (x["status"], x["error"]) for x in s["records"]}
assert r["rust-sample"] == ("ok", 0), r
assert r["rust-panics"] == ("partial", -110), r
assert r["c-sample"] == ("not-run", 0), r
assert s["panic"]["message"] == "sysrq triggered crash", s["panic"]
assert console.count("coresight_panic_dump: dump committed") == 0, "the dump ran to its end twice?"
print("nested panic: dump ran once, committed, names the callback; first panic message kept")
PY
}

# The same, with QEMU's generic loader writing 4 bytes into the rust-sample record's data at every
# reset: the warm reset after the panic corrupts the committed dump, and the second boot must
# reject it with a logged reason and expose nothing.
scenario_dump-warm-corrupt() {
	local ref=$RUNS/dump-warm-reboot d=$RUNS/dump-warm-corrupt
	[ -f "$ref/extract/summary.json" ] || scenario_dump-warm-reboot || return 1
	local addr
	addr=$(python3 - "$ref/extract/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
base = int(s["identity"]["region_paddr"], 16)
rec = next(r for r in s["records"] if r["name"] == "rust-sample")
print(hex(base + rec["offset"] + 80 + 16))  # 80: record header size
PY
) || return 1
	qemu warm mod "$d" "$WARM_APPEND" \
		--qemu-arg "-device loader,addr=$addr,data=0xdeadbeef,data-len=4" || return 1
	[ ! -f "$d/vmcore.elf" ] || { echo "the corrupted dump was exposed" >&2; return 1; }
	grep -E "coresight_panic_dump: previous dump rejected: .*(crc|CRC)" "$d/console.log" ||
		{ echo "the second boot did not log why it rejected the dump" >&2; return 1; }
}

# A device-tree region instead of reserve_mem=: QEMU's own DTB with a no-map reserved-memory node
# and a node compatible with "linux,coresight-panic-dump" that names it "dump" (mapped WC).
DT_REGION=0x7f000000
SMP=2
# The QEMU virt device tree, plus (region) the dump region as a reserved-memory node and
# (coresight) the components the QEMU plugin tools/qemu-coresight serves in its register window,
# described as on silicon (see coresight_nodes), and a fixed kaslr-seed in /chosen (KASLR_SEED):
# with CONFIG_RANDOMIZE_BASE the kernel runs at an offset that is the same in every run, and the
# trace carries its runtime addresses, which csdump must relocate.
KASLR_SEED="0x1d5c0a37 0x6e42b9f1"
make_dtb() {
	local out=$1 region=${2:-region} cs=${3:-}
	command -v dtc >/dev/null || die "dtc is missing: run scripts/setup.sh (package device-tree-compiler)"
	qemu-system-aarch64 -M "virt,dumpdtb=$out.base" -cpu cortex-a57 -smp "$SMP" -m 1G -display none \
		-nic none -device vmcoreinfo >/dev/null 2>&1 || return 1
	{
		dtc -q -I dtb -O dts "$out.base"
		if [ "$region" = region ]; then
			cat <<DTS
/ {
	reserved-memory {
		#address-cells = <2>;
		#size-cells = <2>;
		ranges;
		cspd_dump: coresight-dump@${DT_REGION#0x} {
			reg = <0x0 $DT_REGION 0x0 0x100000>;
			no-map;
		};
	};
	coresight-panic-dump {
		compatible = "linux,coresight-panic-dump";
		memory-region = <&cspd_dump>;
		memory-region-names = "dump";
	};
};
DTS
		fi
		if [ "$cs" = coresight ]; then
			coresight_nodes
			echo "/ { chosen { kaslr-seed = <$KASLR_SEED>; }; };"
		fi
	} | dtc -q -I dts -O dtb -o "$out" - || return 1
	rm -f "$out.base"
}

# The QEMU plugin's CoreSight components, in the register window at the top of the 1 GiB of RAM
# (the kernel gets mem=1023M): the TMC (an ETF; with CS_TMC=etr an ETR, and with CS_TRACEDATA=1
# upstream's crash-data binding: memory-region-names "tracedata" and "metadata", two no-map
# reserved regions at ETR_TRACEDATA and after it) at CS_WINDOW, the dynamic funnel at +0x1000, the
# ETM of CPU n at +0x10000 + n*0x1000 and its CPU debug interface at +0x20000 + n*0x1000. The nodes
# follow the upstream bindings (Documentation/devicetree/bindings/arm/arm,coresight-*.yaml): AMBA
# primecells clocked by QEMU's own apb-pclk fixed clock, a board's topology (ETM per CPU -> funnel
# in-port n -> ETF), so the same nodes would describe silicon.
CS_WINDOW=0x7ff00000
ETR_TRACEDATA=0x7e000000
ETR_TRACEDATA_SIZE=0x100000
cs_addr() { printf '%x' $((CS_WINDOW + $1)); }
coresight_nodes() {
	local c a clk='clocks = <&{/apb-pclk}>;
		clock-names = "apb_pclk";' tmc=${CS_TMC:-etf} regions=
	echo "/ {"
	a=$(cs_addr 0)
	if [ "$tmc" = etr ] && [ -n "${CS_TRACEDATA:-}" ]; then
		local meta
		meta=$(printf '%x' $((ETR_TRACEDATA + ETR_TRACEDATA_SIZE)))
		regions='memory-region = <&cs_etr_trace>, <&cs_etr_meta>;
		memory-region-names = "tracedata", "metadata";'
		cat <<DTS
	reserved-memory {
		#address-cells = <2>;
		#size-cells = <2>;
		ranges;
		cs_etr_trace: etr-trace@${ETR_TRACEDATA#0x} {
			reg = <0x0 $ETR_TRACEDATA 0x0 $ETR_TRACEDATA_SIZE>;
			no-map;
		};
		cs_etr_meta: etr-meta@$meta {
			reg = <0x0 0x$meta 0x0 0x1000>;
			no-map;
		};
	};
DTS
	fi
	cat <<DTS
	$tmc@$a {
		compatible = "arm,coresight-tmc", "arm,primecell";
		reg = <0x0 0x$a 0x0 0x1000>;
		$clk
		$regions
		in-ports { port { cs_etf_in: endpoint { remote-endpoint = <&cs_funnel_out>; }; }; };
	};
DTS
	a=$(cs_addr 0x1000)
	cat <<DTS
	funnel@$a {
		compatible = "arm,coresight-dynamic-funnel", "arm,primecell";
		reg = <0x0 0x$a 0x0 0x1000>;
		$clk
		out-ports { port { cs_funnel_out: endpoint { remote-endpoint = <&cs_etf_in>; }; }; };
		in-ports {
			#address-cells = <1>;
			#size-cells = <0>;
DTS
	for ((c = 0; c < SMP; c++)); do
		echo "			port@$c { reg = <$c>; cs_funnel_in$c: endpoint { remote-endpoint = <&cs_etm${c}_out>; }; };"
	done
	echo "		};"
	echo "	};"
	# CS_ETM_LOSES_CONTEXT=1: the units say they lose their context with their CPU's power.
	local loses=
	[ -z "${CS_ETM_LOSES_CONTEXT:-}" ] || loses='arm,coresight-loses-context-with-cpu;'
	for ((c = 0; c < SMP; c++)); do
		a=$(cs_addr $((0x10000 + c * 0x1000)))
		cat <<DTS
	etm@$a {
		compatible = "arm,coresight-etm4x", "arm,primecell";
		reg = <0x0 0x$a 0x0 0x1000>;
		cpu = <&{/cpus/cpu@$c}>;
		$clk
		$loses
		out-ports { port { cs_etm${c}_out: endpoint { remote-endpoint = <&cs_funnel_in$c>; }; }; };
	};
DTS
	done
	for ((c = 0; c < SMP; c++)); do
		a=$(cs_addr $((0x20000 + c * 0x1000)))
		cat <<DTS
	debug@$a {
		compatible = "arm,coresight-cpu-debug", "arm,primecell";
		reg = <0x0 0x$a 0x0 0x1000>;
		cpu = <&{/cpus/cpu@$c}>;
		$clk
	};
DTS
	done
	echo "};"
}

scenario_dump-dt-region() {
	local d=$RUNS/dump-dt-region
	mkdir -p "$RUNS"
	make_dtb "$d.dtb" || { echo "could not make the device tree" >&2; return 1; }
	qemu warm mod "$d" "panic=1 cspd.test=warm cspd.insmod=rust_dump_client.ko,c_dump_client.ko" \
		--qemu-arg "-dtb $d.dtb" || return 1
	grep -q "coresight_panic_dump: dump region at $DT_REGION, 1024 KiB (device tree)" "$d/console.log" ||
		{ echo "the core did not take the device-tree region" >&2; return 1; }
	[ -f "$d/vmcore.elf" ] || { echo "the second boot found no dump" >&2; return 1; }
	check_dump "$d" && check_readback "$d/console.log" "$(stat -c %s "$d/vmcore.elf")" "$LAST_DEV"
}

# kdump with the device-tree region (no-map): the crash ELF headers leave the region out of
# /proc/vmcore, so the capture kernel's core hands the dump over as a vmcore device dump
# (NT_VMCOREDD note "coresight_panic_dump"), which csdump takes. The capture kernel is the same
# Image (the core built in) and gets the same device tree from kexec_file_load.
DT_KDUMP_APPEND="cspd.test=kdump crashkernel=256M crash_kexec_post_notifiers cspd.insmod=rust_dump_client.ko,c_dump_client.ko"
HANDED_OVER="coresight_panic_dump: kdump capture kernel: dump at $DT_REGION (.*) added to /proc/vmcore as device dump coresight_panic_dump"

# Checks that the capture kernel handed the dump over and that csdump read it from the device dump.
check_device_dump() {
	local d=$1
	grep -qE "$HANDED_OVER" "$d/console.log" ||
		{ echo "the capture kernel did not hand the dump over as a device dump" >&2; return 1; }
	grep -q "device dump" "$d/csdump.txt" ||
		{ echo "csdump did not say it read the device dump" >&2; return 1; }
	echo "the capture kernel handed the dump over as a vmcore device dump; csdump read it there"
}

scenario_dump-dt-kdump() {
	local d=$RUNS/dump-dt-kdump
	mkdir -p "$RUNS"
	make_dtb "$d.dtb" || { echo "could not make the device tree" >&2; return 1; }
	qemu kdump mod "$d" "$DT_KDUMP_APPEND" --qemu-arg "-dtb $d.dtb" || return 1
	grep -q "coresight_panic_dump: dump region at $DT_REGION, 1024 KiB (device tree)" "$d/console.log" ||
		{ echo "the core did not take the device-tree region" >&2; return 1; }
	check_dump "$d" && check_device_dump "$d"
}

# The capture kernel without the core (its initcall blacklisted): the dump cannot be recovered,
# and csdump must say why (what the capture kernel needs), not just that a range is missing.
scenario_harness-dt-kdump-no-core() {
	local d=$RUNS/harness-dt-kdump-no-core
	mkdir -p "$RUNS"
	make_dtb "$d.dtb" || { echo "could not make the device tree" >&2; return 1; }
	qemu kdump mod "$d" "$DT_KDUMP_APPEND cspd.capture_append=initcall_blacklist=__coresight_panic_dump_init" \
		--qemu-arg "-dtb $d.dtb" || return 1
	# The capture kernel's log starts at its own command line; in a capture kernel the core always
	# says what it did with the region, so no line of it means it did not run.
	local capture
	capture=$(sed -n '/Kernel command line: .* reset_devices .*initcall_blacklist=__coresight_panic_dump_init/,$p' "$d/console.log")
	[ -n "$capture" ] || { echo "the capture kernel did not boot with the core's initcall blacklisted" >&2; return 1; }
	if grep -q "coresight_panic_dump: " <<<"$capture"; then
		echo "the capture kernel still ran the core" >&2
		return 1
	fi
	local rc=0
	"$CSDUMP" extract "$d/vmcore.elf" -o "$d/extract" >"$d/csdump.txt" 2>&1 || rc=$?
	cat "$d/csdump.txt"
	[ $rc = 1 ] || { echo "csdump exited $rc on a vmcore without the dump, expected 1" >&2; return 1; }
	grep -q "CONFIG_PROC_VMCORE_DEVICE_DUMP" "$d/csdump.txt" ||
		{ echo "csdump did not say what the capture kernel needs" >&2; return 1; }
	echo "without the core in the capture kernel: no device dump, and csdump says what is needed"
}

# Trace on the QEMU plugin's CoreSight (make_dtb coresight): the production drivers bind to the
# emulated ETF, funnel, ETMs and CPU debug interfaces; the guest enables the sink and every source
# through sysfs, then panics. check_trace.py judges the dump against what the emulated hardware did
# (plugin.log, tmc.bin, truth.json): see its docstring.
TRACE_MODS=coresight_tmc.ko,coresight_etm4x.ko,coresight_cpu_debug.ko
TRACE_APPEND="reserve_mem=4M:4096:coresight_dump cspd.trace=1"
TRACE_MOD_APPEND="$TRACE_APPEND cspd.insmod=$TRACE_MODS cspd.modparm_coresight_cpu_debug=debug=1"

# The hardware stop of a sysrq panic: the trace ends at panic()'s entry, right after
# sysrq_handle_crash (nothing of panic() itself is decoded).
SYSRQ_STOP=(--through sysrq_handle_crash --hw-stop panic,die,die_kernel_fault)

check_trace_with() {
	local dir=$1 variant=$2
	shift 2
	# Its findings also go to the run's check.txt (make demo prints them). Module code is named
	# from the .ko files of the build tree, by csdump and by the judge.
	local -a mods=()
	[ "$variant" = builtin ] || mods=(--modules-dir "$CSPD_CACHE/build-$variant")
	python3 "$REPO/scripts/check_trace.py" --dir "$dir" --csdump "$CSDUMP" \
		--vmlinux "$CSPD_CACHE/build-$variant/vmlinux" --cpus "$SMP" "${mods[@]}" "$@" 2>&1 | tee "$dir/check.txt"
	[ "${PIPESTATUS[0]}" = 0 ] || return 1
	# The run's own dump (not makedumpfile's copies of it) is also judged against the
	# independent execution record, and its module list against the guest's /proc/modules.
	case " $* " in *" --vmcore "*) return 0 ;; esac
	check_modules "$dir" "$variant" && check_exec "$dir" "$variant"
}

# check_modules DIR VARIANT [ARGS]: the dump's module list (check_trace.py's extract) against the
# modules the guest listed before its trigger and their .ko files in the build tree
# (scripts/check_modules.py; the mod variant keeps build IDs, CONFIG_STACKTRACE_BUILD_ID).
check_modules() {
	local dir=$1 variant=$2
	shift 2
	local -a ids=()
	[ "$variant" != mod ] || ids=(--build-ids)
	python3 "$REPO/scripts/check_modules.py" --dir "$dir" --modules-dir "$CSPD_CACHE/build-$variant" \
		"${ids[@]}" "$@" 2>&1 | tee "$dir/check-modules.txt"
	[ "${PIPESTATUS[0]}" = 0 ]
}

# check_exec DIR VARIANT: csdump's whole decode of the run's dump against the execution record
# the recorder plugin wrote (exec.rec; scripts/check_exec.py), with the judge's self-test when
# EXEC_SELF_TEST is set; EXEC_NO_DECODE="why" for a sink record that holds no trace;
# EXEC_TEXT_FROM=VMCORE for a region file's dump (the kernel text from the next boot's vmcore);
# EXEC_UNTRACED_EL0=1 where the ETMs were set to exclude EL0, EXEC_TRACED_RANGE=LO:HI where they
# traced only that range, EXEC_UNTRACED_RANGE=LO:HI where they excluded it; EXEC_CAPTURE_SAMPLES=N
# where a kdump capture kernel sampled N CPUs not online there; EXEC_DROPPED_AFTER_STOP=1 where a
# CPU went on tracing after the sink stopped.
check_exec() {
	local dir=$1 variant=$2
	[ -f "$dir/exec.rec" ] || { echo "$dir has no execution record (exec.rec)" >&2; return 1; }
	local -a extra=()
	[ -z "${EXEC_SELF_TEST:-}" ] || extra+=(--self-test)
	[ -z "${EXEC_NO_DECODE:-}" ] || extra+=(--expect-no-decode "$EXEC_NO_DECODE")
	[ -z "${EXEC_TEXT_FROM:-}" ] || extra+=(--text-from "$EXEC_TEXT_FROM")
	[ -z "${EXEC_UNTRACED_EL0:-}" ] || extra+=(--untraced-el0)
	[ -z "${EXEC_TRACED_RANGE:-}" ] || extra+=(--traced-range "$EXEC_TRACED_RANGE")
	[ -z "${EXEC_UNTRACED_RANGE:-}" ] || extra+=(--untraced-range "$EXEC_UNTRACED_RANGE")
	[ -z "${EXEC_CAPTURE_SAMPLES:-}" ] || extra+=(--capture-samples "$EXEC_CAPTURE_SAMPLES")
	[ -z "${EXEC_DROPPED_AFTER_STOP:-}" ] || extra+=(--dropped-after-stop)
	python3 "$REPO/scripts/check_exec.py" --dir "$dir" --vmcore "$dir/vmcore.elf" --csdump "$CSDUMP" \
		--vmlinux "$CSPD_CACHE/build-$variant/vmlinux" "${extra[@]}" 2>&1 | tee "$dir/check-exec.txt"
	[ "${PIPESTATUS[0]}" = 0 ] || return 1
	# The record (a few hundred MiB per run) is kept only where the judge failed, or with
	# CSPD_KEEP_EXEC=1.
	[ -n "${CSPD_KEEP_EXEC:-}" ] || rm -f "$dir/exec.rec"
}

# check_trace DIR VARIANT [ARGS]: the checks of a sysrq panic with the hardware stop on.
check_trace() {
	local dir=$1 variant=$2
	shift 2
	check_trace_with "$dir" "$variant" "${SYSRQ_STOP[@]}" "$@"
}

# What a trace sink says when it starts capturing while a loaded capture kernel would run before
# the dump (crash_kexec_post_notifiers off).
KDUMP_FIRST_WARNING="coresight: a kdump capture kernel is loaded and crash_kexec_post_notifiers is off"

scenario_trace-kdump() {
	local d=$RUNS/trace-kdump
	cs_qemu kdump mod "$d" "cspd.test=kdump crashkernel=256M $TRACE_MOD_APPEND cspd.post_notifiers=1 cspd.etm_el1_only=1" \
		--makedumpfile && el1_only_set "$d" || return 1
	# Nothing on the command line: the capture kernel was loaded with crash_kexec_post_notifiers
	# off, so the sink said when it started that kdump would run first, and the guest then set
	# it through sysfs as the warning says; the core itself never changed it.
	grep -q "CSPD: crash_kexec_post_notifiers: N" "$d/console.log" &&
		grep -q "$KDUMP_FIRST_WARNING" "$d/console.log" &&
		[ "$(grep -c "$KDUMP_FIRST_WARNING" "$d/console.log")" = 1 ] &&
		grep -q "CSPD: crash_kexec_post_notifiers set through sysfs: Y" "$d/console.log" ||
		{ echo "the sink did not warn once that kdump would run before the dump" >&2; return 1; }
	EXEC_SELF_TEST=1 EXEC_UNTRACED_EL0=1 check_trace "$d" mod --perf --no-el0 && check_vmcores "$d" &&
		check_trace "$d" mod --vmcore "$d/vmcore.flat" --no-el0 &&
		check_trace "$d" mod --vmcore "$d/vmcore.flat.gz" --no-el0 &&
		check_trace "$d" mod --vmcore "$d/vmcore.kdump" --no-el0
}

# trace-kdump as kdump's maintainers recommend it: crash_kexec_post_notifiers off, so nothing runs
# in the crashed kernel after panic() starts the capture kernel. Each ETM's configuration was
# recorded in the region when it was enabled, the trace units stop in hardware, the ETF keeps
# capturing until the capture kernel's TMC driver (loaded first there) drains it and hands it over
# as a device dump; csdump joins the two. The trigger runs on CPU 1, so the capture kernel boots
# there. Judged against the plugin's truth and the execution record like trace-kdump. The capture
# kernel's CPU debug driver (debug=1) samples CPU 0, which is not online there: the crash stop
# powered it off (PSCI CPU_OFF), and the sample says so.
scenario_trace-kdump-plain() {
	local d=$RUNS/trace-kdump-plain
	cs_qemu kdump mod "$d" "cspd.test=kdump crashkernel=256M $TRACE_MOD_APPEND cspd.etm_el1_only=1 cspd.trigger_cpu=1 cspd.capture_insmod=coresight_tmc.ko,coresight_cpu_debug.ko:debug=1" \
		&& el1_only_set "$d" || return 1
	grep -q "$KDUMP_FIRST_WARNING" "$d/console.log" ||
		{ echo "the sink did not say that kdump runs before the dump" >&2; return 1; }
	grep -q "CSPD: capture kernel: coresight_tmc.ko loaded" "$d/console.log" &&
		grep -q "CSPD: capture kernel: coresight_cpu_debug.ko loaded" "$d/console.log" ||
		{ echo "the capture kernel did not load coresight_tmc.ko and coresight_cpu_debug.ko" >&2; return 1; }
	EXEC_UNTRACED_EL0=1 EXEC_CAPTURE_SAMPLES=1 EXEC_SELF_TEST=1 \
		check_trace "$d" mod --plain-kdump --panic-cpu 1 --capture-debug --perf --no-el0
}

# A hard lockup under plain kdump: CPU 0 spins with interrupts masked (LKDTM HARDLOCKUP), CPU 1
# panics. The crash stop cannot stop CPU 0 (crash_smp_send_stop gives up after a second), so it is
# still in its loop when the capture kernel, booted on CPU 1, loads the TMC and CPU debug drivers:
# the sample of CPU 0, taken as found, is in lkdtm_HARDLOCKUP, and the report says how much of the
# sink CPU 0's trace took after the crash. HARDLOCKUP_STOP names the loop's function among the
# stop points: CPU 0's trace stops there, before the crash, and takes none of it.
HARDLOCKUP_STOP=panic,die,lkdtm_HARDLOCKUP
scenario_trace-kdump-hardlockup() {
	local d=$RUNS/trace-kdump-hardlockup freeze
	# The crash stop waits a second for CPU 0 on CPU 1, more blocks than the execution record's
	# ring holds: the record freezes where that wait starts (nokaslr, so the address is known).
	freeze=$(awk '$3 == "crash_smp_send_stop" { print "0x" $1 }' "$CSPD_CACHE/build-mod/System.map")
	[ -n "$freeze" ] || { echo "no crash_smp_send_stop in System.map" >&2; return 1; }
	CS_TMC_SIZE=1M cs_qemu kdump mod "$d" "cspd.test=kdump crashkernel=256M nokaslr $TRACE_MOD_APPEND cspd.etm_el1_only=1 cspd.trigger_cpu=1 cspd.hardlockup=0 cspd.stop_at=$HARDLOCKUP_STOP cspd.capture_insmod=coresight_tmc.ko,coresight_cpu_debug.ko:debug=1" \
		--exec-freeze-at "$freeze" && el1_only_set "$d" || return 1
	grep -q "CSPD: hard lockup: CPU 0 spins with interrupts masked" "$d/console.log" ||
		{ echo "CPU 0 was not locked up (LKDTM HARDLOCKUP)" >&2; return 1; }
	grep -q "CSPD: stop_at set: '$HARDLOCKUP_STOP'" "$d/console.log" ||
		{ echo "stop_at was not set to $HARDLOCKUP_STOP" >&2; return 1; }
	EXEC_UNTRACED_EL0=1 EXEC_CAPTURE_SAMPLES=1 check_trace_with "$d" mod --through sysrq_handle_crash \
		--hw-stop "$HARDLOCKUP_STOP" --plain-kdump --panic-cpu 1 --capture-debug --locked-cpu 0:lkdtm_HARDLOCKUP \
		--nokaslr --no-el0
}

# trace-kdump-hardlockup with no stop point on the loop: CPU 0 goes on tracing its loop after the
# crash, until the capture kernel stops the sink, and its trace overwrites the whole 256 KiB sink,
# the panicking CPU's included. The report must say so (the panicking CPU inferred from where the
# capture kernel ran, none of its trace left, CPU 0's filling the sink), the sample of CPU 0 is
# still in its loop, and CPU 0's decode is what the execution record says it ran.
scenario_trace-kdump-hardlockup-unarmed() {
	local d=$RUNS/trace-kdump-hardlockup-unarmed
	cs_qemu kdump mod "$d" "cspd.test=kdump crashkernel=256M $TRACE_MOD_APPEND cspd.etm_el1_only=1 cspd.trigger_cpu=1 cspd.hardlockup=0 cspd.capture_insmod=coresight_tmc.ko,coresight_cpu_debug.ko:debug=1" \
		&& el1_only_set "$d" || return 1
	grep -q "CSPD: hard lockup: CPU 0 spins with interrupts masked" "$d/console.log" ||
		{ echo "CPU 0 was not locked up (LKDTM HARDLOCKUP)" >&2; return 1; }
	"$CSDUMP" report "$d/vmcore.elf" --vmlinux "$CSPD_CACHE/build-mod/vmlinux" --json >"$d/report.json" 2>"$d/report.err" ||
		{ cat "$d/report.err"; echo "csdump report failed" >&2; return 1; }
	python3 - "$REPO/scripts" "$d" <<'PY' | tee "$d/check.txt" || return 1
import json, sys, types
sys.path.insert(0, sys.argv[1])
import check_trace
d = sys.argv[2]
rep = json.load(open(f"{d}/report.json"))
a = types.SimpleNamespace(dir=d, panic_cpu=1, locked_cpu="0:lkdtm_HARDLOCKUP")
try:
    if "crash_kexec_post_notifiers" in open(f"{d}/cmdline.txt").read():
        raise check_trace.Bad("crash_kexec_post_notifiers is on the command line")
    if rep["panic_cpu"] != 1 or not any("the capture kernel ran on it" in n for n in rep["notes"]):
        raise check_trace.Bad(f"csdump does not infer CPU1 as the panicking CPU from the capture kernel: "
                              f"{rep['panic_cpu']}, {rep['notes']}")
    check_trace.check_capture_samples(a, rep)
    check_trace.check_locked_cpu(a, rep)
except check_trace.Bad as e:
    sys.exit(f"trace-kdump-hardlockup-unarmed: {e}")
PY
	# No self-test of the decode: CPU 0's window is the same loop over and over, in which one
	# iteration dropped is the same window (the armed scenario and the others run it).
	EXEC_UNTRACED_EL0=1 EXEC_CAPTURE_SAMPLES=1 EXEC_DROPPED_AFTER_STOP=1 check_exec "$d" mod
}

# trace-kdump-plain's capture kernel without the TMC driver: the dump holds the ETMs' metadata
# (recorded at enable), and csdump says the trace was not collected and why.
scenario_trace-kdump-plain-no-driver() {
	local d=$RUNS/trace-kdump-plain-no-driver rc=0
	cs_qemu kdump mod "$d" "cspd.test=kdump crashkernel=256M $TRACE_MOD_APPEND" || return 1
	! grep -q "the crashed kernel left it capturing" "$d/console.log" ||
		{ echo "a TMC driver ran in the capture kernel" >&2; return 1; }
	"$CSDUMP" info --json "$d/vmcore.elf" >"$d/info.json" 2>"$d/info.err" ||
		{ cat "$d/info.err"; echo "csdump info failed on a sound dump without trace" >&2; return 1; }
	"$CSDUMP" report "$d/vmcore.elf" --vmlinux "$CSPD_CACHE/build-mod/vmlinux" >"$d/report.txt" 2>"$d/report.err" || rc=$?
	[ "$rc" = 3 ] || { echo "csdump report exited $rc, not 3 (no trace)" >&2; return 1; }
	python3 - "$d/info.json" "$d/report.err" "$SMP" <<'PY'
import json, sys
info, err, cpus = json.load(open(sys.argv[1])), open(sys.argv[2]).read(), int(sys.argv[3])
def bad(why):
    sys.exit(f"trace-kdump-plain-no-driver: {why}")
if info.get("path") != "runtime":
    bad(f"the dump's path is {info.get('path')!r}, not a commit made while the kernel ran")
etms = [r for r in info["records"] if r["kind"] == "source"]
if sorted(r["cpu"] for r in etms) != list(range(cpus)) or any(
        r["status"] != "ok" or (r.get("origin") or {}).get("by") != "runtime" for r in etms):
    bad(f"expected an ETM record recorded at enable for each CPU: {etms}")
if info["captures"]:
    bad(f"device dumps of a capture kernel without the driver: {info['captures']}")
why = info.get("no_trace") or ""
if not why.startswith("the trace was not collected") or "no vmcore device dump coresight_capture:" not in why:
    bad(f"csdump info does not say why there is no trace: {why!r}")
if "the trace was not collected" not in err:
    bad("csdump report does not say the trace was not collected")
print(f"no TMC driver in the capture kernel: the dump holds the {len(etms)} ETM records recorded at enable; "
      "csdump says the trace was not collected, and why")
PY
}

# trace-kdump with the dump region from the device tree (no-map) instead of reserve_mem=: the
# capture kernel hands it over as a device dump; the same checks against the emulated hardware.
scenario_trace-dt-kdump() {
	local d=$RUNS/trace-dt-kdump
	CS_REGION=region cs_qemu kdump mod "$d" \
		"cspd.test=kdump crashkernel=256M crash_kexec_post_notifiers cspd.trace=1 cspd.insmod=$TRACE_MODS cspd.modparm_coresight_cpu_debug=debug=1" &&
		check_trace "$d" mod || return 1
	! grep -q "$KDUMP_FIRST_WARNING" "$d/console.log" ||
		{ echo "the sink warned although crash_kexec_post_notifiers was on" >&2; return 1; }
	"$CSDUMP" info "$d/vmcore.elf" >"$d/csdump.txt" 2>&1
	check_device_dump "$d"
}

# el1_only_set DIR: every ETM of the run took EL1-only tracing (cspd.etm_el1_only: the mode's
# exclude-user bit set, the rest of upstream's default mode kept), from the kernel's copies of the
# guest's lines.
el1_only_set() {
	[ "$(tr -d '\r' <"$1/console.log" | grep -cE '\] CSPD: etm el1 only etm[0-9]+: mode 0x88000000$')" = "$SMP" ] ||
		{ echo "not every ETM took EL1-only tracing (mode 0x88000000; console.log)" >&2; return 1; }
}

# Built in, with stop_at given on the kernel command line, EL1 only (what the user guide
# recommends for a kernel panic: csdump serves no user-space code, and the trace keeps more of
# the kernel's): check_trace.py --no-el0, no EL0 code or gap in any CPU's decode.
scenario_trace-builtin() {
	local d=$RUNS/trace-builtin
	# stop_at as the guest read it back, from the kernel's copy of its line ("[ time] CSPD: ..."):
	# the console writes a kernel record whole, while the guest's own tty write of the same line
	# may be split by one.
	cs_qemu qemu-dump builtin "$d" \
		"cspd.test=panic $TRACE_APPEND coresight_cpu_debug.enable=1 coresight_panic_dump.stop_at=panic cspd.etm_el1_only=1" &&
		grep -qE '\] CSPD: stop_at: panic$' <(tr -d '\r' <"$d/console.log") && el1_only_set "$d" &&
		EXEC_UNTRACED_EL0=1 check_trace_with "$d" builtin --through sysrq_handle_crash --hw-stop panic --no-el0
}

# Eight CPUs, KASLR off, the panic pinned to CPU 5 (a non-boot CPU): every CPU's window is
# judged whole against the ground truth and the execution record, the panicking CPU's flow runs
# through the crash into panic(), and csdump finds no KASLR offset.
scenario_trace-smp8() {
	local d=$RUNS/trace-smp8
	SMP=8 cs_qemu qemu-dump builtin "$d" \
		"nokaslr cspd.test=panic cspd.trigger_cpu=5 $TRACE_APPEND coresight_cpu_debug.enable=1" --smp 8 &&
		grep -q "CSPD: triggering panic on CPU 5" "$d/console.log" &&
		SMP=8 check_trace "$d" builtin --nokaslr --panic-cpu 5
}

# The hardware stop switched off through sysfs (stop_at emptied before the sources are enabled):
# no stop point, and the panicking CPU's trace runs on past panic()'s entry, through what panic()
# prints, until the panic path stops the ETM.
scenario_trace-no-hw-stop() {
	local d=$RUNS/trace-no-hw-stop
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND cspd.stop_at=off" &&
		grep -q "CSPD: stop_at set: ''" "$d/console.log" &&
		check_trace_with "$d" mod --through sysrq_handle_crash,panic --no-hw-stop
}

# Every CPU's debug power domain stays down (fault=debug-power-off@all): each CPU waits for its
# core to power up only for its share of the CPU debug phase's budget (budget_ms, 50 ms here), the
# phase ends within it, and every CPU's record says why it was not sampled.
scenario_trace-debug-all-off() {
	local d=$RUNS/trace-debug-all-off
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND,budget_ms=50" \
		--cs-arg fault=debug-power-off@all &&
		check_trace "$d" mod --fault debug-power-off@all --budget-ms 50
}

# GDB replays the dumps of trace-kdump (modules, kdump) and trace-builtin (built in, QMP dump; also
# written as an OpenCSD snapshot and replayed from it): scripts/check_gdb.py drives gdb-multiarch
# through `csdump gdb` and checks the threads, the instruction and call history, the current
# instruction and reverse-stepi against the plugin's ground truth, and must fail on a truth one
# instruction off. A run older than its kernel is run again first.
scenario_trace-gdb() {
	local d=$RUNS/trace-gdb rc=0 s v src
	mkdir -p "$d"
	for s in trace-kdump:mod trace-builtin:builtin trace-module-oops:mod trace-kdump-plain:mod; do
		v=${s#*:} s=${s%%:*} src=$RUNS/${s%%:*}
		if ! [ -f "$src/truth.json" ] || ! [ "$src/vmcore.elf" -nt "$CSPD_CACHE/build-$v/vmlinux" ]; then
			"scenario_$s" || { echo "$s failed: nothing to replay" >&2; rc=1; continue; }
		fi
		local -a extra=(--through sysrq_handle_crash)
		# The mod kernel has a line table (configs/modules.config), the builtin one none.
		if [ "$v" = builtin ]; then extra+=(--snapshot); else extra+=(--source); fi
		# The oops in module code: GDB names the module's functions from its .ko, which the stub
		# serves as a library where the dump's module list placed it.
		[ "$s" != trace-module-oops ] || extra+=(--modules "$CSPD_CACHE/build-mod"
			--through c_module_crash_oops,c_module_crash_store,__do_kernel_fault)
		# Plain kdump: no record names the panicking CPU; csdump gdb infers CPU 1 (its trace
		# alone ends at a stop point) and selects it.
		[ "$s" != trace-kdump-plain ] || extra+=(--panic-cpu 1)
		# The ETM stops at panic()'s entry (the hardware stop): nothing of panic() is in the
		# history, the current instruction is its entry.
		python3 "$REPO/scripts/check_gdb.py" --dir "$src" --csdump "$CSDUMP" \
			--vmlinux "$CSPD_CACHE/build-$v/vmlinux" "${extra[@]}" 2>&1 |
			tee "$d/$s.txt"
		[ "${PIPESTATUS[0]}" = 0 ] || rc=1
	done
	# The check must fail when the truth is one instruction off: the panicking CPU's last branch
	# one instruction later, on trace-builtin's files.
	local src=$RUNS/trace-builtin neg=$d/altered out
	rm -rf "$neg"
	mkdir -p "$neg"
	ln -s "$src/vmcore.elf" "$neg/vmcore.elf"
	python3 - "$src/truth.json" "$neg/truth.json" "$CSDUMP" "$src/vmcore.elf" <<'PY' || return 1
import json, subprocess, sys
panic = json.loads(subprocess.run([sys.argv[3], "info", sys.argv[4], "--json"], capture_output=True,
                                  text=True).stdout)["panic"]["cpu"]
t = json.load(open(sys.argv[1]))
e = next(c for c in t["cpus"] if c["cpu"] == panic)["events"][-1]
e["from"] = hex(int(e["from"], 16) + 4)
json.dump(t, open(sys.argv[2], "w"))
PY
	if out=$(python3 "$REPO/scripts/check_gdb.py" --dir "$neg" --csdump "$CSDUMP" \
		--vmlinux "$CSPD_CACHE/build-builtin/vmlinux" 2>&1); then
		echo "check_gdb.py did not detect a ground truth one instruction off" >&2
		rc=1
	elif ! grep -q "differs from the ground truth\|the truth says" <<<"$out"; then
		echo "$out" | tail -n 3
		echo "check_gdb.py failed on the altered truth, but not on the history" >&2
		rc=1
	else
		echo "detected as expected: $(grep "FAIL" <<<"$out" | cut -c1-160)"
	fi
	return $rc
}

# Warm reboot with trace (built in): the first boot traces and panics, reboots itself with its RAM
# at once (panic=-1: a second of panic()'s delay loop would push the trace's last moments out of
# the execution record's ring); the second boot saves the previous dump from debugfs before anything touches
# CoreSight. The region file is judged against the emulated hardware of the first boot, which the
# plugin kept. It holds no kernel text, so the second boot then waits for the host's memory dump
# of it (cspd.text_dump=1): the same kernel at the same KASLR offset, whose text csdump report
# --text-from decodes against; the whole window is then judged against the ground truth and the
# execution record like any other.
TEXT_DUMP_AT="CSPD: waiting for the host's memory dump"

scenario_trace-warm-reboot() {
	local d=$RUNS/trace-warm-reboot
	cs_qemu warm builtin "$d" "panic=-1 cspd.test=warm cspd.text_dump=1 $TRACE_APPEND coresight_cpu_debug.enable=1" \
		--dump-at "$TEXT_DUMP_AT" --second-vmcore "$d/text.vmcore" || return 1
	[ -f "$d/vmcore.elf" ] || { echo "the second boot found no dump" >&2; return 1; }
	check_readback "$d/console.log" "$(stat -c %s "$d/vmcore.elf")" "$LAST_DEV" no-debugfs || return 1
	local rc=0
	EXEC_TEXT_FROM="$d/text.vmcore" check_trace "$d" builtin --text-from "$d/text.vmcore" || rc=1
	rm -f "$d/text.vmcore"
	return $rc
}

# check_readback fails, each with its own message, on a copy of trace-warm-reboot's console with
# one line altered: a kernel with debugfs, the dump read from debugfs, a bad clear request that
# took, a clear that left the dump.
scenario_harness-last-dump() {
	local src=$RUNS/trace-warm-reboot d=$RUNS/harness-last-dump rc=0 size
	[ -f "$src/vmcore.elf" ] || scenario_trace-warm-reboot || return 1
	rm -rf "$d"
	mkdir -p "$d"
	size=$(stat -c %s "$src/vmcore.elf")
	check_readback "$src/console.log" "$size" "$LAST_DEV" no-debugfs >"$d/unaltered.txt" 2>&1 ||
		{ cat "$d/unaltered.txt"; echo "check_readback fails on trace-warm-reboot's console" >&2; return 1; }
	sed 's/CSPD: debugfs: not in this kernel/CSPD: debugfs: in this kernel/g' "$src/console.log" >"$d/debugfs.log"
	judge_negative "a kernel with debugfs" "the kernel had debugfs" \
		check_readback "$d/debugfs.log" "$size" "$LAST_DEV" no-debugfs || rc=1
	sed "s|CSPD: last dump read from .*|CSPD: last dump read from $LAST_DEBUGFS|" "$src/console.log" >"$d/from.log"
	judge_negative "the dump read from debugfs" "the previous dump was not read from $LAST_DEV" \
		check_readback "$d/from.log" "$size" "$LAST_DEV" no-debugfs || rc=1
	sed 's/CSPD: clear rejected a bad value.*/CSPD: clear accepted a bad value/' "$src/console.log" >"$d/bad-clear.log"
	judge_negative "a bad clear request that took" "writing 2 to clear was not rejected" \
		check_readback "$d/bad-clear.log" "$size" "$LAST_DEV" no-debugfs || rc=1
	sed "s/CSPD: last dump after clear: 0 bytes/CSPD: last dump after clear: $size bytes/g" "$src/console.log" >"$d/kept.log"
	judge_negative "a clear that left the dump" "clearing did not empty $LAST_DEV" \
		check_readback "$d/kept.log" "$size" "$LAST_DEV" no-debugfs || rc=1
	return $rc
}

# check_crash_device fails with its own message on trace-etr-warm-reboot's console altered: the
# device file read other bytes, read after the clear, or was never registered.
scenario_harness-crash-device() {
	local src=$RUNS/trace-etr-warm-reboot d=$RUNS/harness-crash-device rc=0
	[ -f "$src/vmcore.elf" ] || scenario_trace-etr-warm-reboot || return 1
	rm -rf "$d"
	mkdir -p "$d"
	check_crash_device "$src/console.log" "$src/vmcore.elf" tmc_etr0 >"$d/unaltered.txt" 2>&1 ||
		{ cat "$d/unaltered.txt"; echo "check_crash_device fails on trace-etr-warm-reboot's console" >&2; return 1; }
	sed 's/\(CSPD: crash device crash_tmc_etr0: [^[]*md5 \)./\1x/g' "$src/console.log" >"$d/md5.log"
	judge_negative "other bytes read" "/dev/crash_tmc_etr0 read" \
		check_crash_device "$d/md5.log" "$src/vmcore.elf" tmc_etr0 || rc=1
	sed 's/CSPD: crash device crash_tmc_etr0 after clear: .*/CSPD: crash device crash_tmc_etr0 after clear: read/' \
		"$src/console.log" >"$d/after-clear.log"
	judge_negative "a read after the clear" "/dev/crash_tmc_etr0 was not refused (ENOENT)" \
		check_crash_device "$d/after-clear.log" "$src/vmcore.elf" tmc_etr0 || rc=1
	grep -v "the crash trace of tmc_etr0 is" "$src/console.log" >"$d/unregistered.log"
	judge_negative "no registration" "did not register /dev/crash_tmc_etr0" \
		check_crash_device "$d/unregistered.log" "$src/vmcore.elf" tmc_etr0 || rc=1
	return $rc
}

# oops_panicked DIR: the oops itself panicked (oops=panic: "Oops: Fatal exception"), on the CPU
# that took it, not a later exit of the task it killed.
oops_panicked() {
	grep -qa "Kernel panic - not syncing: Oops: Fatal exception" "$1/console.log" ||
		{ echo "the oops did not panic (oops=panic): $(grep -a -m1 'Kernel panic - not syncing' "$1/console.log")" >&2; return 1; }
}

# An oops instead of sysrq: LKDTM's EXCEPTION (a store to NULL) with oops=panic (the command line's
# panic_on_oops of Linux 7.3; a bare panic_on_oops=1 is not a kernel parameter: it went to init,
# the oops killed init, and the panic came from do_exit on whatever CPU init then ran). Some CPU's
# decoded flow takes the data abort in lkdtm_EXCEPTION (the task may then move: one run faulted on
# CPU 1 and ran die() on CPU 0), and the panicking CPU's runs through __do_kernel_fault to the
# hardware stop: die_kernel_fault() is inlined into __do_kernel_fault in these kernels (not a
# symbol, so the core leaves it out of stop_at and says so), and the trace ends at die()'s entry,
# before the registers and the backtrace are printed.
scenario_trace-oops() {
	local d=$RUNS/trace-oops rc=0
	cs_qemu qemu-dump mod "$d" \
		"cspd.test=panic cspd.trigger=lkdtm cspd.lkdtm=EXCEPTION oops=panic $TRACE_MOD_APPEND" || rc=1
	if grep -qa "CSPD: no LKDTM" "$d/console.log" 2>/dev/null; then
		echo "the kernel has no LKDTM (/sys/kernel/debug/provoke-crash is missing): it needs CONFIG_LKDTM=y" >&2
		return 1
	fi
	[ $rc = 0 ] || return 1
	grep -qa "Internal error: Oops" "$d/console.log" || { echo "LKDTM EXCEPTION did not oops" >&2; return 1; }
	oops_panicked "$d" || return 1
	check_trace_with "$d" mod --last 400000 --trigger lkdtm_EXCEPTION --through __do_kernel_fault \
		--hw-stop die_kernel_fault,die
}

# An oops in interrupt context: the built-in c_crash sample's timer callback stores to NULL
# (softirq), and the oops panics from there ("Fatal exception in interrupt"). Some CPU's
# decoded flow takes the data abort in c_crash_irq_oops; the panicking CPU's runs through
# __do_kernel_fault to the hardware stop at die().
# An oops in a loadable module's own code (c_module_crash, oops=panic): the panicking CPU's
# flow runs through the module's functions, named from its .ko as the dump's module list places
# them, into the fault.
scenario_trace-module-oops() {
	local d=$RUNS/trace-module-oops
	cs_qemu qemu-dump mod "$d" "cspd.test=panic cspd.trigger=module-crash oops=panic $TRACE_APPEND \
cspd.insmod=$TRACE_MODS,c_module_crash.ko cspd.modparm_coresight_cpu_debug=debug=1" || return 1
	grep -qa "c_module_crash: a store to NULL in module code" "$d/console.log" &&
		grep -qa "Internal error: Oops" "$d/console.log" ||
		{ echo "c_module_crash did not oops in its own code" >&2; return 1; }
	oops_panicked "$d" || return 1
	check_trace_with "$d" mod --perf --trigger c_module_crash_store \
		--through c_module_crash_oops,c_module_crash_store,__do_kernel_fault --hw-stop die_kernel_fault,die
}

scenario_trace-irq-oops() {
	local d=$RUNS/trace-irq-oops
	cs_qemu qemu-dump mod "$d" \
		"cspd.test=panic cspd.trigger=crash cspd.crash=irq-oops oops=panic $TRACE_MOD_APPEND" || return 1
	grep -qa "Fatal exception in interrupt" "$d/console.log" ||
		{ echo "the timer callback's oops did not panic in interrupt context" >&2; return 1; }
	check_trace_with "$d" mod --trigger c_crash_irq_oops --through __do_kernel_fault \
		--hw-stop die_kernel_fault,die
}

# Two CPUs crash at once: c_crash's kthreads on CPUs 0 and 1 meet, then both call panic(). The
# dump runs once, on the CPU that won panic()'s race; the other one's decoded flow also runs
# through c_crash_panic_thread into panic(), where its trace stopped in hardware and panic() parks
# it (the second crash's nested path).
scenario_trace-two-cpus() {
	local d=$RUNS/trace-two-cpus
	cs_qemu qemu-dump mod "$d" "cspd.test=panic cspd.trigger=crash cspd.crash=two-cpus $TRACE_MOD_APPEND" ||
		return 1
	[ "$(grep -ac "] Kernel panic - not syncing" "$d/console.log")" = 1 ] ||
		{ echo "expected one panic message (the second CPU stops in panic() without one)" >&2; return 1; }
	check_trace_with "$d" mod --through c_crash_panic_thread --hw-stop panic --crashed-cpus 0,1
}

# check_etm_config DIR MODE: what the guest read from each ETM's sysfs configuration files
# (cspd.etm_mode=MODE): upstream's defaults after probe (mode with the start/stop bit, four
# comparator pairs, addr_idx 0, an unset range reading zeros; zero printed as C's %#lx prints it),
# a range and EL0 exclusion as set,
# the defaults again after `reset`, then MODE.
check_etm_config() {
	local d=$1 want=$2 c e line rc=0
	local console
	# The kernel's copies of the lines ("[ time] CSPD: ..."): a kernel record reaches the console
	# whole, the guest's own write of the same line may be split by one.
	console=$(tr -d '\r' <"$d/console.log" | sed -n 's/^.*\] \(CSPD: etm config .*\)$/\1/p' | sort -u)
	for ((c = 0; c < SMP; c++)); do
		e=etm$c
		for line in "default mode 0x8000000 nr_addr_cmp 0x4 addr_idx 0x0 addr_range 0x0_0x0" \
			"set mode 0x88000000 addr_range 0x1000_0x2000" \
			"reset mode 0x8000000 addr_range 0x0_0x0" "mode $want"; do
			grep -qxF "CSPD: etm config $e $line" <<<"$console" || {
				echo "FAIL: $e's sysfs configuration: no 'etm config $e $line'; the guest read:" >&2
				grep "etm config $e " <<<"$console" | sed 's/^/  /' >&2
				rc=1
				break
			}
		done
	done
	[ $rc = 0 ] && echo "ETMs' sysfs configuration: upstream's defaults, a range and mode as set, the defaults after reset, mode $want for the session"
	return $rc
}

# The ETMs' sysfs configuration (upstream's files): before the session the guest reads each unit's
# defaults, sets an address range and EL0 exclusion, resets (the defaults come back) and sets
# mode 0x88000000 (EL0 excluded, the start/stop logic started). check_trace.py --no-el0: no CPU's
# decode runs EL0 code, the whole window equals the truth, every unit was programmed without EL0;
# the execution record (check_exec) has the CPUs run EL0 code inside the window, which the trace
# left out.
scenario_trace-exclude-user() {
	local d=$RUNS/trace-exclude-user
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND cspd.etm_mode=0x88000000" || return 1
	check_etm_config "$d" 0x88000000 && EXEC_SELF_TEST=1 EXEC_UNTRACED_EL0=1 check_trace "$d" mod --no-el0 || return 1
	grep -qE "; [1-9][0-9]* user-space boundaries csdump could not decode" "$d/check-exec.txt" ||
		{ echo "the execution record has no CPU run EL0 code in the window: the exclusion went untested" >&2; return 1; }
}

# etm_range_of CONSOLE [FUNC]: "LO:HI", the address range (hexadecimal) the guest set on etm0 for
# FUNC (default uptime_proc_show), from the kernel's copy of its line.
etm_range_of() {
	tr -d '\r' <"$1" | sed -n "s/^.*\] CSPD: etm config etm0 range ${2:-uptime_proc_show} 0x\([0-9a-f]*\)_0x\([0-9a-f]*\)\$/\1:\2/p" |
		head -n 1
}

# An address range through the ETMs' sysfs (addr_idx 0, addr_range from uptime_proc_show's first
# instruction to its last, both included), then /proc/uptime read on each CPU and the
# sysrq panic. check_trace.py --range: every decoded event leaves from inside the range, the
# whole window equals the truth (branches out of the range are left out of both sides), each CPU
# ran it; check_exec --traced-range: the decode is what the execution record has the CPUs run
# inside the range, every branch there included (without the judge's self-test: its mutated
# decodes are searched for across the millions of untraced blocks, 100 s).
scenario_trace-etm-range() {
	local d=$RUNS/trace-etm-range range
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND cspd.etm_range=uptime_proc_show" || return 1
	range=$(etm_range_of "$d/console.log")
	[ -n "$range" ] || { echo "the guest did not set etm0's address range (console.log)" >&2; return 1; }
	[ "$(grep -c "\] CSPD: etm config etm[0-9]* range uptime_proc_show 0x${range%:*}_0x${range#*:}" "$d/console.log")" = "$SMP" ] ||
		{ echo "not every ETM took the range ${range/:/..}" >&2; return 1; }
	EXEC_TRACED_RANGE=$range check_trace_with "$d" mod --range "$range" || return 1
}

# An address range excluded (addr_range's third value): gic_handle_irq, which every CPU runs at
# each interrupt, so that the window holds many entries into it; its comparators set not to match
# at EL0 (addr_exlevel_s_ns 0x10: addr_cmp_view shows it). check_trace.py --exclude-range: no
# decoded event inside the range, the CPUs ran it (the truth branches into it), the rest of the
# window equals the truth, the panic record saved the exclusion; check_exec --untraced-range, with
# the judge's self-test (its mutated decodes fail it).
scenario_trace-etm-exclude-range() {
	local d=$RUNS/trace-etm-exclude-range range n
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND cspd.etm_range=gic_handle_irq cspd.etm_range_exclude=1" ||
		return 1
	range=$(etm_range_of "$d/console.log" gic_handle_irq)
	[ -n "$range" ] || { echo "the guest did not set etm0's address range (console.log)" >&2; return 1; }
	n=$(tr -d '\r' <"$d/console.log" | grep -cE "\] CSPD: etm config etm[0-9]+ view addr_cmp\[0\]_range_0x${range%:*}_0x${range#*:}_exclude_ctrl\(0x1000\)_$")
	[ "$n" = "$SMP" ] || { echo "not every ETM shows the range excluded, its comparator not matching at EL0 (addr_cmp_view)" >&2; return 1; }
	EXEC_SELF_TEST=1 EXEC_UNTRACED_RANGE=$range check_trace "$d" mod --exclude-range "$range" || return 1
}

# range_wider LO:HI: the range (hexadecimal) one instruction lower at its start.
range_wider() {
	printf '%x:%s' $((0x${1%:*} - 4)) "${1#*:}"
}

# check_trace.py --range fails with its own messages: on trace-builtin's run (traced whole) judged
# with trace-etm-range's range, on trace-etm-range's run with one event of the truth inside the
# range moved one instruction, and on trace-etm-range's run judged with a configuration the guest
# did not set (the saved filter's check).
scenario_harness-etm-range() {
	local src=$RUNS/trace-etm-range d=$RUNS/harness-etm-range range c rc=0
	local -a mod_judge=(python3 "$REPO/scripts/check_trace.py" --csdump "$CSDUMP"
		--vmlinux "$CSPD_CACHE/build-mod/vmlinux" --cpus "$SMP" --modules-dir "$CSPD_CACHE/build-mod")
	[ -f "$src/check.txt" ] || scenario_trace-etm-range || return 1
	[ -f "$RUNS/trace-builtin/check.txt" ] || scenario_trace-builtin || return 1
	[ -f "$RUNS/trace-etm-exclude-range/check.txt" ] || scenario_trace-etm-exclude-range || return 1
	range=$(etm_range_of "$src/console.log")
	rm -rf "$d"
	mkdir -p "$d"
	judge_copy "$RUNS/trace-builtin" "$d/builtin"
	judge_negative "trace-builtin's run (traced whole) judged as traced in a range" "yet csdump decodes" \
		python3 "$REPO/scripts/check_trace.py" --dir "$d/builtin" --csdump "$CSDUMP" \
		--vmlinux "$CSPD_CACHE/build-builtin/vmlinux" --cpus "$SMP" --range "$range" || rc=1
	c=$d/truth
	judge_copy "$src" "$c"
	rm "$c/truth.json"
	python3 - "$src/truth.json" "$c/truth.json" "$REPO/scripts" "$range" <<'PY' || return 1
import sys
sys.path.insert(0, sys.argv[3])
from truth_edit import Truth, nth_newest
lo, hi = (int(x, 16) for x in sys.argv[4].split(":"))
t = Truth(sys.argv[1])
# CPU0's newest taken branch inside the range (the loop's): its target 4 bytes further.
e = nth_newest(t, 0, 0, lambda e: e.kind == "taken" and lo <= e.frm <= hi and lo <= e.to <= hi)
e.to += 4
t.write_with(sys.argv[2], e)
PY
	judge_negative "one event of trace-etm-range's truth moved" "differs from the plugin's ground truth" \
		"${mod_judge[@]}" --dir "$c" --range "$range" || rc=1
	# What the ETM record saved, against a configuration the guest did not set: the range one
	# instruction wider (every decoded event still inside it), and EL0 excluded besides.
	c=$d/saved
	judge_copy "$src" "$c"
	judge_negative "trace-etm-range's run judged with the range one instruction wider" "the ETM record saves the included ranges" \
		"${mod_judge[@]}" --dir "$c" --range "$(range_wider "$range")" || rc=1
	judge_negative "trace-etm-range's run judged as EL0 excluded" "the ETM record saves the levels traced as 'EL0 and EL1'" \
		"${mod_judge[@]}" --dir "$c" --range "$range" --no-el0 || rc=1
	# The exclusion's judge: trace-etm-range's run (the range included) judged as excluded, and
	# trace-etm-exclude-range's judged with the range one instruction wider (the instruction
	# before gic_handle_irq is padding no CPU runs).
	judge_negative "trace-etm-range's run judged as the range excluded" "was excluded, yet csdump decodes" \
		"${mod_judge[@]}" --dir "$c" --exclude-range "$range" || rc=1
	c=$d/excluded
	judge_copy "$RUNS/trace-etm-exclude-range" "$c"
	range=$(etm_range_of "$c/console.log" gic_handle_irq)
	judge_negative "trace-etm-exclude-range's run judged with the range one instruction wider" "the ETM record saves the excluded ranges" \
		"${mod_judge[@]}" --dir "$c" "${SYSRQ_STOP[@]}" --exclude-range "$(range_wider "$range")" || rc=1
	return $rc
}

# The EL0 exclusion's judges fail with their own messages: check_etm_config on trace-exclude-user's
# console with the reset not giving the defaults back; check_trace.py --no-el0 on trace-no-hw-stop's
# run (traced with the default mode: its decode runs EL0 code) and on trace-exclude-user's with the
# plugin's record of one enable saying EL0 was traced.
scenario_harness-exclude-user() {
	local src=$RUNS/trace-exclude-user d=$RUNS/harness-exclude-user c rc=0
	[ -f "$src/check.txt" ] || scenario_trace-exclude-user || return 1
	[ -f "$RUNS/trace-no-hw-stop/check.txt" ] || scenario_trace-no-hw-stop || return 1
	rm -rf "$d"
	mkdir -p "$d/reset"
	sed 's/\(CSPD: etm config etm0 reset mode \)0x8000000 /\10x88000000 /g' "$src/console.log" >"$d/reset/console.log"
	judge_negative "etm0's reset not giving the default mode back" "FAIL: etm0's sysfs configuration: no 'etm config etm0 reset mode" \
		check_etm_config "$d/reset" 0x88000000 || rc=1
	judge_copy "$RUNS/trace-no-hw-stop" "$d/whole"
	judge_negative "trace-no-hw-stop's run (EL0 traced) judged as EL0 excluded" "EL0 was excluded, yet csdump's decode runs EL0 code" \
		python3 "$REPO/scripts/check_trace.py" --dir "$d/whole" --csdump "$CSDUMP" --vmlinux "$CSPD_CACHE/build-mod/vmlinux" \
		--cpus "$SMP" --modules-dir "$CSPD_CACHE/build-mod" --through sysrq_handle_crash,panic --no-hw-stop --no-el0 || rc=1
	c=$d/traced
	judge_copy "$src" "$c"
	sed -i '0,/EL excluded (NS) 0x1/s//EL excluded (NS) 0x0/' "$c/plugin.log"
	judge_negative "one enable of trace-exclude-user's ETMs recorded with EL0 traced" "was enabled tracing EL0" \
		python3 "$REPO/scripts/check_trace.py" --dir "$c" --csdump "$CSDUMP" --vmlinux "$CSPD_CACHE/build-mod/vmlinux" \
		--cpus "$SMP" --modules-dir "$CSPD_CACHE/build-mod" "${SYSRQ_STOP[@]}" --no-el0 || rc=1
	return $rc
}

# TMC-ETR (the plugin's tmc=etr): the production coresight_tmc drives the emulated ETR as a sysfs
# sink; check_trace.py --sink tmc_etr0 compares the trace csdump unwraps from the ETR record with
# the buffer the plugin wrote (tmc.bin) and the decode with the ground truth.
#
# trace-etr-kdump: the buffer is the node's "tracedata" region (upstream's binding, no-map): at
# panic it stays there; the capture kernel hands the region over as the vmcore device dump
# coresight_tracedata@ADDRESS, csdump unwraps it from there. The 1 MiB buffer has wrapped: it
# equals the plugin's buffer from RWP on, and its decode runs across the wrap point as the CPUs
# executed. Where the wrap point lies depends on how long the guest ran, so the plugin's truth
# keeps every event of the last 2 MiB of trace it handed the sink (truth_bytes, cs_qemu): the
# formatted buffer holds at most 15/16 of its 1 MiB in trace bytes, so the record always reaches
# back past it.
ETR_PROBED="tmc_etr0: trace buffer in the tracedata region at $ETR_TRACEDATA, 1024 KiB"
scenario_trace-etr-kdump() {
	local d=$RUNS/trace-etr-kdump
	CS_TMC=etr CS_TRACEDATA=1 cs_qemu kdump mod "$d" \
		"cspd.test=kdump crashkernel=256M crash_kexec_post_notifiers $TRACE_MOD_APPEND" || return 1
	grep -qF "$ETR_PROBED" "$d/console.log" ||
		{ echo "coresight_tmc did not take the tracedata region as the ETR's buffer" >&2; return 1; }
	grep -qF "coresight_panic_dump: kdump capture kernel: trace buffer at $ETR_TRACEDATA (1024 KiB) added to /proc/vmcore as device dump coresight_tracedata@${ETR_TRACEDATA#0x}" \
		"$d/console.log" || { echo "the capture kernel did not hand the trace buffer over" >&2; return 1; }
	check_trace "$d" mod --sink tmc_etr0 --etr-from "device dump \"coresight_tracedata@${ETR_TRACEDATA#0x}\"" \
		--etr-wrapped --perf
}

# trace-etr-kdump with crash_kexec_post_notifiers off: the capture kernel's TMC driver stops the
# ETR the crashed kernel left capturing and records its registers; the tracedata region is no-map,
# so its trace (the core copied the region into /proc/vmcore before this stop) is copied into the
# record. Judged as trace-kdump-plain, the buffer as trace-etr-kdump's.
scenario_trace-etr-kdump-plain() {
	local d=$RUNS/trace-etr-kdump-plain
	CS_TMC=etr CS_TRACEDATA=1 cs_qemu kdump mod "$d" \
		"cspd.test=kdump crashkernel=256M $TRACE_MOD_APPEND cspd.trigger_cpu=1 cspd.capture_insmod=coresight_tmc.ko" || return 1
	grep -qF "$ETR_PROBED" "$d/console.log" ||
		{ echo "coresight_tmc did not take the tracedata region as the ETR's buffer" >&2; return 1; }
	check_trace "$d" mod --plain-kdump --panic-cpu 1 --sink tmc_etr0 --etr-from "a copy of the buffer" --etr-wrapped --perf
}

# trace-etr-kdump-plain with the ETR's own DMA buffer (no tracedata region): the buffer is the
# crashed kernel's memory, which the vmcore holds; the capture kernel records the registers
# (its DBA the buffer's physical address: no IOMMU between the ETR and memory here) and csdump
# reads the trace from the vmcore's memory there.
scenario_trace-etr-dma-kdump-plain() {
	local d=$RUNS/trace-etr-dma-kdump-plain
	CS_TMC=etr cs_qemu kdump mod "$d" \
		"cspd.test=kdump crashkernel=256M $TRACE_MOD_APPEND cspd.trigger_cpu=1 cspd.capture_insmod=coresight_tmc.ko" || return 1
	! grep -qF "trace buffer in the tracedata region" "$d/console.log" ||
		{ echo "coresight_tmc took a tracedata region, the scenario wants its DMA buffer" >&2; return 1; }
	check_trace "$d" mod --plain-kdump --panic-cpu 1 --sink tmc_etr0 --etr-from "the vmcore's memory at physical address" \
		--etr-wrapped --perf
}

# trace-etr-warm-reboot: the same buffer, built in, read back after a warm reboot: the next boot
# reads the buffer the previous dump left in place from the tracedata region and appends it to
# last_dump, and csdump takes it from there.
scenario_trace-etr-warm-reboot() {
	local d=$RUNS/trace-etr-warm-reboot
	CS_TMC=etr CS_TRACEDATA=1 cs_qemu warm builtin "$d" \
		"panic=-1 cspd.test=warm cspd.text_dump=1 $TRACE_APPEND coresight_cpu_debug.enable=1" \
		--dump-at "$TEXT_DUMP_AT" --second-vmcore "$d/text.vmcore" || return 1
	[ -f "$d/vmcore.elf" ] || { echo "the second boot found no dump" >&2; return 1; }
	grep -qF "coresight_panic_dump: previous dump: trace buffer of tmc_etr0 at $ETR_TRACEDATA (1024 KiB) read from its tracedata region behind the dump" \
		"$d/console.log" || { echo "the second boot did not attach the ETR's buffer to the previous dump" >&2; return 1; }
	check_readback "$d/console.log" "$(stat -c %s "$d/vmcore.elf")" "$LAST_DEV" no-debugfs || return 1
	check_crash_device "$d/console.log" "$d/vmcore.elf" tmc_etr0 || return 1
	local rc=0
	EXEC_TEXT_FROM="$d/text.vmcore" check_trace "$d" builtin --sink tmc_etr0 --etr-from "attached behind the region" \
		--etr-wrapped --text-from "$d/text.vmcore" || rc=1
	rm -f "$d/text.vmcore"
	return $rc
}

# trace-etr-dma: no tracedata region: each session's buffer is a DMA allocation of buffer_size
# bytes, copied into the dump slot at panic. The slot was sized at probe for the default 1 MiB;
# buffer_size is set to 2 MiB through sysfs (after a value that is not page-aligned is refused),
# stop_on_flush to 1: the record keeps the newest 1 MiB, nothing past its slot.
scenario_trace-etr-dma() {
	local d=$RUNS/trace-etr-dma
	CS_TMC=etr cs_qemu qemu-dump mod "$d" \
		"cspd.test=panic $TRACE_MOD_APPEND cspd.cs_attr=tmc_etr0/buffer_size=0x1001,tmc_etr0/buffer_size=0x200000,tmc_etr0/stop_on_flush=1,tmc_etr0/buf_modes_available=x,tmc_etr0/buf_mode_preferred=tmc-sg,tmc_etr0/buf_mode_preferred=flat" ||
		return 1
	# Upstream's buffer mode attributes: a flat buffer only, scatter-gather refused with a reason.
	grep -q "CSPD: cs_attr tmc_etr0/buf_modes_available rejected x: reads auto flat" "$d/console.log" &&
		grep -q "CSPD: cs_attr tmc_etr0/buf_mode_preferred rejected tmc-sg: reads auto" "$d/console.log" &&
		grep -q "buffer mode tmc-sg is not available: this driver gives the ETR a flat DMA buffer (no scatter-gather, no CATU)" "$d/console.log" &&
		grep -q "CSPD: cs_attr tmc_etr0/buf_mode_preferred set flat: reads flat" "$d/console.log" ||
		{ echo "buf_modes_available/buf_mode_preferred did not behave as documented: $(grep -a "cs_attr tmc_etr0/buf_mode" "$d/console.log")" >&2; return 1; }
	grep -q "CSPD: cs_attr tmc_etr0/buffer_size rejected 0x1001: reads 0x100000" "$d/console.log" &&
		grep -q "CSPD: cs_attr tmc_etr0/buffer_size set 0x200000: reads 0x200000" "$d/console.log" &&
		grep -q "CSPD: cs_attr tmc_etr0/stop_on_flush set 1: reads 0x1" "$d/console.log" ||
		{ echo "buffer_size/stop_on_flush did not behave as upstream's: $(grep -a cs_attr "$d/console.log")" >&2; return 1; }
	grep -qE "tmc_etr0: trace record: truncated, 1048576 of [0-9]+ trace bytes copied" "$d/console.log" ||
		{ echo "the panic log does not say the 2 MiB buffer was cut to the slot" >&2; return 1; }
	check_trace "$d" mod --sink tmc_etr0 --etr-from "a copy of the buffer" --etr-truncated || return 1
	# The session ran with FFCR.StopOnFl (stop_on_flush): the record's FFCR on entry has it.
	python3 - "$d/extract/summary.json" "$d/extract" <<'PY'
import json, os, struct, sys
s = json.load(open(sys.argv[1]))
rec = next(r for r in s["records"] if r["payload"] == "etr")
ffcr = struct.unpack_from("<I", open(os.path.join(sys.argv[2], rec["file"]), "rb").read(), 28)[0]
assert ffcr & (1 << 12), f"FFCR {ffcr:#x} without StopOnFl"
assert all(r["crc_ok"] for r in s["records"]), "a record next to the ETR's is damaged"
print(f"stop_on_flush: the session's FFCR {ffcr:#x} has StopOnFl; every record of the dump is sound")
PY
}

# trace-etr-never-ready: the ETR never sets TMCReady (fault=tmc-never-ready): its record is
# partial/-ETIMEDOUT after the bounded wait, the dump commits in time, everything else is intact.
scenario_trace-etr-never-ready() {
	local d=$RUNS/trace-etr-never-ready
	CS_TMC=etr CS_TRACEDATA=1 cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND" \
		--cs-arg fault=tmc-never-ready &&
		check_trace "$d" mod --sink tmc_etr0 --fault tmc-never-ready
}

# Plugin faults: each costs only its own record, which names it; the rest is checked as in the
# other trace scenarios (the ground truth included wherever there is trace).
# The TMC's RAM reads never end (fault=tmc-rrd-stuck): the drain stops after RSZ words.
scenario_trace-tmc-stuck() {
	local d=$RUNS/trace-tmc-stuck
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND" --cs-arg fault=tmc-rrd-stuck &&
		EXEC_NO_DECODE="RRD repeats one word: the record holds RSZ copies of it, no trace" \
			check_trace "$d" mod --fault tmc-rrd-stuck
}

# RRD gives the RAM's words, wrapping, and never the empty marker (fault=tmc-rrd-never-empty): the
# drain stops after RSZ words, which are the whole RAM, and names the stuck read; the partial
# record holds the trace, which decodes to the ground truth and the execution record.
scenario_trace-tmc-never-empty() {
	local d=$RUNS/trace-tmc-never-empty
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND" --cs-arg fault=tmc-rrd-never-empty &&
		check_trace "$d" mod --fault tmc-rrd-never-empty
}

# The TMC never sets TMCReady (fault=tmc-never-ready): the drain times out with nothing read.
scenario_trace-tmc-never-ready() {
	local d=$RUNS/trace-tmc-never-ready
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND" --cs-arg fault=tmc-never-ready &&
		EXEC_NO_DECODE="the drain timed out before reading anything" \
			check_trace "$d" mod --fault tmc-never-ready
}

# A manual flush never completes (fault=tmc-flush-stuck): the formatter never stops, so TMCReady
# never rises either; the drain names the flush timeout and keeps what RRD gave.
scenario_trace-tmc-flush-stuck() {
	local d=$RUNS/trace-tmc-flush-stuck
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND" --cs-arg fault=tmc-flush-stuck &&
		EXEC_NO_DECODE="the flush never completed and RRD gave nothing to decode" \
			check_trace "$d" mod --fault tmc-flush-stuck
}

# CPU 1's debug power domain stays off (fault=debug-power-off@1): its record says it was not sampled.
# The panicking CPU polls for the power-up after every ETM has stopped: nothing of it is traced.
scenario_trace-debug-power-off() {
	local d=$RUNS/trace-debug-power-off
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND" --cs-arg fault=debug-power-off@1 &&
		check_trace "$d" mod --fault debug-power-off@1
}

# CPU 1 ignores the power-up request (fault=debug-ignore-corepurq@1: EDPRCR.COREPURQ reads as
# zero): its record says it was not sampled, powered down.
scenario_trace-debug-ignore-corepurq() {
	local d=$RUNS/trace-debug-ignore-corepurq
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND" --cs-arg fault=debug-ignore-corepurq@1 &&
		check_trace "$d" mod --fault debug-ignore-corepurq@1
}

# CPU 1's OS double lock is set (fault=debug-double-lock@1): its record says so, not sampled.
scenario_trace-debug-double-lock() {
	local d=$RUNS/trace-debug-double-lock
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND" --cs-arg fault=debug-double-lock@1 &&
		check_trace "$d" mod --fault debug-double-lock@1
}

# CPU 0's ETM never becomes idle once it has traced (fault=etm-never-idle@0; CPU 1's is switched
# off and on through sysfs before the panic, which this fault would refuse): the panic callback
# stops it, times out waiting for TRCSTATR.IDLE and says so in its record; its trace, already in
# the ETF, is still checked against the ground truth.
scenario_trace-etm-never-idle() {
	local d=$RUNS/trace-etm-never-idle
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND" --cs-arg fault=etm-never-idle@0 &&
		check_trace "$d" mod --fault etm-never-idle@0
}

# CPU 1's ETM keeps its OS lock set (fault=etm-os-lock@1): the driver refuses it at probe and says
# why; CPU 0 traces and is checked against the ground truth.
scenario_trace-etm-os-lock() {
	local d=$RUNS/trace-etm-os-lock
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND" --cs-arg fault=etm-os-lock@1 &&
		check_trace "$d" mod --fault etm-os-lock@1
}

# The QEMU plugin's CoreSight components, as the device tree describes them (make_dtb coresight):
# the guest reads every component's IDs, takes the TMC through reset, capture, manual flush and an
# RRD drain, and samples another CPU's PC through its CPU debug interface, all with devmem
# (cspd.test=devmem); check_coresight.py compares each value with the documented one.
scenario_coresight-devmem() {
	local d=$RUNS/coresight-devmem
	mkdir -p "$RUNS"
	make_dtb "$d.dtb" none coresight || { echo "could not make the device tree" >&2; return 1; }
	rm -rf "$d"
	mkdir -p "$d"
	python3 "$REPO/scripts/qemu.py" boot --kernel "$(kernel_of mod)" --initrd "$(initrd_of mod)" \
		--append "$BASE_APPEND cspd.test=devmem" --workdir "$d" --coresight \
		--qemu-arg "-dtb $d.dtb" --wait-for "CSPD: devmem done" --panic-timeout 180 ||
		return 1
	grep -a "qemu-coresight: exit" "$d/plugin.log" "$d/qemu.log" 2>/dev/null | head -n 3
	python3 "$REPO/scripts/check_coresight.py" --console "$d/console.log" --cpus "$SMP" \
		--system-map "$CSPD_CACHE/build-mod/System.map"
}

# check_coresight must fail on a wrong ID: the funnel's part number (PIDR0) is changed in a copy of
# coresight-devmem's console log.
scenario_harness-coresight-wrong-id() {
	local src=$RUNS/coresight-devmem d=$RUNS/harness-coresight-wrong-id
	grep -q "CSPD: devmem done" "$src/console.log" 2>/dev/null || scenario_coresight-devmem || return 1
	rm -rf "$d"
	mkdir -p "$d"
	sed -E 's/(devmem rd funnel\.PIDR0 0x[0-9a-fA-F]{8} )0x00000008/\10x00000009/g' "$src/console.log" >"$d/console.log"
	grep -q "devmem rd funnel.PIDR0 0x[0-9a-fA-F]* 0x00000009" "$d/console.log" ||
		{ echo "could not alter the funnel's PIDR0 in the copy" >&2; return 1; }
	expect_message "funnel part number 0x909 instead of 0x908" "part number 0x909, want 0x908" \
		python3 "$REPO/scripts/check_coresight.py" --console "$d/console.log" --cpus "$SMP" \
		--system-map "$CSPD_CACHE/build-mod/System.map"
}

# Upstream's C drivers judge the emulation: the upstream kernel (Linux 7.3's coresight-tmc and
# coresight-etm4x instead of this project's Rust drivers) binds to the plugin's components as the
# device tree describes them, traces through sysfs (enable_sink, enable_source) while a workload
# runs on every CPU, stops the sources (the plugin writes its ground truth), reads the ETF through
# /dev/tmc_etf0 onto a raw disk and prints each ETM's sysfs registers, then panics for a QMP
# vmcore. check_upstream.py builds an OpenCSD snapshot from those bytes, registers and the kernel
# text the vmcore holds, decodes it with trc_pkt_lister and compares each CPU's last 64 branches
# with the ground truth.
scenario_upstream-drivers() {
	local d=$RUNS/upstream-drivers
	sysfs_run "$d" upstream "" --cs-arg truth_bytes=256K &&
		python3 "$REPO/scripts/check_upstream.py" --dir "$d" --cpus "$SMP" \
			--vmlinux "$CSPD_CACHE/build-upstream/vmlinux"
}

# sysfs_run DIR VARIANT APPEND [QEMU.PY ARGS...]: the guest's cspd.upstream=1 sequence on VARIANT's
# kernel (APPEND: what else its command line has), the ETF read onto etf.disk and, with
# cspd.devfile=1, the read during the session onto devfile.disk; a QMP vmcore at its panic.
sysfs_run() {
	local d=$1 variant=$2 append=$3
	shift 3
	local -a disks=(--qemu-arg "-drive file=$d/etf.disk,format=raw,if=none,id=etf -device virtio-blk-pci,drive=etf")
	mkdir -p "$RUNS"
	make_dtb "$d.dtb" none coresight || { echo "could not make the device tree" >&2; return 1; }
	[ "${CS_TMC:-etf}" = etf ] || set -- --cs-arg "tmc=$CS_TMC" "$@"
	rm -rf "$d"
	mkdir -p "$d"
	truncate -s 8M "$d/etf.disk"
	if [[ $append == *cspd.devfile=1* ]]; then
		truncate -s 8M "$d/devfile.disk"
		disks+=(--qemu-arg "-drive file=$d/devfile.disk,format=raw,if=none,id=devfile -device virtio-blk-pci,drive=devfile,serial=cspd-devfile")
	fi
	python3 "$REPO/scripts/qemu.py" qemu-dump --kernel "$(kernel_of "$variant")" --initrd "$(initrd_of "$variant")" \
		--append "$BASE_APPEND cspd.test=panic cspd.upstream=1 $append" --workdir "$d" --vmcore "$d/vmcore.elf" \
		--coresight --cs-arg tmc_size=256K --qemu-arg "-dtb $d.dtb" "${disks[@]}" \
		--panic-timeout 300 "$@"
}

# devfile_run NAME SINK TRUTH_BYTES EXEC_ENTRIES [perf]: the guest's cspd.upstream=1 sequence on
# this project's drivers (the module variant, CS_TMC the TMC's configuration), the device file read
# while the session traces and after it, judged by check_upstream.py --devfile --exec; with perf,
# perf through the sink while its device file is open too (cspd.devfile_perf=1, --devfile-perf).
devfile_run() {
	local d=$RUNS/$1 sink=$2 truth=$3 entries=$4 perf=${5:-}
	sysfs_run "$d" mod "cspd.devfile=1 ${perf:+cspd.devfile_perf=1 }cspd.sink=$sink reserve_mem=4M:4096:coresight_dump cspd.insmod=$TRACE_MODS" \
		--cs-arg "truth_bytes=$truth" --cs-arg "tmc_dump=$d/tmc.bin" --cs-arg tmc_stops=2 \
		--exec-entries "$entries" || return 1
	python3 "$REPO/scripts/check_upstream.py" --dir "$d" --cpus "$SMP" --devfile ${perf:+--devfile-perf} --exec \
		--sink "$sink" --vmlinux "$CSPD_CACHE/build-mod/vmlinux" 2>&1 | tee "$d/check.txt"
	[ "${PIPESTATUS[0]}" = 0 ] || return 1
	[ -n "${CSPD_KEEP_EXEC:-}" ] || rm -f "$d/exec.rec"
}

# The guest's cspd.upstream=1 sequence on this project's drivers (the module variant), with the
# device file read while the session traces (cspd.devfile=1) onto devfile.disk: /dev/tmc_etf0
# during the session and after it, each decoding to the plugin's truth and to the execution
# record, as upstream's C drivers' read decodes in upstream-drivers. The plugin keeps the RAM of
# the first two TMC stops and a truth that reaches back to the first read (the input after it,
# about 1.5 MiB, measured); the record's ring reaches back to it too (128 Mi entries: perf's run
# while the device file is open, cspd.devfile_perf=1, adds about 60 M blocks on CPU0 after the
# windows, which then end 85 M blocks before the record's end).
scenario_devfile-etf() {
	devfile_run devfile-etf tmc_etf0 2M $((128 << 20)) perf
}

# check_upstream.py --devfile fails with its own message on a copy of devfile-etf's run with one
# input altered: the RAM the plugin kept at the open's stop (one byte), a second reader that took,
# the close's restart missing from plugin.log, and one event of the truth inside the window the
# device file's read decodes to. (Its execution-record judge has its own self-test, in every run.)
# The judge passed on the unaltered run in devfile-etf (its output, check.txt, places the window).
scenario_harness-devfile() {
	devfile_negatives devfile-etf tmc_etf0 harness-devfile perf
}

# devfile_negatives SOURCE SINK NAME: harness-devfile's negatives on SOURCE's run (a devfile
# scenario reading SINK), in $RUNS/NAME.
devfile_negatives() {
	local src=$RUNS/$1 sink=$2 d=$RUNS/$3 perf=${4:-} c rc=0
	[ -f "$src/truth.json" ] && [ -f "$src/tmc.bin.1" ] && grep -q "^check_upstream: the kernel" "$src/check.txt" 2>/dev/null ||
		"scenario_$1" || return 1
	rm -rf "$d"
	mkdir -p "$d"
	local -a judge=(python3 "$REPO/scripts/check_upstream.py" --cpus "$SMP" --devfile --sink "$sink"
		--vmlinux "$CSPD_CACHE/build-mod/vmlinux" ${perf:+--devfile-perf})
	c=$d/held
	judge_copy "$src" "$c"
	printf '\x5a' | dd of="$c/tmc.bin.1" bs=1 seek=4096 conv=notrunc status=none
	judge_negative "one byte of the trace the plugin kept at the open's stop changed" \
		"are not what $sink held when the open stopped it" "${judge[@]}" --dir "$c" || rc=1
	c=$d/second
	judge_copy "$src" "$c"
	sed -i 's/devfile second reader: refused: .*/devfile second reader: took/' "$c/console.log"
	judge_negative "a second reader that took" "a second reader was not refused with EBUSY" \
		"${judge[@]}" --dir "$c" || rc=1
	c=$d/restart
	judge_copy "$src" "$c"
	python3 - "$c/plugin.log" <<'PY' || return 1
import re, sys
text = open(sys.argv[1]).read().split("\n")
stops = [i for i, l in enumerate(text) if re.search(r"tmc stopped: \d+ bytes held", l)]
if len(stops) < 2:
    sys.exit("plugin.log has fewer than two TMC stops")
del text[stops[-1]]
open(sys.argv[1], "w").write("\n".join(text))
PY
	judge_negative "the close's restart missing (one TMC stop)" "the close did not start it again" \
		"${judge[@]}" --dir "$c" || rc=1
	c=$d/truth
	judge_copy "$src" "$c"
	rm "$c/truth.json"
	python3 - "$src/truth.json" "$c/truth.json" "$src/check.txt" "$REPO/scripts" <<'PY' || return 1
import re, sys
sys.path.insert(0, sys.argv[4])
from truth_edit import Truth
m = re.search(r"device file, CPU(\d+): all (\d+) decoded events are a run of the truth, ending (\d+) events",
              open(sys.argv[3]).read())
if not m:
    sys.exit("the source run's judge did not place the device file's decode in the truth")
cpu, n, back = map(int, m.groups())
# The judge's list holds exceptions and branches from kernel code; one in the window's middle, the
# first of them from kernel to kernel code at or after it, takes a target 4 bytes further.
t = Truth(sys.argv[1])
seen, later_kernel = 0, None
for e in t.newest_first(cpu):
    branch = e.kind in ("taken", "waypoint")
    kernel = branch and e.kernel_from() and e.kernel_to()
    if e.kind == "exception" or (branch and e.kernel_from()):
        if seen == back + n // 2:
            k = e if kernel else later_kernel
            break
        seen += 1
    if kernel:
        later_kernel = e
else:
    sys.exit("the truth holds fewer events than the device file's window")
k.to += 4
t.write_with(sys.argv[2], k)
PY
	judge_negative "one event of the truth in the device file's window changed" \
		"differs from the truth where its newest event is" "${judge[@]}" --dir "$c" || rc=1
	[ -n "$perf" ] || return $rc
	c=$d/perf
	judge_copy "$src" "$c"
	python3 - "$c/devfile.disk" "$REPO/scripts" <<'PY' || return 1
import re, struct, sys
sys.path.insert(0, sys.argv[2])
import check_perf
# The first AUX record of the perf.data behind "CSPDPERF <bytes>" at 4 MiB: 0x4000 bytes, no flag.
with open(sys.argv[1], "r+b") as f:
    f.seek(4 << 20)
    n = int(re.match(rb"CSPDPERF (\d+)\n", f.readline(64)).group(1))
    base = f.tell()
    data = f.read(n)
    pos = next(p for p, t, _ in check_perf.records(data) if t == check_perf.PERF_RECORD_AUX)
    f.seek(base + pos + 16)
    f.write(struct.pack("<QQ", 0x4000, 0))
PY
	judge_negative "perf's AUX record not refused while the device file was open" \
		"while its device file was open: CPU" "${judge[@]}" --dir "$c" || rc=1
	return $rc
}

# devfile-etf's sequence with the ETR as the sink (cspd.sink=tmc_etr0; no tracedata region: a
# flat DMA buffer of buffer_size, 1 MiB): /dev/tmc_etr0 read during the session and after it, each
# decoding to the plugin's truth and to the execution record. The truth reaches back past the
# first read (up to 1 MiB) and the input after it.
scenario_devfile-etr() {
	CS_TMC=etr devfile_run devfile-etr tmc_etr0 4M $((128 << 20)) perf
}

# harness-devfile's negatives on devfile-etr's run.
scenario_harness-devfile-etr() {
	devfile_negatives devfile-etr tmc_etr0 harness-devfile-etr perf
}

# devfile-etf's sequence with the TMC configured as an ETB (the plugin's tmc=etb: DEVID's
# configuration type 0, the node etb@...; a sink only): /dev/tmc_etb0 read during the session and
# after it, each decoding to the plugin's truth and to the execution record.
scenario_devfile-etb() {
	CS_TMC=etb devfile_run devfile-etb tmc_etb0 2M $((64 << 20))
}

# harness-devfile's negatives on devfile-etb's run.
scenario_harness-devfile-etb() {
	devfile_negatives devfile-etb tmc_etb0 harness-devfile-etb
}

# upstream-drivers' sequence on the ETB (the upstream kernel): the C driver binds it as tmc_etb0,
# traces, and /dev/tmc_etb0 decodes to the plugin's ground truth; its listing as probed is what
# tmc-etb-sysfs-listing compares with ours.
scenario_upstream-etb() {
	local d=$RUNS/upstream-etb
	CS_TMC=etb sysfs_run "$d" upstream "cspd.sink=tmc_etb0" --cs-arg truth_bytes=256K &&
		python3 "$REPO/scripts/check_upstream.py" --dir "$d" --cpus "$SMP" --sink tmc_etb0 \
			--vmlinux "$CSPD_CACHE/build-upstream/vmlinux"
}

# Upstream's C ETR crash-data path on the same emulated ETR (the upstream kernel): the device tree's
# ETR has "tracedata" and "metadata" regions; the first boot traces into the reserved buffer
# (buf_mode_preferred resrv) with each ETM stopping at the panic path's entry, and panics; the C
# driver syncs the crash data; after the warm reboot it finds it valid and /dev/crash_tmc_etr0 is
# copied to the disk; a memory dump of that boot gives the kernel text. check_upstream.py --etr:
# the crash data is the plugin's buffer, and decodes to the ground truth on every CPU.
scenario_upstream-etr() {
	local d=$RUNS/upstream-etr dtb=$RUNS/upstream-etr.dtb
	mkdir -p "$RUNS"
	CS_TMC=etr CS_TRACEDATA=1 make_dtb "$dtb" none coresight ||
		{ echo "could not make the device tree" >&2; return 1; }
	rm -rf "$d"
	mkdir -p "$d"
	python3 "$REPO/scripts/qemu.py" warm --kernel "$(kernel_of upstream)" --initrd "$(initrd_of upstream)" \
		--append "$BASE_APPEND panic=1 cspd.upstream=etr" --workdir "$d" --vmcore "$d/crash.bin" \
		--coresight --cs-arg tmc=etr --cs-arg truth_bytes=2M --cs-arg "tmc_dump=$d/tmc.bin" --qemu-arg "-dtb $dtb" \
		--dump-at "CSPD: upstream: waiting for the host's memory dump" --second-vmcore "$d/vmcore.elf" \
		--panic-timeout 300 || return 1
	python3 "$REPO/scripts/check_upstream.py" --etr --dir "$d" --cpus "$SMP" \
		--vmlinux "$CSPD_CACHE/build-upstream/vmlinux"
}

# perf mode on the production drivers: the guest's perf (scripts/guest-perf.sh) records CPU-wide
# through tmc_etf0 while a workload runs on every CPU, and writes perf.data to a raw disk.
# check_perf.py decodes it with the host's perf (scripts/host-perf.sh) and judges each CPU's whole
# decoded window against the execution record and the plugin's truth; the AUX trace against what
# the ETF held, perf's trace IDs against what the ETMs were programmed with. The execution record
# stays for harness-perf, which removes it.
HOST_PERF=$CSPD_CACHE/perf-host/perf
check_perf() {
	local dir=$1 disk=$2
	shift 2
	[ -x "$HOST_PERF" ] || { echo "no host perf $HOST_PERF: run scripts/host-perf.sh" >&2; return 1; }
	python3 "$REPO/scripts/check_perf.py" --dir "$dir" --disk "$disk" --perf "$HOST_PERF" \
		--vmlinux "$CSPD_CACHE/build-mod/vmlinux" --modules-dir "$CSPD_CACHE/build-mod" --cpus "$SMP" "$@"
}

# Boots VARIANT with the kernel parameters APPEND (cspd.perf=MODE and what it needs) and a raw
# disk DISK for perf.data, into the run directory DIR (cs_qemu's environment applies), and requires
# the guest's perf to have recorded.
perf_boot() {
	local d=$1 disk=$2 variant=$3 append=$4
	mkdir -p "$RUNS"
	rm -f "$disk"
	truncate -s 64M "$disk" || return 1
	cs_qemu qemu-dump "$variant" "$d" "cspd.test=panic $append" \
		--qemu-arg "-drive file=$disk,format=raw,if=none,id=perf -device virtio-blk-pci,drive=perf" || return 1
	grep -q "CSPD: perf: record ok" "$d/console.log" || { echo "perf record failed in the guest" >&2; return 1; }
}

# check_perf on DIR and DISK with the options that follow, its findings kept in DIR/check-perf.txt.
judge_perf() {
	local d=$1 disk=$2
	shift 2
	check_perf "$d" "$disk" "$@" 2>&1 | tee "$d/check-perf.txt"
	[ "${PIPESTATUS[0]}" = 0 ]
}

scenario_perf-cpu-wide() {
	local d=$RUNS/perf-cpu-wide disk=$RUNS/perf-cpu-wide.disk
	perf_boot "$d" "$disk" mod "reserve_mem=4M:4096:coresight_dump cspd.insmod=$TRACE_MODS cspd.perf=cpu-wide" &&
		judge_perf "$d" "$disk"
}

# perf mode per thread, user space only: the guest's perf records /bin/cspd-loop (scripts/guest/
# cspd-loop.c: 1000 iterations calling step_a and step_b) under --per-thread with cs_etm/.../u, both
# pinned to CPU 1. check_perf.py --per-thread decodes it with the program's binary: its flow must
# be the program's, iteration count included, and match the execution record and the truth.
LOOP_BIN=$CSPD_CACHE/cspd-loop/cspd-loop
scenario_perf-per-thread() {
	local d=$RUNS/perf-per-thread disk=$RUNS/perf-per-thread.disk
	perf_boot "$d" "$disk" mod "reserve_mem=4M:4096:coresight_dump cspd.insmod=$TRACE_MODS cspd.perf=per-thread" &&
		judge_perf "$d" "$disk" --per-thread "$LOOP_BIN" --loops 1000
}

# perf's address filters on the production ETMv4 driver: the guest's perf records /bin/cspd-loop per
# thread, user space only, pinned to CPU 1 as perf-per-thread, with --filter: first a range
# (cspd.perf=filter-range: 'filter step_b @ /bin/cspd-loop'), then, in a second boot, a start and
# a stop (cspd.perf=filter-start-stop: 'start step_a @ /bin/cspd-loop, stop step_b @
# /bin/cspd-loop'; run directory perf-filter-start-stop). A boot each: the execution record's ring
# keeps the newest blocks, not two recordings with the perf processing between them.
# check_perf.py --filter-range / --filter-start-stop require the decode to be exactly what the
# filter lets through, as the ETM architecture defines it, of what the execution record says
# CPU 1 ran of the program, and its newest session the plugin's truth. The execution records stay
# for harness-perf-filter, which removes them.
FILTER_RANGE=step_b
FILTER_START=step_a
FILTER_STOP=step_b
# aux_tmc DIR: the file of DIR's run that check_perf.py compares the newest AUX record with: the
# ETF at its last stop (tmc.bin), or at its last stop that held trace (tmc.bin.held, when the
# stops after it held none).
aux_tmc() {
	if [ -f "$1/tmc.bin.held" ]; then echo "$1/tmc.bin.held"; else echo "$1/tmc.bin"; fi
}

scenario_perf-filter() {
	local mode d disk
	for mode in range start-stop; do
		d=$RUNS/perf-filter disk=$RUNS/perf-filter.disk
		[ $mode = range ] || d=$RUNS/perf-filter-start-stop disk=$RUNS/perf-filter-start-stop.disk
		mkdir -p "$RUNS"
		rm -f "$disk"
		truncate -s 64M "$disk" || return 1
		cs_qemu qemu-dump mod "$d" "cspd.test=panic reserve_mem=4M:4096:coresight_dump cspd.insmod=$TRACE_MODS cspd.perf=filter-$mode" \
			--qemu-arg "-drive file=$disk,format=raw,if=none,id=perf -device virtio-blk-pci,drive=perf" || return 1
		grep -q "CSPD: perf: record ok" "$d/console.log" ||
			{ grep "CSPD: perf: |" "$d/console.log" >&2; echo "perf record with the $mode filter failed in the guest" >&2; return 1; }
		if [ $mode = range ]; then
			set -- --filter-range "$FILTER_RANGE"
		else
			set -- --filter-start-stop "$FILTER_START" "$FILTER_STOP"
		fi
		check_perf "$d" "$disk" --per-thread "$LOOP_BIN" --loops 1000 "$@" 2>&1 | tee "$d/check-perf.txt"
		[ "${PIPESTATUS[0]}" = 0 ] || return 1
	done
}

# check_perf.py's filter judges must each fail with their own message on perf-filter's saved decode
# (perf script's output, --script) with one sample altered: (a) a branch sample from the first
# instruction past the range's upper bound added in the middle of the decode, (b) one entry into
# step_b (its trace start to its trace end) dropped, (c) one odd iteration's parity branch flipped
# (its taken branch and trace end replaced by an even iteration's trace end); and
# --filter-start-stop on perf-filter-start-stop's with (d) the trace going on past one stop point
# (step_b's branch and return after it). The unaltered decodes pass. The execution records
# perf-filter kept are removed at the end (unless CSPD_KEEP_EXEC is set).
scenario_harness-perf-filter() {
	local src=$RUNS/perf-filter ss=$RUNS/perf-filter-start-stop d=$RUNS/harness-perf-filter rc=0 out c
	[ -f "$src/exec.rec" ] && [ -f "$src/perf/perf-script.txt" ] && [ -f "$ss/exec.rec" ] &&
		[ -f "$ss/perf/perf-script.txt" ] || scenario_perf-filter || return 1
	rm -rf "$d"
	mkdir -p "$d"
	local -a range=(--per-thread "$LOOP_BIN" --loops 1000 --filter-range "$FILTER_RANGE")
	local -a startstop=(--per-thread "$LOOP_BIN" --loops 1000 --filter-start-stop "$FILTER_START" "$FILTER_STOP")
	judge_copy "$src" "$d/unaltered"
	check_perf "$d/unaltered" "$RUNS/perf-filter.disk" "${range[@]}" --script "$src/perf/perf-script.txt" \
		>"$d/unaltered.txt" 2>&1 ||
		{ tail -n 3 "$d/unaltered.txt"; echo "check_perf.py --filter-range fails on the unaltered copy" >&2; return 1; }
	judge_copy "$ss" "$d/unaltered-start-stop"
	check_perf "$d/unaltered-start-stop" "$RUNS/perf-filter-start-stop.disk" "${startstop[@]}" \
		--script "$ss/perf/perf-script.txt" >"$d/unaltered-start-stop.txt" 2>&1 ||
		{ tail -n 3 "$d/unaltered-start-stop.txt"; echo "check_perf.py --filter-start-stop fails on the unaltered copy" >&2; return 1; }
	for c in outside dropped parity; do
		judge_copy "$src" "$d/$c"
	done
	judge_copy "$ss" "$d/past-stop"
	out=$(python3 - "$src/perf/perf-script.txt" "$ss/perf/perf-script.txt" "$d" "$LOOP_BIN" "$FILTER_RANGE" \
		"$FILTER_STOP" "$REPO/scripts" <<'PY'
import sys
sys.path.insert(0, sys.argv[7])
import check_perf
lo, hi = check_perf.functions(sys.argv[4], (sys.argv[5],))[sys.argv[5]]
stop = check_perf.functions(sys.argv[4], (sys.argv[6],))[sys.argv[6]][0]


def load(path):
    lines = open(path).read().split("\n")
    return lines, [k for k, l in enumerate(lines) if check_perf.SAMPLE.match(l)]


def save(name, lines):
    path = f"{sys.argv[3]}/{name}/perf-script.txt"
    open(path, "w").write("\n".join(lines))
    return path


def sample(k, lines):
    m = check_perf.SAMPLE.match(lines[k])
    return m.group(2), int(m.group(3), 16), int(m.group(4), 16)


lines, idx = load(sys.argv[1])
starts = [i for i, k in enumerate(idx) if "tr strt" in lines[k]]
mid = starts[len(starts) // 2]
# (a) After the middle trace start: a branch from the instruction after the range's upper bound.
out = lines[:idx[mid] + 1] + [f"[001]   jcc   {hi + 4:x} =>   {hi + 8:x}"] + lines[idx[mid] + 1:]
path = save("outside", out)
print(f"perf's event {mid + 1} (branch {hi + 4:#x} -> {hi + 8:#x}, {path}:{idx[mid] + 2}) is outside the filter's range")
# (b) The middle entry, its trace start to its trace end, dropped.
end = next(i for i in range(mid, len(idx)) if "tr end" in lines[idx[i]])
save("dropped", lines[:idx[mid]] + lines[idx[end] + 1:])
print(f"perf's decode starts the trace {len(starts) - 1} times, the execution record enters the filter {len(starts)} "
      "times: an entry lost")
# (c) An odd iteration from the middle on (a taken branch after its trace start) as an even one:
# the branch and the trace end after it replaced by an even iteration's trace end.
even = next(sample(idx[i + 1], lines)[1] for i in starts if "tr end" in lines[idx[i + 1]])
odd = next(i for i in starts[len(starts) // 2:] if "tr" not in sample(idx[i + 1], lines)[0])
_, frm, to = sample(idx[odd + 1], lines)
flipped = lines[:idx[odd + 1]] + [f"[001]   tr end  return   {even:x} =>   0"] + lines[idx[odd + 2] + 1:]
path = save("parity", flipped)
print(f"perf's event {odd + 1} (trace end at {even:#x}, {path}:{idx[odd + 1] + 1}) is not what the filter lets "
      f"through of what CPU1 ran: the execution record has branch {frm:#x} -> {to:#x} there (in the filter's entry "
      f"{starts.index(odd) + 1} of {len(starts)})")
# (d) Start/stop: the middle stop's trace end replaced by step_b's branch and return after it.
lines, idx = load(sys.argv[2])
ends = [i for i, k in enumerate(idx) if "tr end" in lines[idx[i]] and sample(idx[i], lines)[1] == stop]
i = ends[len(ends) // 2]
past = lines[:idx[i]] + [f"[001]   jcc   {stop:x} =>   {stop + 0x18:x}", f"[001]   tr end  return   {stop + 0x28:x} =>   0"]
path = save("past-stop", past + lines[idx[i] + 1:])
print(f"perf's event {i} (branch {stop:#x} -> {stop + 0x18:#x}, {path}:{idx[i] + 1}) is not what the filter lets "
      f"through of what CPU1 ran: the execution record has trace end at {stop:#x} there")
PY
	) || return 1
	local -a msg
	mapfile -t msg <<<"$out"
	judge_negative "a sample one instruction past the range added" "${msg[0]}" \
		check_perf "$d/outside" "$RUNS/perf-filter.disk" "${range[@]}" --script "$d/outside/perf-script.txt" || rc=1
	judge_negative "one entry into $FILTER_RANGE dropped" "${msg[1]}" \
		check_perf "$d/dropped" "$RUNS/perf-filter.disk" "${range[@]}" --script "$d/dropped/perf-script.txt" || rc=1
	judge_negative "one parity branch flipped" "${msg[2]}" \
		check_perf "$d/parity" "$RUNS/perf-filter.disk" "${range[@]}" --script "$d/parity/perf-script.txt" || rc=1
	judge_negative "the trace going on past a stop point" "${msg[3]}" \
		check_perf "$d/past-stop" "$RUNS/perf-filter-start-stop.disk" "${startstop[@]}" \
		--script "$d/past-stop/perf-script.txt" || rc=1
	[ -n "${CSPD_KEEP_EXEC:-}" ] || rm -f "$src/exec.rec" "$ss/exec.rec"
	rm -rf "$d"/*/exec.rec
	return $rc
}

# perf's AUX pause on the production ETMv4 driver: the guest's perf records /bin/cspd-loop per
# thread, user space only, pinned to CPU 1 as perf-per-thread, in a group whose leader, the cs_etm
# event, starts paused (aux-action=start-paused); a hardware breakpoint at step_b's entry resumes
# it and one at each of step_b's two returns pauses it (cspd.perf=pause, cspd.perf_pause: the
# addresses, read here from the static binary). check_perf.py --pause-window requires the decode
# to be exactly what CPU 1 ran, by the execution record, from a resume up to (not including) the
# next pause: step_b without its return, 1000 times, each parity branch as executed; every pause
# drained through the sink into an AUX record of its own (and any stop of the unit while the thread
# was off its CPU, when the sink held trace), and the plugin to have seen the ETM stopped and
# enabled again each time. The execution record stays for harness-perf-pause.
pause_addrs() {
	local entry
	entry=$(llvm-nm-19 "$LOOP_BIN" | awk '$3 == "step_b" { print $1 }')
	[ -n "$entry" ] || { echo "no step_b in $LOOP_BIN" >&2; return 1; }
	printf '0x%x' "0x$entry"
	llvm-objdump-19 -d --disassemble-symbols=step_b "$LOOP_BIN" |
		awk '$NF == "ret" || $(NF) ~ /^ret$/ { sub(":", "", $1); printf ",0x%s", $1 }'
}
scenario_perf-pause() {
	local d=$RUNS/perf-pause disk=$RUNS/perf-pause.disk addrs
	local -a window
	addrs=$(pause_addrs) || return 1
	IFS=, read -ra window <<<"$addrs"
	[[ $addrs == *,*,* ]] || { echo "step_b's returns not found in $LOOP_BIN ($addrs)" >&2; return 1; }
	perf_boot "$d" "$disk" mod "reserve_mem=4M:4096:coresight_dump cspd.insmod=$TRACE_MODS cspd.perf=pause cspd.perf_pause=$addrs" ||
		{ grep "CSPD: perf: |" "$d/console.log" >&2; return 1; }
	judge_perf "$d" "$disk" --per-thread "$LOOP_BIN" --loops 1000 --pause-window "${window[@]}"
}

# check_perf.py --pause-window must fail with its own message on perf-pause's saved decode (perf
# script's output, --script) with one sample altered: (a) the middle resume's segments (its trace
# starts to its trace ends, up to the next resume) dropped, (b) an even iteration's exception
# moved from the instruction before step_b's return to the return itself (one instruction outside
# the window), (c) an odd iteration's parity branch flipped (its trace start after the taken
# parity branch and the exception that ends it replaced by an even iteration's). The unaltered
# decode passes. The execution record perf-pause kept is removed at the end (unless
# CSPD_KEEP_EXEC is set).
scenario_harness-perf-pause() {
	local src=$RUNS/perf-pause d=$RUNS/harness-perf-pause rc=0 out addrs c
	local -a window
	[ -f "$src/exec.rec" ] && [ -f "$src/perf/perf-script.txt" ] || scenario_perf-pause || return 1
	addrs=$(pause_addrs) || return 1
	IFS=, read -ra window <<<"$addrs"
	rm -rf "$d"
	mkdir -p "$d"
	local -a pause=(--per-thread "$LOOP_BIN" --loops 1000 --pause-window "${window[@]}")
	judge_copy "$src" "$d/unaltered"
	check_perf "$d/unaltered" "$RUNS/perf-pause.disk" "${pause[@]}" --script "$src/perf/perf-script.txt" \
		>"$d/unaltered.txt" 2>&1 ||
		{ tail -n 3 "$d/unaltered.txt"; echo "check_perf.py --pause-window fails on the unaltered copy" >&2; return 1; }
	for c in dropped outside parity; do
		judge_copy "$src" "$d/$c"
	done
	out=$(python3 - "$src/perf/perf-script.txt" "$d" "$REPO/scripts" "${window[@]}" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
import check_perf
resume = int(sys.argv[4], 0)
lines = open(sys.argv[1]).read().split("\n")
idx = [k for k, l in enumerate(lines) if check_perf.SAMPLE.match(l)]


def sample(i):
    m = check_perf.SAMPLE.match(lines[idx[i]])
    return m.group(2), int(m.group(3), 16), int(m.group(4), 16)


def save(name, out):
    path = f"{sys.argv[2]}/{name}/perf-script.txt"
    open(path, "w").write("\n".join(out))
    return path


starts = [i for i in range(len(idx)) if "tr strt" in sample(i)[0]]
resumes = [i for i in starts if sample(i)[2] == resume]
mid = resumes[len(resumes) // 2]
# (a) The middle resume's samples, up to the next resume, dropped: two trace starts fewer.
nxt = resumes[len(resumes) // 2 + 1]
save("dropped", lines[:idx[mid]] + lines[idx[nxt]:])
n = sum(1 for i in starts if mid <= i < nxt)
print(f"perf's decode starts the trace {len(starts) - n} times, the execution record enters the filter "
      f"{len(starts)} times: an entry lost")
# The iterations from the middle on: a resume's trace start, its exception, the trace start after
# the parity branch and the exception before the return.
later = [i for i in resumes if i > mid and i + 3 < len(idx) and "tr strt" in sample(i + 2)[0]]
even = next(i for i in later if sample(i + 2)[2] == resume + 4)
odd = next(i for i in later if sample(i + 2)[2] != resume + 4)
# (b) An even iteration's exception from the instruction before the return moved to the return.
_, frm, _ = sample(even + 3)
ret = frm + 4
out = list(lines)
out[idx[even + 3]] = f"[001]   tr end  int   {ret:x} =>   0"
path = save("outside", out)
print(f"perf's event {even + 3} (exception from {ret:#x}, {path}:{idx[even + 3] + 1}) is outside the pause window: "
      f"the execution record never runs {ret:#x} between a resume and a pause")
# (c) An odd iteration's trace start after the parity branch and the exception ending it, as an
# even iteration's.
out = list(lines)
out[idx[odd + 2]] = lines[idx[even + 2]]
out[idx[odd + 3]] = lines[idx[even + 3]]
path = save("parity", out)
_, _, was = sample(odd + 2)
entry = sum(1 for i in starts if i <= odd + 2)
print(f"perf's event {odd + 2} (trace start at {resume + 4:#x}, {path}:{idx[odd + 2] + 1}) is not what the filter "
      f"lets through of what CPU1 ran: the execution record has trace start at {was:#x} there (in the filter's "
      f"entry {entry} of {len(starts)})")
PY
	) || return 1
	local -a msg
	mapfile -t msg <<<"$out"
	judge_negative "one resume's segments dropped" "${msg[0]}" \
		check_perf "$d/dropped" "$RUNS/perf-pause.disk" "${pause[@]}" --script "$d/dropped/perf-script.txt" || rc=1
	judge_negative "one instruction outside the window added" "${msg[1]}" \
		check_perf "$d/outside" "$RUNS/perf-pause.disk" "${pause[@]}" --script "$d/outside/perf-script.txt" || rc=1
	judge_negative "one parity branch flipped" "${msg[2]}" \
		check_perf "$d/parity" "$RUNS/perf-pause.disk" "${pause[@]}" --script "$d/parity/perf-script.txt" || rc=1
	# The AUX records: one fewer than the pauses (perf.data's AUX records past those the thread's
	# time off its CPU accounts for each merged into the one before it: the same bytes, one record
	# fewer), and one drain of the ETF 16 bytes longer than the AUX record of it (plugin.log).
	judge_copy "$src" "$d/count"
	python3 - "$RUNS/perf-pause.disk" "$d/count/perf.disk" "$d/unaltered.txt" <<'PY' || return 1
import re, struct, sys
disk = bytearray(open(sys.argv[1], "rb").read())
m = re.search(r"AUX records, one per pause(?: and (\d+) for the thread's time off the CPU)?", open(sys.argv[3]).read())
if not m:
    sys.exit("the unaltered run's judge did not count its AUX records")
drop = int(m.group(1) or 0) + 1
base = disk.index(b"\n") + 1
_, _, off, size = struct.unpack_from("<QQQQ", disk, base + 24)
pos, end, prev = base + off, base + off + size, None
while pos < end and drop:
    typ, _misc, n = struct.unpack_from("<IHH", disk, pos)
    if typ == 11:  # PERF_RECORD_AUX (offset, size, flags): merged into the one before
        if prev is not None:
            size_prev, = struct.unpack_from("<Q", disk, prev + 16)
            size_this, = struct.unpack_from("<Q", disk, pos + 16)
            struct.pack_into("<Q", disk, prev + 16, size_prev + size_this)
            struct.pack_into("<I", disk, pos, 0x7ff0)  # a type nobody reads
            drop -= 1
        else:
            prev = pos
    pos += n
if drop:
    sys.exit("perf.data has too few AUX records to drop")
open(sys.argv[2], "wb").write(disk)
PY
	judge_negative "an AUX record fewer than the pauses" "PERF_RECORD_AUX, the execution record pauses the trace" \
		check_perf "$d/count" "$d/count/perf.disk" "${pause[@]}" --script "$src/perf/perf-script.txt" || rc=1
	judge_copy "$src" "$d/drain"
	python3 - "$d/drain/plugin.log" <<'PY' || return 1
import re, sys
text = open(sys.argv[1]).read()
m = re.search(r"tmc stopped: ([1-9]\d*) bytes held", text)
if not m:
    sys.exit("plugin.log has no drain of the ETF that held trace")
open(sys.argv[1], "w").write(text[:m.start(1)] + str(int(m.group(1)) + 16) + text[m.end(1):])
PY
	judge_negative "a drain of the ETF 16 bytes longer than its AUX record" "the AUX records are not the ETF's drains, in order" \
		check_perf "$d/drain" "$RUNS/perf-pause.disk" "${pause[@]}" --script "$src/perf/perf-script.txt" || rc=1
	[ -n "${CSPD_KEEP_EXEC:-}" ] || rm -f "$src/exec.rec"
	rm -rf "$d"/*/exec.rec
	return $rc
}

# check_perf.py's judges must each fail with their own message on a copy of perf-cpu-wide's run
# with one input altered: (a) the AUX data cut (perf.data without the newest 64 KiB of its AUXTRACE
# payload, the record and the data section shrunk to match); (b) one branch changed (perf script's
# saved output with one taken branch of a CPU, in the middle of its window, going one instruction
# further; each CPU in turn): the execution record must name that very event; (c) one event of a
# CPU's ground truth changed (each CPU in turn); (d) the trace ID the plugin saw an ETM programmed
# with (each CPU in turn); (e) one byte of what the ETF held (tmc.bin). The unaltered copy passes.
# Then on copies of perf-per-thread's run: (f) the program's last iteration taken out of the
# decode, (g) one branch outside the loop changed. The execution records perf-cpu-wide and
# perf-per-thread kept are removed at the end (unless CSPD_KEEP_EXEC is set).
scenario_harness-perf() {
	local src=$RUNS/perf-cpu-wide d=$RUNS/harness-perf rc=0 cpu c out line
	[ -f "$src/exec.rec" ] && [ -f "$src/perf/perf-script.txt" ] || scenario_perf-cpu-wide || return 1
	rm -rf "$d"
	mkdir -p "$d"
	local script=$src/perf/perf-script.txt
	judge_copy "$src" "$d/unaltered"
	check_perf "$d/unaltered" "$RUNS/perf-cpu-wide.disk" --script "$script" >"$d/unaltered.txt" 2>&1 ||
		{ tail -n 3 "$d/unaltered.txt"; echo "check_perf.py fails on the unaltered copy" >&2; return 1; }
	# (a) The AUX data cut.
	judge_copy "$src" "$d/cut"
	python3 - "$src/perf/perf.data" "$d/cut/perf.disk" <<'PY' || return 1
import struct, sys
data = bytearray(open(sys.argv[1], "rb").read())
data_off, data_size = struct.unpack_from("<QQ", data, 40)
pos, cut = data_off, 65536
while pos < data_off + data_size:
    typ, _, size = struct.unpack_from("<IHH", data, pos)
    if typ == 71:  # PERF_RECORD_AUXTRACE: its payload follows the record
        n, = struct.unpack_from("<Q", data, pos + 8)
        struct.pack_into("<Q", data, pos + 8, n - cut)
        del data[pos + size + n - cut:pos + size + n]
        struct.pack_into("<Q", data, 48, data_size - cut)
        # The feature sections after the data: their table's file offsets move too.
        table = data_off + data_size - cut
        for k in range(sum(bin(b).count("1") for b in data[72:104])):
            off, = struct.unpack_from("<Q", data, table + 16 * k)
            struct.pack_into("<Q", data, table + 16 * k, off - cut)
        break
    pos += size
else:
    sys.exit("perf.data has no AUXTRACE record")
with open(sys.argv[2], "wb") as f:
    f.write(b"CSPDPERF %d\n" % len(data) + bytes(data))
PY
	judge_negative "the AUX data cut by its newest 64 KiB" "the AUX data is cut: the kernel wrote" \
		check_perf "$d/cut" "$d/cut/perf.disk" --script "$script" || rc=1
	# (e) One byte of what the ETF held.
	judge_copy "$src" "$d/tmc"
	printf '\x5a' | dd of="$(aux_tmc "$d/tmc")" bs=1 seek=4096 conv=notrunc status=none
	judge_negative "one byte of tmc.bin changed" "the AUX data differs from what the ETF held (tmc.bin" \
		check_perf "$d/tmc" "$RUNS/perf-cpu-wide.disk" --script "$script" || rc=1
	for ((cpu = 0; cpu < SMP; cpu++)); do
		# (d) The trace ID the plugin saw CPU$cpu's ETM programmed with.
		c=$d/trace-id-cpu$cpu
		judge_copy "$src" "$c"
		line=$(grep -o "etm $cpu: enabled, trace id 0x[0-9a-f]*" "$c/plugin.log" | head -n 1)
		[ -n "$line" ] || { echo "plugin.log has no enable of etm $cpu" >&2; return 1; }
		local id=${line##* } other
		other=$(printf '%#x' $((id + 1)))
		sed -i "s/etm $cpu: enabled, trace id $id/etm $cpu: enabled, trace id $other/" "$c/plugin.log"
		judge_negative "CPU$cpu's trace ID changed in plugin.log" \
			"CPU$cpu: perf reports trace ID $id, the plugin saw the ETM programmed with $other" \
			check_perf "$c" "$RUNS/perf-cpu-wide.disk" --script "$script" || rc=1
		# (b) One branch changed: the execution record must name that event.
		c=$d/branch-cpu$cpu
		judge_copy "$src" "$c"
		out=$(python3 - "$script" "$c/perf-script.txt" "$cpu" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().split("\n")
cpu = int(sys.argv[3])
mine = [(k, l) for k, l in enumerate(lines) if l.startswith(f"[{cpu:03d}]") and "tr strt" not in l]
# A direct call or jump in the middle of the window: its target one instruction further.
i = next(i for i in range(len(mine) // 2, len(mine)) if re.match(r"\[\d+\]\s+(call|jmp)\s", mine[i][1]))
k, l = mine[i]
m = re.match(r"(.*\s)([0-9a-f]+) =>\s+([0-9a-f]+)$", l)
lines[k] = f"{m.group(1)}{m.group(2)} => {int(m.group(3), 16) + 4:016x}"
open(sys.argv[2], "w").write("\n".join(lines))
print(f"perf's event {i} (branch {int(m.group(2), 16):#x} -> {int(m.group(3), 16) + 4:#x}) is not what the CPU did")
PY
		) || return 1
		judge_negative "one branch of CPU$cpu's decode changed" "CPU$cpu: $out" \
			check_perf "$c" "$RUNS/perf-cpu-wide.disk" --script "$c/perf-script.txt" || rc=1
		# (c) One event of CPU$cpu's ground truth changed.
		c=$d/truth-cpu$cpu
		judge_copy "$src" "$c"
		rm -f "$c/truth.json"
		out=$(python3 - "$src/truth.json" "$c/truth.json" "$cpu" "$script" "$REPO/scripts" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[5])
import check_perf
t = json.load(open(sys.argv[1]))
cpu = int(sys.argv[3])
tc = next(c for c in t["cpus"] if c["cpu"] == cpu)
n = sum(1 for l in open(sys.argv[4]) if l.startswith(f"[{cpu:03d}]") and "tr strt" not in l)
before, _, _ = check_perf.truth_events(tc)
# A kernel branch of the truth in the middle of the decoded window: its target 4 bytes further.
ev = tc["events"]
kernel = [j for j, e in enumerate(ev) if e["kind"] == "taken" and int(e["from"], 16) >> 48 == 0xFFFF
          and int(e["to"], 16) >> 48 == 0xFFFF]
j = kernel[len(kernel) - n // 2]
ev[j] = dict(ev[j], to=hex(int(ev[j]["to"], 16) + 4))
after, _, _ = check_perf.truth_events(tc)
i = next(i for i in range(n) if before[-n + i] != after[-n + i])
with open(sys.argv[2], "w") as f:
    f.write(json.dumps(t))
print(f"CPU{cpu}: perf's event {i} of {n} differs from the plugin's ground truth")
PY
		) || return 1
		judge_negative "one event of CPU$cpu's ground truth changed" "$out" \
			check_perf "$c" "$RUNS/perf-cpu-wide.disk" --script "$script" || rc=1
	done
	# Per thread: (f) the decode one iteration short (the program's last iteration taken out of perf
	# script's output): the program's flow must miss it; (g) one branch outside the loop changed
	# (in the middle of the decode): the execution record must name that event.
	local pt=$RUNS/perf-per-thread
	[ -f "$pt/exec.rec" ] && [ -f "$pt/perf/perf-script.txt" ] || scenario_perf-per-thread || return 1
	for c in short branch; do
		judge_copy "$pt" "$d/per-thread-$c"
	done
	out=$(python3 - "$pt/perf/perf-script.txt" "$d/per-thread" "$LOOP_BIN" "$REPO/scripts" <<'PY'
import re, sys
sys.path.insert(0, sys.argv[4])
import check_perf
fn = check_perf.functions(sys.argv[3], ("run", "step_a", "step_b"))
loop = lambda x: any(a <= x < b for a, b in fn.values())
lines = open(sys.argv[1]).read().split("\n")
samples = [(k, m) for k, l in enumerate(lines) if (m := check_perf.SAMPLE.match(l)) and "tr strt" not in l]
# (f) The last call of step_a and everything of the loop after it.
last_a = max(k for k, m in samples if int(m.group(4), 16) == fn["step_a"][0])
short = [l for k, l in enumerate(lines)
         if k < last_a or not ((m := check_perf.SAMPLE.match(l)) and loop(int(m.group(3), 16)))]
open(sys.argv[2] + "-short/perf-script.txt", "w").write("\n".join(short))
# (g) A direct call or jump outside the loop, in the middle of the decode: one instruction further.
# (A "tr end" sample and the "tr strt" after it are one event of check_perf.py: an exception.)
events = samples
i = next(i for i in range(len(events) // 2, len(events))
         if re.match(r"(call|jmp)$", events[i][1].group(2)) and not loop(int(events[i][1].group(3), 16)))
k, m = events[i]
frm, to = int(m.group(3), 16), int(m.group(4), 16) + 4
lines[k] = f"[{m.group(1)}]   {m.group(2)}   {frm:x} => {to:x}"
open(sys.argv[2] + "-branch/perf-script.txt", "w").write("\n".join(lines))
print(f"perf's event {i} (branch {frm:#x} -> {to:#x}) is not what the CPU did")
PY
	) || return 1
	judge_negative "the per-thread decode one iteration short" \
		"cspd-loop: iteration 999: the decode has the end of the decode where the program makes the call of step_a" \
		check_perf "$d/per-thread-short" "$RUNS/perf-per-thread.disk" --per-thread "$LOOP_BIN" --loops 1000 \
		--script "$d/per-thread-short/perf-script.txt" || rc=1
	judge_negative "one branch of the per-thread decode changed" "$out" \
		check_perf "$d/per-thread-branch" "$RUNS/perf-per-thread.disk" --per-thread "$LOOP_BIN" --loops 1000 \
		--script "$d/per-thread-branch/perf-script.txt" || rc=1
	[ -n "${CSPD_KEEP_EXEC:-}" ] || rm -f "$src/exec.rec" "$pt/exec.rec"
	rm -rf "$d"/*/exec.rec
	return $rc
}

# perf's snapshot mode on the ETF (cspd.perf=snapshot): the guest's perf records CPU-wide with
# --snapshot=e while a workload runs on every CPU; it takes two snapshots on SIGUSR2 and one at its
# exit (SIGINT), each taken while every CPU reads a marker (scripts/guest/init). check_perf.py
# --snapshot judges each snapshot's whole window in the host perf's decode against the execution
# record, tells them apart by the marker's kernel function, and the newest against the plugin's
# truth and what the ETF held. The execution record stays for harness-perf-snapshot, which removes it.
SNAPSHOT_MARKERS=version_proc_show,loadavg_proc_show,cmdline_proc_show
# The oldest snapshot's window ends 12 to 15.5 million blocks before the end of a run on a CPU:
# the execution record's ring is 32 Mi entries long here, not 16 Mi.
SNAPSHOT_EXEC_ENTRIES=$((32 << 20))

scenario_perf-snapshot() {
	local d=$RUNS/perf-snapshot disk=$RUNS/perf-snapshot.disk
	CS_EXEC_ENTRIES=$SNAPSHOT_EXEC_ENTRIES perf_boot "$d" "$disk" mod "reserve_mem=4M:4096:coresight_dump cspd.insmod=$TRACE_MODS cspd.perf=snapshot" &&
		judge_perf "$d" "$disk" --snapshot "$SNAPSHOT_MARKERS"
}

# A panic while perf owns the trace session (cspd.perf=panic): the guest's perf record --snapshot
# -a through tmc_etf0 records (every ETM enabled by perf, none through sysfs), and the sysrq panic
# follows. The dump is judged as a sysfs session's (check_trace, the sysrq hardware stop, the ground
# truth, the execution record), with --perf-session in place of sysfs's enables.
scenario_perf-panic() {
	local d=$RUNS/perf-panic
	cs_qemu qemu-dump mod "$d" "cspd.test=panic reserve_mem=4M:4096:coresight_dump cspd.insmod=$TRACE_MODS cspd.modparm_coresight_cpu_debug=debug=1 cspd.perf=panic" ||
		return 1
	grep -q "CSPD: perf: recording" "$d/console.log" || { echo "perf did not record in the guest" >&2; return 1; }
	check_trace "$d" mod --perf-session
}

# check_perf.py --snapshot must fail with its own message on a copy of perf-snapshot's run with one
# input altered (the unaltered copy passes): (a) snapshots 1 and 2 swapped (their AUXTRACE payloads
# exchanged: each decodes, but to the other's marker); (b) the newest snapshot without its newest
# 64 KiB (the record and the data section shrunk to match); (c) one branch of snapshot 1's decode
# changed (perf script's saved output, one direct call or jump in the middle of CPU0's window of
# snapshot 1 going one instruction further): the execution record must name that very event, in
# the oldest snapshot, which no truth covers; (a') snapshot 1 judged with a marker no CPU ran; (d) a
# second start of CPU1's trace in the middle of a snapshot (a discontinuity); (e) CPU0's first trace end perf shows between two snapshots one
# instruction further (the record's block after that window ends elsewhere). check_trace.py
# --perf-session must fail on a copy of perf-panic's run (f) with an ETM read as enabled through
# sysfs while perf recorded, (g) with a second enable of CPU0's ETM in plugin.log; and (h) without
# --perf-session, on the sysfs enables the run did not make. The execution record perf-snapshot
# kept is removed at the end (unless CSPD_KEEP_EXEC is set).
scenario_harness-perf-snapshot() {
	local src=$RUNS/perf-snapshot d=$RUNS/harness-perf-snapshot rc=0 out
	[ -f "$src/exec.rec" ] && [ -f "$src/perf/perf-script.txt" ] || scenario_perf-snapshot || return 1
	rm -rf "$d"
	mkdir -p "$d"
	judge_copy "$src" "$d/unaltered"
	check_perf "$d/unaltered" "$RUNS/perf-snapshot.disk" --snapshot "$SNAPSHOT_MARKERS" \
		--script "$src/perf/perf-script.txt" >"$d/unaltered.txt" 2>&1 ||
		{ tail -n 3 "$d/unaltered.txt"; echo "check_perf.py --snapshot fails on the unaltered copy" >&2; return 1; }
	# (a) Snapshots 1 and 2 swapped; (b) the newest one cut.
	judge_copy "$src" "$d/swapped"
	judge_copy "$src" "$d/cut"
	python3 - "$src/perf/perf.data" "$d" "$REPO/scripts" <<'PY' || return 1
import struct, sys
sys.path.insert(0, sys.argv[3])
import check_perf
data = open(sys.argv[1], "rb").read()
snaps = check_perf.snapshots(data, 3)
one, two = (s["trace"] for s in snaps[:2])
if len(one["bytes"]) != len(two["bytes"]):
    sys.exit(f"snapshots 1 and 2 hold {len(one['bytes'])} and {len(two['bytes'])} bytes: cannot swap them in place")
swapped = bytearray(data)
for a, b in ((one, two), (two, one)):
    at = a["pos"] + struct.unpack_from("<H", data, a["pos"] + 6)[0]
    swapped[at:at + len(a["bytes"])] = b["bytes"]
last, cut = snaps[-1]["trace"], 65536
size = struct.unpack_from("<H", data, last["pos"] + 6)[0]
end = last["pos"] + size + len(last["bytes"])
short = bytearray(data)
struct.pack_into("<Q", short, last["pos"] + 8, len(last["bytes"]) - cut)
del short[end - cut:end]
data_off, data_size = struct.unpack_from("<QQ", data, 40)
struct.pack_into("<Q", short, 48, data_size - cut)
table = data_off + data_size - cut
for k in range(sum(bin(b).count("1") for b in data[72:104])):
    off, = struct.unpack_from("<Q", short, table + 16 * k)
    struct.pack_into("<Q", short, table + 16 * k, off - cut)
for name, x in (("swapped", swapped), ("cut", short)):
    with open(f"{sys.argv[2]}/{name}/perf.disk", "wb") as f:
        f.write(b"CSPDPERF %d\n" % len(x) + bytes(x))
PY
	local fn1=${SNAPSHOT_MARKERS%%,*} fn2
	fn2=${SNAPSHOT_MARKERS#*,}
	fn2=${fn2%%,*}
	judge_negative "snapshots 1 and 2 swapped" \
		"snapshot 1: CPU0's decode calls $fn2" \
		check_perf "$d/swapped" "$d/swapped/perf.disk" --snapshot "$SNAPSHOT_MARKERS" || rc=1
	judge_copy "$src" "$d/nomarker"
	judge_negative "snapshot 1 judged with a marker no CPU ran" \
		"snapshot 1: no CPU's decode calls sysrq_handle_crash" \
		check_perf "$d/nomarker" "$RUNS/perf-snapshot.disk" --snapshot "sysrq_handle_crash,${SNAPSHOT_MARKERS#*,}" \
		--script "$src/perf/perf-script.txt" || rc=1
	judge_negative "the newest snapshot cut by its newest 64 KiB" "the AUX data is cut: snapshot 3: the kernel wrote" \
		check_perf "$d/cut" "$d/cut/perf.disk" --snapshot "$SNAPSHOT_MARKERS" || rc=1
	# (c) One branch of snapshot 1's decode changed.
	judge_copy "$src" "$d/branch"
	out=$(python3 - "$src/perf/perf.data" "$src/perf/perf-script.txt" "$d/branch/perf-script.txt" "$REPO/scripts" <<'PY'
import re, sys
sys.path.insert(0, sys.argv[4])
import check_perf
snaps = check_perf.snapshots(open(sys.argv[1], "rb").read(), 3)
# CPU0's trace starts once per snapshot, the AUX buffers in CPU order, each buffer's snapshots in
# the order written: snapshot 1's part is CPU0's trace start number `seg`.
order = [k for q in sorted({x["cpu"] for x in snaps}) for k, x in enumerate(snaps) if x["cpu"] == q]
seg = order.index(0)
lines = open(sys.argv[2]).read().split("\n")
starts = [k for k, l in enumerate(lines) if l.startswith("[000]") and "tr strt" in l]
end = starts[seg + 1] if seg + 1 < len(starts) else len(lines)
mine = [(k, l) for k, l in enumerate(lines[:end]) if k > starts[seg] and l.startswith("[000]") and "tr end" not in l]
# A direct call or jump in the middle of CPU0's window: its target one instruction further.
i = next(i for i in range(len(mine) // 2, len(mine)) if re.match(r"\[\d+\]\s+(call|jmp)\s", mine[i][1]))
k, l = mine[i]
m = re.match(r"(.*\s)([0-9a-f]+) =>\s+([0-9a-f]+)$", l)
lines[k] = f"{m.group(1)}{m.group(2)} => {int(m.group(3), 16) + 4:016x}"
open(sys.argv[3], "w").write("\n".join(lines))
print(f"snapshot 1: CPU0: perf's event {i} (branch {int(m.group(2), 16):#x} -> {int(m.group(3), 16) + 4:#x}) is not what the CPU did")
PY
	) || return 1
	judge_negative "one branch of snapshot 1's decode changed" "$out" \
		check_perf "$d/branch" "$RUNS/perf-snapshot.disk" --snapshot "$SNAPSHOT_MARKERS" --script "$d/branch/perf-script.txt" || rc=1
	# (d) A second start of CPU1's trace in the middle of a snapshot; (e) CPU0's first trace end
	# between two snapshots one instruction further.
	judge_copy "$src" "$d/restart"
	judge_copy "$src" "$d/trace-end"
	out=$(python3 - "$src/perf/perf-script.txt" "$d" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().split("\n")
cpu1 = [k for k, l in enumerate(lines) if l.startswith("[001]") and "tr strt" in l]
k = next(k for k in range(cpu1[1] + 100, len(lines)) if lines[k].startswith("[001]"))
to = re.search(r"=>\s+([0-9a-f]+)$", lines[k]).group(1)
restart = lines[:k + 1] + [f"[001]   tr strt jmp                           0 => {to}"] + lines[k + 1:]
open(sys.argv[2] + "/restart/perf-script.txt", "w").write("\n".join(restart))
k = next(k for k, l in enumerate(lines) if l.startswith("[000]") and "tr end" in l)
m = re.match(r"(.*\s)([0-9a-f]+)( =>\s+0)$", lines[k])
lines[k] = f"{m.group(1)}{int(m.group(2), 16) + 4:x}{m.group(3)}"
open(sys.argv[2] + "/trace-end/perf-script.txt", "w").write("\n".join(lines))
kind = lines[k].split("tr end")[1].split()[0]
print(f"CPU0: perf's decode ends the snapshot's trace with a {kind} at {int(m.group(2), 16) + 4:#x}, but the record runs block")
PY
	) || return 1
	judge_negative "a second start of CPU1's trace in a snapshot" "CPU1: perf's decode starts the trace again at" \
		check_perf "$d/restart" "$RUNS/perf-snapshot.disk" --snapshot "$SNAPSHOT_MARKERS" --script "$d/restart/perf-script.txt" || rc=1
	judge_negative "the trace end between two snapshots one instruction further" "$out" \
		check_perf "$d/trace-end" "$RUNS/perf-snapshot.disk" --snapshot "$SNAPSHOT_MARKERS" --script "$d/trace-end/perf-script.txt" || rc=1
	# (f), (g), (h): perf-panic's session.
	local pp=$RUNS/perf-panic
	[ -f "$pp/ground/report.json" ] || scenario_perf-panic || return 1
	judge_copy "$pp" "$d/panic-sysfs"
	sed -i 's/\(CSPD: perf: sysfs while perf records:[^[]* etm1 enable_source=\)0/\11/g' "$d/panic-sysfs/console.log"
	judge_negative "an ETM read as enabled through sysfs while perf recorded" \
		"while perf recorded, sysfs read {'tmc_etf0/enable_sink': '0', 'etm0/enable_source': '0', 'etm1/enable_source': '1'}" \
		check_trace "$d/panic-sysfs" mod --perf-session || rc=1
	judge_copy "$pp" "$d/panic-enables"
	sed -i '0,/qemu-coresight: etm 0: enabled/{s/^\(qemu-coresight: etm 0: enabled.*\)$/\1\n\1/}' "$d/panic-enables/plugin.log"
	judge_negative "a second enable of CPU0's ETM" "the plugin saw the ETMs enabled {0: 2, 1: 1} times" \
		check_trace "$d/panic-enables" mod --perf-session || rc=1
	judge_copy "$pp" "$d/panic-sysfs-took"
	sed -i 's/\(CSPD: perf: sysfs enable_source etm1 while perf records: \).*/\1took/' "$d/panic-sysfs-took/console.log"
	judge_negative "a sysfs session on etm1 taken while perf recorded" \
		"a sysfs session on etm1 while perf recorded was not refused with EBUSY: took" \
		check_trace "$d/panic-sysfs-took" mod --perf-session || rc=1
	judge_copy "$pp" "$d/panic-no-flag"
	judge_negative "perf-panic's run judged as a sysfs session" "enable_sink on tmc_etf0 did not take" \
		check_trace "$d/panic-no-flag" mod || rc=1
	[ -n "${CSPD_KEEP_EXEC:-}" ] || rm -f "$src/exec.rec"
	rm -rf "$d"/*/exec.rec
	return $rc
}

# Harness self-tests: each runs a broken setup and passes only if the check above catches it with
# its own message (expect_message).

# Unload after tracing: CPU 1's ETM unbound from its driver while it traces (its registration
# disables it first), the other sources stopped through sysfs, then rmmod of the ETM, TMC and CPU
# debug modules. Their CoreSight devices and dump registrations go away cleanly (no oops, no
# warning), and the panic that follows dumps without them.
scenario_trace-unload() {
	local d=$RUNS/trace-unload
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_APPEND cspd.insmod=$TRACE_MODS \
cspd.unbind=coresight-etm4x/7ff11000.etm cspd.rmmod=coresight_etm4x,coresight_tmc,coresight_cpu_debug" || return 1
	grep -qaE "CSPD: unbound coresight-etm4x/7ff11000.etm; coresight devices: etm0 funnel0 tmc_etf0[[:space:]]*$" \
		"$d/console.log" ||
		{ echo "unbinding the tracing etm1 did not disable and remove it" >&2; return 1; }
	grep -qa "qemu-coresight: etm 1: stopped" "$d/plugin.log" ||
		{ echo "the emulated ETM of CPU 1 was not stopped by the unbind" >&2; return 1; }
	local m
	for m in coresight_etm4x coresight_tmc coresight_cpu_debug; do
		grep -q "CSPD: removed $m" "$d/console.log" || { echo "rmmod $m failed" >&2; return 1; }
	done
	grep -qaE "CSPD: after rmmod, coresight devices: funnel0[[:space:]]*$" "$d/console.log" ||
		{ echo "CoreSight devices left after rmmod: $(grep -a 'after rmmod' "$d/console.log")" >&2; return 1; }
	if grep -aE "Unable to handle|BUG:|WARNING:|Oops|refcount_t" "$d/console.log"; then
		echo "the kernel complained while unloading" >&2
		return 1
	fi
	# The kdump policy is the user's: registering and removing trace drivers leaves it alone.
	grep -q "CSPD: crash_kexec_post_notifiers: N" "$d/console.log" &&
		grep -q "CSPD: after rmmod, crash_kexec_post_notifiers: N" "$d/console.log" ||
		{ echo "crash_kexec_post_notifiers changed although the user did not change it" >&2; return 1; }
	"$CSDUMP" extract "$d/vmcore.elf" -o "$d/extract" >"$d/csdump.txt" 2>&1 || { cat "$d/csdump.txt"; return 1; }
	python3 - "$d/extract/summary.json" <<'PY' || return 1
import json, sys
kinds = [r["kind"] for r in json.load(open(sys.argv[1]))["records"]]
assert kinds == ["identity", "panic-info", "phases", "modules"], kinds
print("after unload the dump holds only the core's records:", kinds)
PY
	# The unloaded modules left the module list: their old addresses name nothing.
	check_modules "$d" mod --expect-absent coresight_etm4x,coresight_tmc,coresight_cpu_debug
}

# The independent judge catches what the ground truth cannot: the plugin's tracker makes a
# mistake on purpose (fault=tracker-*: every 2nd interrupt traced returning 4 bytes too far,
# every 1024th indirect branch traced as an exception, every 4096th untaken conditional branch at
# a block's end traced as taken), in the trace and in truth.json alike. check_exec.py must fail naming the CPU and the
# event (for the first two, an event the plugin logged as planted; the third derails the decode
# until the next address packet, so check_exec may name any event of that stretch).
# check_trace.py's verdict is printed, not required: the truth agrees with the trace on each
# planted event, but over the whole window the decode may part from the truth after one (an
# exception returning 4 bytes too far skips a branch the truth has), which it then names.
scenario_harness-exec-record() {
	local f d out want
	for f in tracker-elr-off tracker-indirect-as-exception tracker-cond-misread; do
		d=$RUNS/harness-exec-record/$f
		cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND" --cs-arg "fault=$f" || return 1
		grep -q "tracker fault planted: ${f#tracker-}" "$d/plugin.log" ||
			{ echo "$f: the plugin planted no mistake" >&2; return 1; }
		if python3 "$REPO/scripts/check_exec.py" --dir "$d" --vmcore "$d/vmcore.elf" --csdump "$CSDUMP" \
			--vmlinux "$CSPD_CACHE/build-mod/vmlinux" >"$d/check-exec.txt" 2>&1; then
			echo "$f: check_exec.py passed a trace with the tracker's planted mistakes" >&2
			return 1
		fi
		out=$(grep "check_exec: FAIL" "$d/check-exec.txt")
		case $f in
		# (An interrupt from user space returning too far shows where csdump lost the flow.)
		tracker-elr-off) [[ $out == *"lost the flow at"* ]] && want="lost the flow at" || want="returns to" ;;
		tracker-indirect-as-exception) want="which is not an exception vector" ;;
		# A misread branch derails the decode up to the next address packet: the judge fails
		# wherever the derailed events are, in the window or at its end.
		*) want="" ;;
		esac
		[[ $out == *"check_exec: FAIL: CPU"*"$want"* ]] ||
			{ echo "$f: check_exec.py failed for another reason: $out" >&2; return 1; }
		echo "$f: ${out#*FAIL: }" | cut -c1-300
		# The first two keep the decode in step: the event named is one the plugin planted.
		if [ "$f" != tracker-cond-misread ]; then
			local a=${out#*"$want" }
			[ "$f" = tracker-indirect-as-exception ] && a=${out#*enters }
			a=${a%%[ ,]*}
			# (One grep: under pipefail, `grep | grep -q` fails when -q stops reading early.)
			grep -q "tracker fault planted: ${f#tracker-}.*$a" "$d/plugin.log" ||
				{ echo "$f: the event check_exec.py names ($a) is not one the plugin planted" >&2; return 1; }
		fi
		if python3 "$REPO/scripts/check_trace.py" --dir "$d" --csdump "$CSDUMP" \
			--vmlinux "$CSPD_CACHE/build-mod/vmlinux" --cpus "$SMP" "${SYSRQ_STOP[@]}" >"$d/check.txt" 2>&1; then
			echo "$f: check_trace.py (truth.json) passes"
		else
			echo "$f: check_trace.py (truth.json) fails later in the window: $(grep FAIL "$d/check.txt" | cut -c1-200)"
		fi
		rm -f "$d/exec.rec"
	done
}

# The ground-truth comparison must fail when the decoded list differs from the truth by one event:
# on trace-builtin's files, check_trace.py --compare-only passes on the decoded report that check
# saved (ground/report.json), and fails, naming that CPU and the difference, on copies where one
# CPU's list (each CPU in turn) has one event dropped, one added, one changed (in the oldest tenth
# of the window as well as near its end), and its last branch's target dropped.
scenario_harness-trace-ground-truth() {
	local src=$RUNS/trace-builtin d=$RUNS/harness-trace-ground-truth rc=0 f out want
	[ -f "$src/ground/report.json" ] || scenario_trace-builtin || return 1
	rm -rf "$d"
	mkdir -p "$d"
	python3 - "$src/ground/report.json" "$d" <<'PY' || return 1
import json, os, sys
rep = json.load(open(sys.argv[1]))
def kernel(b):
    return b["kind"] != "target" and b["from"] and int(b["from"]["addr"], 16) >= 0xFFFF << 48
def key(e):
    return (e["kind"], e["from"] and e["from"]["addr"], e["to"] and e["to"]["addr"])
def lone(b, i):
    # Not in a run of equal events: dropping it, or adding an event unlike it next to it, is a
    # change of the flow, not a window one event longer or shorter (a CPU that polls runs the
    # same branch thousands of times).
    return 0 < i < len(b) - 6 and kernel(b[i]) and key(b[i]) not in (key(b[i - 1]), key(b[i + 1])) \
        and key(b[i + 5]) not in (key(b[i - 1]), key(b[i]))
def altered(c, what, fn):
    # A report of that CPU alone (the comparison takes the CPUs the report has), its list a
    # shallow copy: an altered event is replaced by an altered copy, the original stays as it is.
    b = list(c["branches"])
    fn(b, lambda at: next(i for i in range(at, len(b)) if lone(b, i)))
    r = dict(rep, cpus=[dict(c, branches=b)])
    # json.dumps: json.dump encodes in pure Python, several times slower.
    with open(os.path.join(sys.argv[2], f"cpu{c['cpu']}-{what}.json"), "w") as fh:
        fh.write(json.dumps(r))
def change(b, i):
    b[i] = dict(b[i], to=dict(b[i]["to"], addr=hex(int(b[i]["to"]["addr"], 16) + 4)))
for c in rep["cpus"]:
    cpu, n = c["cpu"], len(c["branches"])
    if n < 100:
        sys.exit(f"CPU{cpu}: only {n} decoded branches in {sys.argv[1]}")
    altered(c, "dropped-old", lambda b, k: b.pop(k(n // 20)))
    altered(c, "added-old", lambda b, k: b.insert(k(n // 20), dict(b[k(n // 20) + 5])))
    altered(c, "changed-old", lambda b, k: change(b, k(n // 10)))
    altered(c, "dropped", lambda b, k: b.pop(k(n - 20)))
    altered(c, "changed", lambda b, k: change(b, k(n - 30)))
    altered(c, "last", lambda b, k: b.__setitem__(-1, dict(b[-1], to=None)))
PY
	local -a cmp=(python3 "$REPO/scripts/check_trace.py" --dir "$src" --csdump "$CSDUMP"
		--vmlinux "$CSPD_CACHE/build-builtin/vmlinux" --cpus "$SMP" --compare-only --no-el0)
	"${cmp[@]}" --decoded "$src/ground/report.json" >"$d/unaltered.txt" 2>&1 ||
		{ cat "$d/unaltered.txt"; echo "the comparison fails on the unaltered decoded report" >&2; return 1; }
	# Every alteration in one run (the truth is read once); each report's verdict is on its own line.
	local -a altered=("$d"/cpu*.json) args=()
	for f in "${altered[@]}"; do args+=(--decoded "$f"); done
	if "${cmp[@]}" "${args[@]}" >"$d/verdicts.txt" 2>&1; then
		cat "$d/verdicts.txt"
		echo "the comparison passed every altered report" >&2
		return 1
	fi
	for f in "${altered[@]}"; do
		want="FAIL: CPU$(basename "$f" | sed 's/^cpu\([0-9]*\)-.*/\1/'): decoded event"
		out=$(grep -F "check_trace: $f: " "$d/verdicts.txt" || true)
		if [ -z "$out" ]; then
			echo "$(basename "$f" .json): no verdict from the comparison: $(tail -n 2 "$d/verdicts.txt")" >&2
			rc=1
		elif [[ $out == *": ok" ]]; then
			echo "harness did not detect: $(basename "$f" .json)" >&2
			rc=1
		elif [[ $out != *"$want"* ]]; then
			echo "$(basename "$f" .json): the comparison failed for another reason: $(cut -c1-300 <<<"$out")" >&2
			rc=1
		else
			echo "detected as expected: $(basename "$f" .json): $(grep -o 'decoded event.*' <<<"$out" | cut -c1-160)"
		fi
	done
	return $rc
}

# judge_copy SRC DST: a copy of run SRC that a negative may alter: the small files copied, the
# vmcore and the truth hard-linked (only read), plugin.log's paths pointed at the copy.
judge_copy() {
	local src=$1 dst=$2 f
	rm -rf "$dst"
	mkdir -p "$dst"
	for f in "$src"/*; do
		[ -f "$f" ] || continue
		case $(basename "$f") in
		vmcore*|truth.json*|exec.rec) ln "$f" "$dst/" ;;
		*) cp "$f" "$dst/" ;;
		esac
	done
	[ ! -f "$dst/plugin.log" ] || sed -i "s#$src/#$dst/#g" "$dst/plugin.log"
}

# judge_baseline SRC COPY WHAT CMD...: CMD --dir COPY passes on COPY, an unaltered copy of run SRC
# (its output in COPY.txt), so that each failure a harness provokes after is its one alteration's.
judge_baseline() {
	local src=$1 c=$2 what=$3
	shift 3
	judge_copy "$src" "$c"
	"$@" --dir "$c" >"$c.txt" 2>&1 ||
		{ tail -n 5 "$c.txt"; echo "$what fails on an unaltered copy of ${src##*/}" >&2; return 1; }
}

# judge_negative WHAT MESSAGE CMD...: CMD (a judge on an altered copy) must fail with MESSAGE.
judge_negative() {
	local what=$1 msg=$2
	shift 2
	expect_message "$what" "$msg" "$@"
}

# The judges of check_trace.py that had no negative fail, each with its own message, on a copy of
# trace-builtin's run with one input altered: the TMC record (one byte of the RAM the plugin
# wrote), the ETM records (each CPU in turn: the trace ID the plugin saw programmed), the panic
# path's order (each CPU in turn: its ETM's stop logged after the first EDPCSR read) and the cache
# clean (no clean counted). check_modules.py fails on trace-oops's module list with a module's
# text address or build ID altered; check_trace.py --modules-dir on trace-module-oops's report with
# a module function renamed or a kernel address unnamed; csdump refuses a .ko of another build.
# check_dump.py fails on a copy of dump-qemu-dump's extraction with the
# C sample's record altered, check_clean.py on dump-cleaned's observation without the commit
# record's last clean, and check_upstream.py on a copy of upstream-drivers' run with one event of
# each CPU's ground truth changed.
scenario_harness-judges() {
	local src=$RUNS/trace-builtin d=$RUNS/harness-judges rc=0 cpu c
	[ -f "$src/ground/report.json" ] || scenario_trace-builtin || return 1
	mkdir -p "$d"
	# One decode for every run of the judge below: the command check_trace.py runs, on the dump
	# that none of the alterations touches (the unaltered copy's pass shows it is that report).
	"$CSDUMP" report "$src/vmcore.elf" --vmlinux "$CSPD_CACHE/build-builtin/vmlinux" --json \
		--last 1000000 >"$d/report.json" 2>"$d/report.err" ||
		{ [ $? = 3 ] || { cat "$d/report.err"; echo "csdump report failed on trace-builtin" >&2; return 1; }; }
	local -a judge=(python3 "$REPO/scripts/check_trace.py" --csdump "$CSDUMP"
		--vmlinux "$CSPD_CACHE/build-builtin/vmlinux" --cpus "$SMP" --through sysrq_handle_crash --hw-stop panic
		--no-el0 --report "$d/report.json")
	# The unaltered copy passes: each failure below is the one alteration's.
	judge_baseline "$src" "$d/unaltered" "check_trace.py" "${judge[@]}" || return 1
	c=$d/tmc
	judge_copy "$src" "$c"
	python3 - "$c/tmc.bin" <<'PY' || return 1
import os, sys
b = bytearray(open(sys.argv[1], "rb").read())
b[len(b) // 2] ^= 0x01
os.unlink(sys.argv[1])
open(sys.argv[1], "wb").write(b)
PY
	judge_negative "a byte of the TMC's RAM changed" "TMC record differs from the emulated RAM" \
		"${judge[@]}" --dir "$c" || rc=1
	# csdump's report of one ETM record read as a perf session's (the session flags of the record).
	c=$d/session
	judge_copy "$src" "$c"
	python3 - "$d/report.json" "$c/report.json" <<'PY' || return 1
import json, sys
r = json.load(open(sys.argv[1]))
cpu = next(c for c in r["cpus"] if c["cpu"] == 1)
assert cpu.get("session") == "sysfs", f"csdump's report of CPU1: session {cpu.get('session')}"
cpu["session"] = "perf"
json.dump(r, open(sys.argv[2], "w"))
PY
	judge_negative "CPU1's ETM record read as a perf session's" \
		"csdump's report says the units of CPUs {1: 'perf'} traced for other sessions than the guest's sysfs session" \
		"${judge[@]}" --dir "$c" --report "$c/report.json" || rc=1
	for ((cpu = 0; cpu < SMP; cpu++)); do
		c=$d/etm$cpu
		judge_copy "$src" "$c"
		sed -i -E "s/(etm $cpu: enabled, trace id )0x[0-9a-f]+/\10x7e/" "$c/plugin.log"
		judge_negative "CPU$cpu's trace ID not the one programmed" "ETM record of CPU$cpu: TRCTRACEIDR" \
			"${judge[@]}" --dir "$c" || rc=1
		c=$d/order$cpu
		judge_copy "$src" "$c"
		python3 - "$c/plugin.log" "$cpu" <<'PY' || return 1
import re, sys
path, cpu = sys.argv[1], sys.argv[2]
lines = open(path, errors="replace").read().splitlines(keepends=True)
tmc = max(i for i, l in enumerate(lines) if "qemu-coresight: tmc stopped:" in l)
stop = max(i for i, l in enumerate(lines[:tmc]) if re.search(rf"qemu-coresight: etm {cpu}: stopped", l))
read = min(i for i, l in enumerate(lines) if re.search(r"qemu-coresight: debug \d+: EDPCSR read", l))
line = lines.pop(stop)
lines.insert(read if read > stop else read + 1, line)
open(path, "w").write("".join(lines))
PY
		judge_negative "CPU$cpu's ETM stopped after a CPU was sampled" "came before the last ETM stopped" \
			"${judge[@]}" --dir "$c" || rc=1
	done
	c=$d/cache
	judge_copy "$src" "$c"
	sed -i -E "s/(data cache cleans to the point of coherency since the TMC stopped, by cpu: )[0-9,]+/\10,0,0,0,0,0,0,0/" \
		"$c/plugin.log"
	judge_negative "no data cache clean after the commit" "data cache cleans after the TMC stopped" \
		"${judge[@]}" --dir "$c" || rc=1

	src=$RUNS/dump-qemu-dump
	[ -f "$src/extract/summary.json" ] || scenario_dump-qemu-dump || return 1
	c=$d/c-api
	rm -rf "$c"
	cp -r "$src/extract" "$c"
	python3 - "$c" <<'PY' || return 1
import json, os, sys
d = sys.argv[1]
r = next(r for r in json.load(open(os.path.join(d, "summary.json")))["records"] if r["name"] == "c-sample")
p = os.path.join(d, r["file"])
b = bytearray(open(p, "rb").read())
b[20] ^= 0x01
open(p, "wb").write(b)
PY
	judge_negative "a byte of the C API's record changed" "record c-sample:" \
		python3 "$REPO/scripts/check_dump.py" --dir "$c" --message "$MESSAGE" || rc=1

	# check_clean.py: the observation of dump-cleaned passes as it is; without the last clean
	# of the commit record (the step dropped, its changes folded into the next), it fails.
	src=$RUNS/dump-cleaned
	[ -f "$src/clean.json" ] || scenario_dump-cleaned || return 1
	c=$d/clean
	rm -rf "$c"
	mkdir -p "$c"
	cp "$src/clean.json" "$src/clean-final.bin" "$c/"
	python3 "$REPO/scripts/check_clean.py" --dir "$c" --csdump "$CSDUMP" >"$c.txt" 2>&1 ||
		{ cat "$c.txt"; echo "check_clean.py fails on an unaltered copy of dump-cleaned" >&2; return 1; }
	python3 - "$c/clean.json" <<'PY' || return 1
import json, sys
p = sys.argv[1]
o = json.load(open(p))
commit = max(i for i, s in enumerate(o["steps"]) if s["pa"] and s["pa"][1] - s["pa"][0] == 120)
dropped = o["steps"].pop(commit)
after = o["steps"][commit]["changed"] if commit < len(o["steps"]) else o["final"]["changed"]
after[:0] = dropped["changed"]
json.dump(o, open(p, "w"))
PY
	judge_negative "the commit record's last clean left out" "never cleaned after it" \
		python3 "$REPO/scripts/check_clean.py" --dir "$c" --csdump "$CSDUMP" || rc=1

	# check_modules.py: trace-oops's module list passes as it is; with one module's text address
	# moved, or its build ID changed, it fails.
	src=$RUNS/trace-oops
	[ -f "$src/check-modules.txt" ] || scenario_trace-oops || return 1
	local what
	for what in unaltered text build-id; do
		c=$d/modules-$what
		rm -rf "$c"
		mkdir -p "$c"
		cp "$src/console.log" "$c/"
		cp -r "$src/extract" "$c/extract"
		python3 - "$c/extract" "$what" <<'PY' || return 1
import json, os, struct, sys
d, what = sys.argv[1], sys.argv[2]
r = next(r for r in json.load(open(os.path.join(d, "summary.json")))["records"] if r["kind"] == "modules")
p = os.path.join(d, r["file"])
b = bytearray(open(p, "rb").read())
assert struct.unpack_from("<I", b, 0)[0] > 0, "no module in the list to alter"
if what != "unaltered":
    # The first entry's text address (bit 12), or its build ID's second byte.
    b[16 + (81 if what == "text" else 57)] ^= 0x10
open(p, "wb").write(b)
PY
		local -a judge_mods=(python3 "$REPO/scripts/check_modules.py" --dir "$c"
			--modules-dir "$CSPD_CACHE/build-mod" --build-ids)
		case $what in
		unaltered) "${judge_mods[@]}" >"$c.txt" 2>&1 ||
			{ cat "$c.txt"; echo "check_modules.py fails on an unaltered copy of trace-oops" >&2; return 1; } ;;
		text) judge_negative "a module's text address moved" "the dump says text at" "${judge_mods[@]}" || rc=1 ;;
		build-id) judge_negative "a module's build ID changed" "in the dump," "${judge_mods[@]}" || rc=1 ;;
		esac
	done

	# csdump's names of module code (check_trace.py --modules-dir): trace-module-oops's report
	# passes as csdump gives it; with one module function renamed, or one kernel address left
	# unnamed, it fails. A .ko of another build (its build ID changed) is refused by csdump.
	src=$RUNS/trace-module-oops
	[ -f "$src/check-modules.txt" ] || scenario_trace-module-oops || return 1
	c=$d/module-names
	judge_copy "$src" "$c"
	cp -r "$src/extract" "$c/extract"
	"$CSDUMP" report "$c/vmcore.elf" --vmlinux "$CSPD_CACHE/build-mod/vmlinux" --json --last 1000000 \
		--modules "$CSPD_CACHE/build-mod" >"$c/report.json" 2>"$c/report.err" ||
		{ [ $? = 3 ] || { cat "$c/report.err"; echo "csdump report failed on trace-module-oops" >&2; return 1; }; }
	local -a judge_names=(python3 "$REPO/scripts/check_trace.py" --dir "$c" --csdump "$CSDUMP"
		--vmlinux "$CSPD_CACHE/build-mod/vmlinux" --cpus "$SMP" --modules-dir "$CSPD_CACHE/build-mod"
		--trigger c_module_crash_store --through c_module_crash_oops,c_module_crash_store,__do_kernel_fault
		--hw-stop die_kernel_fault,die)
	"${judge_names[@]}" --report "$c/report.json" >"$c.txt" 2>&1 ||
		{ tail -n 5 "$c.txt"; echo "check_trace.py fails on trace-module-oops's own report" >&2; return 1; }
	for what in renamed unnamed; do
		python3 - "$c/report.json" "$c/report-$what.json" "$what" <<'PY' || return 1
import json, re, sys
r = json.load(open(sys.argv[1]))
what = sys.argv[3]
for c in r["cpus"]:
    for b in c["branches"]:
        end = b.get("to")
        if end and (end.get("symbol") or "").endswith("[c_module_crash]"):
            end["symbol"] = (re.sub(r"^[^+ ]+", "c_module_crash_other", end["symbol"])
                             if what == "renamed" else None)
            open(sys.argv[2], "w").write(json.dumps(r))
            sys.exit(0)
sys.exit("no branch into c_module_crash's code in the report")
PY
	done
	judge_negative "a module function csdump names otherwise than its .ko" "its .ko says" \
		"${judge_names[@]}" --report "$c/report-renamed.json" || rc=1
	judge_negative "a kernel address csdump leaves unnamed" "a kernel address without a name" \
		"${judge_names[@]}" --report "$c/report-unnamed.json" || rc=1
	mkdir -p "$c/other-build"
	python3 - "$CSPD_CACHE/build-mod/samples/rust/coresight_panic_dump/c_module_crash.ko" \
		"$c/other-build/c_module_crash.ko" <<'PY' || return 1
import sys
b = bytearray(open(sys.argv[1], "rb").read())
i = b.find(b"GNU\0", b.find(b"\x03\x00\x00\x00GNU\0") )
assert i > 0, "no GNU build ID note"
b[i + 4] ^= 0xff
open(sys.argv[2], "wb").write(b)
PY
	# csdump goes on without it (the module then named by offset), so its message is what counts.
	local out
	out=$("$CSDUMP" report "$c/vmcore.elf" --vmlinux "$CSPD_CACHE/build-mod/vmlinux" --json \
		--last 1000000 --modules "$c/other-build" 2>&1 >"$c/report-other-build.txt") || true
	if grep -q "is another build of c_module_crash" <<<"$out" &&
		grep -q "c_module_crash+0x" "$c/report-other-build.txt"; then
		echo "detected as expected: a .ko of another build: $(grep -m1 "is another build" <<<"$out" | cut -c1-200)"
	else
		echo "$out" | tail -n 3
		echo "csdump did not refuse a .ko of another build (or did not name the module by offset)" >&2
		rc=1
	fi
	src=$RUNS/upstream-drivers
	[ -f "$src/truth.json" ] || scenario_upstream-drivers || return 1
	# The unaltered copy passes: each failure below is the one alteration's.
	c=$d/upstream
	judge_copy "$src" "$c"
	python3 "$REPO/scripts/check_upstream.py" --dir "$c" --cpus "$SMP" \
		--vmlinux "$CSPD_CACHE/build-upstream/vmlinux" >"$c.txt" 2>&1 ||
		{ tail -n 5 "$c.txt"; echo "check_upstream.py fails on an unaltered copy of upstream-drivers" >&2; return 1; }
	for ((cpu = 0; cpu < SMP; cpu++)); do
		c=$d/upstream$cpu
		judge_copy "$src" "$c"
		rm "$c/truth.json"
		python3 - "$src/truth.json" "$c/truth.json" "$cpu" <<'PY' || return 1
import json, sys
t = json.load(open(sys.argv[1]))
cpu = int(sys.argv[3])
ev = next(c for c in t["cpus"] if c["cpu"] == cpu)["events"]
i = next(i for i in range(len(ev) - 40, 0, -1) if ev[i]["kind"] == "taken" and int(ev[i]["from"], 16) >> 48 == 0xFFFF)
ev[i]["to"] = hex(int(ev[i]["to"], 16) + 4)
open(sys.argv[2], "w").write(json.dumps(t))
PY
		judge_negative "one event of CPU$cpu's ground truth changed" "CPU$cpu: decoded event" \
			python3 "$REPO/scripts/check_upstream.py" --dir "$c" --cpus "$SMP" \
			--vmlinux "$CSPD_CACHE/build-upstream/vmlinux" || rc=1
	done
	return $rc
}

scenario_harness-no-module() {
	local d=$RUNS/harness-no-module
	qemu qemu-dump mod "$d" "cspd.test=panic" || return 1
	expect_message "sample module not loaded" "the sample never printed its record address" check_record "$d"
}

scenario_harness-no-panic() {
	local d=$RUNS/harness-no-panic
	expect_message "guest that never panics" "the guest did not panic within 15 s" \
		qemu qemu-dump mod "$d" "cspd.test=idle cspd.insmod=rust_panic_record.ko" --panic-timeout 15
}

scenario_harness-wrong-record() {
	local d=$RUNS/sample-qemu-dump
	[ -f "$d/vmcore.elf" ] || scenario_sample-qemu-dump || return 1
	expect_message "record with another message" "expected 'a different panic'" \
		python3 "$REPO/scripts/check_record.py" --console "$d/console.log" \
		--vmcore "$d/vmcore.elf" --message "a different panic"
}

# The scripts stop with a clear message on bad input: a kernel tree that is not 7.3, a cache
# directory that cannot be written, QEMU missing.
# Runs a command that must fail and whose output must contain a message.
expect_message() {
	local what=$1 msg=$2 out
	shift 2
	if out=$("$@" 2>&1); then
		echo "harness did not detect: $what" >&2
		return 1
	fi
	if ! grep -qF -- "$msg" <<<"$out"; then
		echo "$out" | tail -n 3
		echo "no clear message for $what (expected: $msg)" >&2
		return 1
	fi
	echo "detected as expected: $what: $(grep -F -- "$msg" <<<"$out" | head -n 1)"
}

scenario_harness-bad-input() {
	local t rc=0
	t=$(mktemp -d)
	mkdir -p "$t/linux" "$t/bin"
	printf 'VERSION = 6\nPATCHLEVEL = 1\nSUBLEVEL = 0\n' >"$t/linux/Makefile"
	ln -s "$(python3 -c "import sys; print(sys.executable)")" "$t/bin/python3"
	expect_message "a kernel tree that is not 7.3" "is version 6.1, but this project is written for Linux 7.3" \
		env KSRC="$t/linux" bash "$REPO/scripts/kernel.sh" source || rc=1
	expect_message "a cache directory that cannot be written" "cache directory /proc/cspd-cache" \
		env CSPD_CACHE=/proc/cspd-cache bash "$REPO/scripts/kernel.sh" source || rc=1
	expect_message "QEMU missing" "qemu-system-aarch64 is missing" \
		env PATH="$t/bin" python3 "$REPO/scripts/qemu.py" boot --kernel "$(kernel_of mod)" \
		--initrd "$(initrd_of mod)" --append x --workdir "$t/run" || rc=1
	rm -rf "$t"
	return $rc
}

# perf mode with the ETR as the sink (CS_TMC=etr, no tracedata region: each perf session has its
# own flat DMA buffer, cspd.perf_sink=tmc_etr0): perf-cpu-wide's and perf-snapshot's runs and
# judges, on a buffer in guest memory the plugin's ETR writes by DMA (tmc.bin is that buffer as
# the plugin saw it when capture stopped).
# A perf run of MODE through tmc_etr0 with a session buffer of SIZE bytes into DIR and DISK,
# judged by check_perf with what follows.
etr_perf() {
	local d=$1 disk=$2 mode=$3 size=$4
	shift 4
	CS_TMC=etr perf_boot "$d" "$disk" mod \
		"reserve_mem=4M:4096:coresight_dump cspd.insmod=$TRACE_MODS cspd.perf=$mode cspd.perf_sink=tmc_etr0 cspd.cs_attr=tmc_etr0/buffer_size=$size" ||
		return 1
	grep -q "CSPD: perf: event cs_etm/@tmc_etr0," "$d/console.log" || { echo "perf did not record through tmc_etr0" >&2; return 1; }
	judge_perf "$d" "$disk" "$@"
}

scenario_perf-etr() {
	etr_perf "$RUNS/perf-etr" "$RUNS/perf-etr.disk" cpu-wide 0x100000
}

# 256 KiB, as the ETF: each snapshot's window, and the run after it up to the end of the execution
# record, must fit the record's ring for the oldest snapshot to be judged.
scenario_perf-etr-snapshot() {
	CS_EXEC_ENTRIES=$SNAPSHOT_EXEC_ENTRIES etr_perf "$RUNS/perf-etr-snapshot" "$RUNS/perf-etr-snapshot.disk" snapshot 0x40000 --snapshot "$SNAPSHOT_MARKERS"
}

# A panic while perf owns the ETR (perf record --snapshot -a through tmc_etr0): the panic path
# copies the session's DMA buffer into the dump, judged as perf-panic's.
scenario_perf-etr-panic() {
	local d=$RUNS/perf-etr-panic
	CS_TMC=etr cs_qemu qemu-dump mod "$d" "cspd.test=panic reserve_mem=4M:4096:coresight_dump cspd.insmod=$TRACE_MODS cspd.modparm_coresight_cpu_debug=debug=1 cspd.perf=panic cspd.perf_sink=tmc_etr0" ||
		return 1
	grep -q "CSPD: perf: recording" "$d/console.log" || { echo "perf did not record in the guest" >&2; return 1; }
	check_trace "$d" mod --perf-session --sink tmc_etr0 --etr-from "a copy of the buffer"
}

# The same perf commands on upstream's C drivers (the upstream kernel: coresight-tmc and
# coresight-etm4x built in), judged as perf-cpu-wide's and perf-snapshot's runs are: the C drivers
# judge the emulation and the judges, as upstream-drivers does for sysfs.
upstream_perf() {
	local d=$1 disk=$2 mode=$3
	shift 3
	perf_boot "$d" "$disk" upstream "cspd.perf=$mode" &&
		judge_perf "$d" "$disk" --vmlinux "$CSPD_CACHE/build-upstream/vmlinux" \
			--modules-dir "$CSPD_CACHE/build-upstream" "$@"
}

scenario_upstream-perf() {
	upstream_perf "$RUNS/upstream-perf" "$RUNS/upstream-perf.disk" cpu-wide
}

scenario_upstream-perf-snapshot() {
	CS_EXEC_ENTRIES=$SNAPSHOT_EXEC_ENTRIES upstream_perf "$RUNS/upstream-perf-snapshot" "$RUNS/upstream-perf-snapshot.disk" snapshot \
		--snapshot "$SNAPSHOT_MARKERS"
}

# Both upstream perf runs judged on altered copies: one byte of what the ETF held (tmc.bin) at its
# last stop changed, each judge failing with its own message. Their execution records go at the end.
scenario_harness-upstream-perf() {
	local d=$RUNS/harness-upstream-perf rc=0 run
	for run in upstream-perf upstream-perf-snapshot; do
		[ -f "$RUNS/$run/exec.rec" ] || "scenario_$run" || return 1
	done
	rm -rf "$d"
	mkdir -p "$d"
	local -a up=(--vmlinux "$CSPD_CACHE/build-upstream/vmlinux" --modules-dir "$CSPD_CACHE/build-upstream")
	judge_copy "$RUNS/upstream-perf" "$d/tmc"
	printf '\x5a' | dd of="$(aux_tmc "$d/tmc")" bs=1 seek=4096 conv=notrunc status=none
	judge_negative "upstream-perf with one byte of tmc.bin changed" \
		"the AUX data differs from what the ETF held (tmc.bin" \
		check_perf "$d/tmc" "$RUNS/upstream-perf.disk" "${up[@]}" --script "$RUNS/upstream-perf/perf/perf-script.txt" || rc=1
	judge_copy "$RUNS/upstream-perf-snapshot" "$d/snapshot-tmc"
	printf '\x5a' | dd of="$d/snapshot-tmc/tmc.bin" bs=1 seek=4096 conv=notrunc status=none
	judge_negative "upstream-perf-snapshot with one byte of tmc.bin changed" \
		"the newest snapshot differs from what the ETF held (tmc.bin) at byte 0x1000" \
		check_perf "$d/snapshot-tmc" "$RUNS/upstream-perf-snapshot.disk" "${up[@]}" --snapshot "$SNAPSHOT_MARKERS" \
		--script "$RUNS/upstream-perf-snapshot/perf/perf-script.txt" || rc=1
	[ -n "${CSPD_KEEP_EXEC:-}" ] || rm -f "$RUNS"/upstream-perf*/exec.rec
	rm -rf "$d"/*/exec.rec
	return $rc
}

# The ETR's perf runs judged on altered copies, each judge failing with its own message (the
# unaltered runs pass in their scenarios): (a) perf-etr with one byte of the ETR's buffer as the
# plugin saw it changed, (b) perf-etr-snapshot the same, (c) perf-etr-panic's dump judged as a
# sysfs session's. The execution records the three runs kept are removed at the end.
scenario_harness-perf-etr() {
	local d=$RUNS/harness-perf-etr rc=0 run
	for run in perf-etr perf-etr-snapshot perf-etr-panic; do
		[ -f "$RUNS/$run/exec.rec" ] || "scenario_$run" || return 1
	done
	rm -rf "$d"
	mkdir -p "$d"
	judge_copy "$RUNS/perf-etr" "$d/tmc"
	printf '\x5a' | dd of="$(aux_tmc "$d/tmc")" bs=1 seek=4096 conv=notrunc status=none
	judge_negative "one byte of the ETR's buffer changed" "the AUX data differs from what the ETF held (tmc.bin" \
		check_perf "$d/tmc" "$RUNS/perf-etr.disk" --script "$RUNS/perf-etr/perf/perf-script.txt" || rc=1
	judge_copy "$RUNS/perf-etr-snapshot" "$d/snapshot-tmc"
	printf '\x5a' | dd of="$d/snapshot-tmc/tmc.bin" bs=1 seek=4096 conv=notrunc status=none
	judge_negative "one byte of the ETR's buffer at the last snapshot changed" \
		"the newest snapshot differs from what the ETF held (tmc.bin) at byte 0x1000" \
		check_perf "$d/snapshot-tmc" "$RUNS/perf-etr-snapshot.disk" --snapshot "$SNAPSHOT_MARKERS" \
		--script "$RUNS/perf-etr-snapshot/perf/perf-script.txt" || rc=1
	judge_copy "$RUNS/perf-etr-panic" "$d/panic-no-flag"
	judge_negative "perf-etr-panic's run judged as a sysfs session" "enable_sink on tmc_etr0 did not take" \
		check_trace "$d/panic-no-flag" mod --sink tmc_etr0 --etr-from "a copy of the buffer" || rc=1
	[ -n "${CSPD_KEEP_EXEC:-}" ] || rm -f "$RUNS"/perf-etr*/exec.rec
	rm -rf "$d"/*/exec.rec
	return $rc
}

# compare_listing KIND UP OURS DEV [NAME=UPSTREAM|OURS|WHY ...]: a device's sysfs files as probed
# (scripts/guest/init tmc_listing or etm_listing, KIND tmc or etm) under upstream's C driver
# (console UP) and under ours (console OURS): the same names, each reading the same. A file only
# one driver has, or a value that differs, fails with its name, unless it is one of the explained
# differences given (NAME a regular expression over the file names), where each driver must read
# exactly what is given ("-": the file is missing, "*": any value), and the reason is printed.
compare_listing() {
	python3 - "$@" <<'PY'
import re, sys


def listing(path, prefix, tmc):
    out = {}
    for line in open(path, errors="replace"):
        m = re.match(rf"CSPD: {prefix} {tmc} (\S+) (\S*)", line)
        if m:
            # The value as printed (spaces and newlines as _), cut where the kernel log's copy of
            # another line runs into it.
            out[m.group(1)] = m.group(2).split("_[")[0].rstrip("_")
    if not out:
        sys.exit(f"FAIL: {path} has no {tmc} listing ({prefix})")
    return out


kind, tmc = sys.argv[1], sys.argv[4]
explained = []
for e in sys.argv[5:]:
    name, rest = e.split("=", 1)
    want_up, want_ours, why = rest.split("|", 2)
    explained.append((name, want_up, want_ours, why))
up = listing(sys.argv[2], f"upstream: {kind} listing:", tmc)
ours = listing(sys.argv[3], f"{kind} listing:", tmc)
notes, grouped = [], {}
matches = lambda want, got: want == got or (want == "*" and got != "-")
for name in sorted(set(up) | set(ours)):
    ex = next((x for x in explained if re.fullmatch(x[0], name)), None)
    if ex:
        pat, want_up, want_ours, why = ex
        got_up, got_ours = up.get(name, "-"), ours.get(name, "-")
        if not (matches(want_up, got_up) and matches(want_ours, got_ours)):
            sys.exit(f"FAIL: {tmc}/{name}: upstream's driver reads {got_up}, ours {got_ours}; the explained "
                     f"difference is {want_up} and {want_ours} ({why})")
        if pat == name:
            notes.append(f"{name}: upstream's {got_up}, ours {got_ours}: {why}")
        else:
            grouped.setdefault(why, []).append(name)
        continue
    if name not in ours:
        sys.exit(f"FAIL: {tmc}/{name}: upstream's driver has it ({up[name]}), ours does not")
    if name not in up:
        sys.exit(f"FAIL: {tmc}/{name}: ours has it ({ours[name]}), upstream's driver does not")
    if up[name] != ours[name]:
        sys.exit(f"FAIL: {tmc}/{name}: upstream's driver reads {up[name]}, ours {ours[name]}")
same = len([n for n in set(up) & set(ours) if not any(re.fullmatch(x[0], n) for x in explained)])
print(f"{tmc}'s sysfs as probed: {same} files the same under upstream's driver and ours, each reading "
      f"the same ({', '.join(f'{k} {v}' for k, v in sorted(up.items()) if k.startswith('mgmt/'))})"
      + "".join(f"; {n}" for n in notes)
      + "".join(f"; only upstream's driver has {', '.join(names)}: {why}" for why, names in grouped.items()))
PY
}

compare_tmc_listing() {
	local up=$1 ours=$2 dev=${3:-tmc_etf0}
	shift $(($# < 3 ? $# : 3))
	compare_listing tmc "$up" "$ours" "$dev" "$@"
}

scenario_tmc-sysfs-listing() {
	local up=$RUNS/upstream-drivers/console.log ours=$RUNS/trace-builtin/console.log d=$RUNS/tmc-sysfs-listing
	[ -f "$up" ] || scenario_upstream-drivers || return 1
	[ -f "$ours" ] || scenario_trace-builtin || return 1
	compare_tmc_listing "$up" "$ours" || return 1
	rm -rf "$d"
	mkdir -p "$d"
	sed 's/^\(CSPD: tmc listing: tmc_etf0 mgmt\/rsz \)0x10000/\10x8000/' "$ours" >"$d/rsz.log"
	judge_negative "ours reading another RAM size" "tmc_etf0/mgmt/rsz: upstream's driver reads 0x10000, ours 0x8000" \
		compare_tmc_listing "$up" "$d/rsz.log" || return 1
	grep -v "^CSPD: tmc listing: tmc_etf0 trigger_cntr" "$ours" >"$d/no-trigger.log"
	judge_negative "ours without trigger_cntr" "tmc_etf0/trigger_cntr: upstream's driver has it (0x0), ours does not" \
		compare_tmc_listing "$up" "$d/no-trigger.log"
}

# The same for the ETR, as probed with a tracedata region in its node (the device tree of both runs):
# upstream's C driver in upstream-etr's first boot, ours in trace-etr-warm-reboot's. Upstream offers
# a flat DMA buffer beside the reserved one; ours traces into the tracedata region whenever the
# node has one (so that the panic dump finds the trace in place), and offers no flat buffer there.
ETR_LISTING_EXPLAINED=("buf_modes_available=auto_flat_resrv|auto_resrv|with a tracedata region this driver traces into it, the panic dump reads it there; a flat DMA buffer only without one")
scenario_tmc-etr-sysfs-listing() {
	local up=$RUNS/upstream-etr/console.log ours=$RUNS/trace-etr-warm-reboot/console.log d=$RUNS/tmc-etr-sysfs-listing
	[ -f "$up" ] || scenario_upstream-etr || return 1
	[ -f "$ours" ] || scenario_trace-etr-warm-reboot || return 1
	compare_tmc_listing "$up" "$ours" tmc_etr0 "${ETR_LISTING_EXPLAINED[@]}" || return 1
	rm -rf "$d"
	mkdir -p "$d"
	sed 's/^\(CSPD: tmc listing: tmc_etr0 mgmt\/devid \)0x1510340/\10x1510341/' "$ours" >"$d/devid.log"
	judge_negative "ours reading another DEVID" "tmc_etr0/mgmt/devid: upstream's driver reads 0x1510340, ours 0x1510341" \
		compare_tmc_listing "$up" "$d/devid.log" tmc_etr0 "${ETR_LISTING_EXPLAINED[@]}" || return 1
	sed 's/^\(CSPD: tmc listing: tmc_etr0 buf_modes_available \).*/\1auto_flat_resrv_/' "$ours" >"$d/modes.log"
	judge_negative "ours offering a flat buffer" "tmc_etr0/buf_modes_available: upstream's driver reads auto_flat_resrv, ours auto_flat_resrv; the explained difference" \
		compare_tmc_listing "$up" "$d/modes.log" tmc_etr0 "${ETR_LISTING_EXPLAINED[@]}" || return 1
	grep -v "^CSPD: tmc listing: tmc_etr0 buf_mode_preferred" "$ours" >"$d/no-preferred.log"
	judge_negative "ours without buf_mode_preferred" "tmc_etr0/buf_mode_preferred: upstream's driver has it (auto), ours does not" \
		compare_tmc_listing "$up" "$d/no-preferred.log" tmc_etr0 "${ETR_LISTING_EXPLAINED[@]}"
}

# tmc_etb0's sysfs as probed, under upstream's driver (upstream-etb) and ours (devfile-etb, whose
# guest ran the same sequence and listing): the same files, each reading the same; and negatives.
scenario_tmc-etb-sysfs-listing() {
	local up=$RUNS/upstream-etb/console.log d=$RUNS/tmc-etb-sysfs-listing ours
	[ -f "$up" ] || scenario_upstream-etb || return 1
	[ -f "$RUNS/devfile-etb/console.log" ] || scenario_devfile-etb || return 1
	rm -rf "$d"
	mkdir -p "$d"
	ours=$d/ours.log
	sed -n 's/^CSPD: upstream: tmc listing: tmc_etb0 /CSPD: tmc listing: tmc_etb0 /p' \
		"$RUNS/devfile-etb/console.log" >"$ours"
	compare_tmc_listing "$up" "$ours" tmc_etb0 || return 1
	sed 's/^\(CSPD: tmc listing: tmc_etb0 mgmt\/devid \)\S*/\10x2a0/' "$ours" >"$d/devid.log"
	judge_negative "ours reading another DEVID" "tmc_etb0/mgmt/devid: upstream's driver reads" \
		compare_tmc_listing "$up" "$d/devid.log" tmc_etb0 || return 1
	grep -v "^CSPD: tmc listing: tmc_etb0 buffer_size" "$ours" >"$d/no-size.log"
	judge_negative "ours without buffer_size" "tmc_etb0/buffer_size: upstream's driver has it" \
		compare_tmc_listing "$up" "$d/no-size.log" tmc_etb0
}

# What upstream's ETMv4 driver offers that ours does not, on the emulated unit (a Cortex-A53's ID
# registers: two counters, a sequencer, eight resource selectors, one single-shot comparator, no
# context ID or VMID comparator), each with its reason; every other file must read the same.
ETM_LISTING_EXPLAINED=(
	"cntr_.*|cntrldvr|res_.*|seq_.*|sshot_.*|pe|vinst_pe_cmp_start_stop|event|event_.*=*|-|the unit's counters, resource selectors, sequencer, single-shot comparators, PE comparator inputs and events: not provided (nor emulated: the unit only has its ID registers say so); the trace is enabled by the always-true resource"
	"ctxid_.*|vmid_.*|addr_ctxtype|addr_context=*|-|context ID and VMID comparators: the unit has none (numcidc, numvmidc 0)"
	"addr_instdatatype=instr|-|an address comparator compares instruction addresses only here (ETMv4 on A-profile has no data trace); nothing to choose"
	"mgmt/trcoslsr=0x8|0xa|the OS lock: upstream clears it at probe and keeps it clear; this driver leaves it as it found it (set at reset) and clears it only while it programs or reads the unit"
	"mgmt/trcpdsr=0x3|0x21|the OS lock, as mirrored in TRCPDSR.OSLK (bit 5): see mgmt/trcoslsr"
	"bb_ctrl|cyc_threshold|syncfreq|ns_exlevel_vinst|s_exlevel_vinst=*|-|set from mode, not on their own: branch broadcast everywhere when mode asks for it, upstream's cycle threshold, a synchronisation every 2^12 bytes, the levels from mode's exclude bits and the kernel's level"
)

# The ETM's sysfs as probed (its directory, mgmt/ and trcidr/) under upstream's driver
# (upstream-drivers) and ours (trace-builtin; the guest lists etm0 before any configuration):
# the same files, each reading the same, but for the explained differences; and negatives.
scenario_etm-sysfs-listing() {
	local up=$RUNS/upstream-drivers/console.log ours=$RUNS/trace-builtin/console.log d=$RUNS/etm-sysfs-listing
	[ -f "$up" ] || scenario_upstream-drivers || return 1
	[ -f "$ours" ] || scenario_trace-builtin || return 1
	compare_listing etm "$up" "$ours" etm0 "${ETM_LISTING_EXPLAINED[@]}" || return 1
	rm -rf "$d"
	mkdir -p "$d"
	sed 's/^\(CSPD: etm listing: etm0 nr_cntr \)0x2/\10x3/' "$ours" >"$d/cntr.log"
	judge_negative "ours counting another number of counters" "etm0/nr_cntr: upstream's driver reads 0x2, ours 0x3" \
		compare_listing etm "$up" "$d/cntr.log" etm0 "${ETM_LISTING_EXPLAINED[@]}" || return 1
	grep -v "^CSPD: etm listing: etm0 addr_single" "$ours" >"$d/no-single.log"
	judge_negative "ours without addr_single" "etm0/addr_single: upstream's driver has it (0x0), ours does not" \
		compare_listing etm "$up" "$d/no-single.log" etm0 "${ETM_LISTING_EXPLAINED[@]}" || return 1
	sed 's/^\(CSPD: upstream: etm listing: etm0 addr_instdatatype \)instr/\1data/' "$up" >"$d/up-data.log"
	judge_negative "upstream's driver reading an explained file otherwise" "etm0/addr_instdatatype: upstream's driver reads data, ours -" \
		compare_listing etm "$d/up-data.log" "$ours" etm0 "${ETM_LISTING_EXPLAINED[@]}"
}

# check_hotplug DIR MARKER CPU...: each CPU went offline and online while every ETM traced
# (cspd.hotplug), in that order: the plugin saw it restart after the PSCI call that turned it off
# (its trace unit and debug logic reset: the power-down), its trace unit stopped before and enabled
# again after that; the guest saw the core end the unit's sysfs session as the CPU went
# (enable_source 0 while offline and after it came back, as upstream's drivers on Linux 7.3) and
# enabled it again. csdump's decode of CPU MARKER's trace runs version_proc_show, what the guest
# ran on it after it came back (MARKER -: not checked). HOTPLUG_PREFIX: what the guest's lines
# say first ("upstream: " in upstream-drivers' sequence).
check_hotplug() {
	local d=$1 marker=$2 c up line console rc pre=${HOTPLUG_PREFIX:-}
	shift 2
	console=$(tr -d '\r' <"$d/console.log" | sed -n "s/^.*\] \(CSPD: ${pre}hotplug: .*\)$/\1/p")
	for c in "$@"; do
		up=$(grep -n "^qemu-coresight: cpu $c: powered down and up" "$d/plugin.log" | tail -n 1 | cut -d: -f1)
		[ -n "$up" ] || { echo "FAIL: the plugin saw no power-down of CPU$c (plugin.log)" >&2; return 1; }
		if grep -q "^qemu-coresight: etm $c: powered down while tracing" "$d/plugin.log"; then
			echo "FAIL: CPU$c's trace unit was still tracing when CPU$c powered down: the core did not end its session" >&2
			return 1
		fi
		tail -n "+$up" "$d/plugin.log" | grep -q "^qemu-coresight: etm $c: enabled" || {
			echo "FAIL: CPU$c: its trace unit was not enabled again after it came back (plugin.log: no enable of etm $c after line $up, its power-up)" >&2
			return 1
		}
		for line in "cpu$c online=0, etm$c enable_source=0" "cpu$c online=1, etm$c enable_source=0" \
			"etm$c enabled again: enable_source=1"; do
			grep -qxF "CSPD: ${pre}hotplug: $line" <<<"$console" || {
				echo "FAIL: the guest did not say '${pre}hotplug: $line'; it said:" >&2
				sed 's/^/  /' <<<"$console" >&2
				return 1
			}
		done
		echo "CPU$c offline and online: its ETM's sysfs session ended as it went, the plugin reset its trace unit and debug logic at its power-up (plugin.log line $up), the unit was enabled again after it"
	done
	[ "$marker" = - ] || check_marker "$d" "$marker"
}

# check_marker DIR CPU: csdump's decode of CPU's trace runs version_proc_show, which the guest read
# on it right before the panic.
check_marker() {
	local d=$1 marker=$2 rc
	grep -q "\] CSPD: marker: /proc/version read on cpu$marker before the trigger" "$d/console.log" ||
		{ echo "FAIL: the guest did not say it read /proc/version on CPU$marker" >&2; return 1; }
	"$CSDUMP" report "$d/vmcore.elf" --vmlinux "$CSPD_CACHE/build-mod/vmlinux" --modules "$CSPD_CACHE/build-mod" \
		--json --last 1000000 >"$d/hotplug-report.json" 2>"$d/hotplug-report.err"
	rc=$?
	[ "$rc" = 0 ] || [ "$rc" = 3 ] || { cat "$d/hotplug-report.err" >&2; echo "FAIL: csdump report failed ($rc)" >&2; return 1; }
	python3 - "$d/hotplug-report.json" "$marker" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
cpu = int(sys.argv[2])
c = next((c for c in r["cpus"] if c["cpu"] == cpu), None)
branches = (c or {}).get("branches", [])
calls = [b for b in branches if (b["to"]["symbol"] or "").split("+")[0] == "version_proc_show"]
if not calls:
    sys.exit(f"FAIL: CPU{cpu}'s decoded trace does not run version_proc_show, what it ran after it came back "
             f"({len(branches)} branches decoded)")
print(f"CPU{cpu}'s decoded trace enters version_proc_show {len(calls)} times: its trace after it came back")
PY
}

# CPU 1, then CPU 0, offline and online while every ETM traces through sysfs, then the sysrq panic
# on CPU 1 (cspd.hotplug=1,0, cspd.trigger_cpu=1): check_hotplug, and check_trace: CPU 1's trace
# ends at panic()'s entry (the hardware stop, programmed again with the unit), each CPU's window
# equals the plugin's truth (its session after the power-up) and the execution record, and CPU 0's
# debug sample (its OS lock set again by the power-up) is what CPU 0 executed.
scenario_trace-hotplug() {
	local d=$RUNS/trace-hotplug
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND cspd.hotplug=1,0 cspd.trigger_cpu=1" || return 1
	check_hotplug "$d" 1 1 0 || return 1
	check_trace "$d" mod || return 1
}

# check_cpu_pm DIR CPU: the CPU's PM notifiers ran once (cspd.cpu_pm, the c_cpu_pm sample) while its
# ETM traced for the sysfs session: the plugin saw the unit stopped and enabled again, with the
# programming of its first enable (trace ID, TRCCONFIGR, filters, hardware stop), and nothing else
# enable or stop it before the panic; the guest saw the cycle succeed with the session still on
# (enable_source 1); csdump's decode of its trace runs version_proc_show, read on it after.
check_cpu_pm() {
	local d=$1 c=$2 lines first n
	lines=$(sed -n "s/^qemu-coresight: etm $c: \(enabled\|stopped\)\(,\| \)\(.*\)$/\1 \3/p" "$d/plugin.log")
	n=$(grep -c "^enabled" <<<"$lines")
	[ "$n" -ge 2 ] || {
		echo "FAIL: CPU$c's trace unit was not saved and restored around the CPU PM cycle (plugin.log: enabled $n time(s), no stop and enable for it)" >&2
		return 1
	}
	first=$(grep -m1 "^enabled" <<<"$lines")
	[ "$n" = 2 ] && [ "$(sed -n 2p <<<"$lines" | cut -d' ' -f1)" = stopped ] &&
		[ "$(sed -n 3p <<<"$lines")" = "$first" ] || {
		echo "FAIL: CPU$c's trace unit: not one stop and one enable with its first programming around the CPU PM cycle; the plugin saw:" >&2
		sed 's/^/  /' <<<"$lines" >&2
		return 1
	}
	tr -d '\r' <"$d/console.log" | grep -q "\] CSPD: cpu_pm: cpu$c enter and exit: ok, etm$c enable_source=1$" || {
		echo "FAIL: the guest did not say 'cpu_pm: cpu$c enter and exit: ok, etm$c enable_source=1':" >&2
		grep -a "CSPD: cpu_pm:" "$d/console.log" | sed 's/^/  /' >&2
		return 1
	}
	echo "CPU$c's PM notifiers ran: its trace unit was stopped and programmed again as first enabled ($(sed 's/^enabled *//' <<<"$first")), the session went on"
}

# The CPU PM notifiers of CPU 0 run once while every ETM traces through sysfs (cspd.cpu_pm=0, the
# c_cpu_pm sample), on units whose device tree nodes say they lose their context with the CPU
# (arm,coresight-loses-context-with-cpu), then the sysrq panic on CPU 0: check_cpu_pm, CPU 0's
# decode runs the marker read after the cycle, and check_trace judges both CPUs' windows (CPU 0's:
# the session after the restore) against the truth and the execution record.
scenario_trace-cpu-pm() {
	local d=$RUNS/trace-cpu-pm
	CS_ETM_LOSES_CONTEXT=1 cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND cspd.cpu_pm=0 cspd.trigger_cpu=0" || return 1
	check_cpu_pm "$d" 0 || return 1
	check_marker "$d" 0 || return 1
	check_trace "$d" mod || return 1
}

# check_cpu_pm fails with its own message on the same run with units whose nodes do not say they
# lose their context (and pm_save_enable at its default, the firmware's word): the core has no PM
# operations to call, the unit is neither stopped nor programmed again around the cycle. Before its
# drivers, the guest loads coresight_etm4x with pm_save_enable=3, which it refuses.
scenario_harness-cpu-pm() {
	local d=$RUNS/harness-cpu-pm
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND cspd.cpu_pm=0 cspd.trigger_cpu=0 cspd.insmod_bad=coresight_etm4x.ko:pm_save_enable=3" ||
		return 1
	judge_negative "CPU PM notifiers with units not saved and restored" \
		"FAIL: CPU0's trace unit was not saved and restored around the CPU PM cycle" check_cpu_pm "$d" 0 || return 1
	# Before that run's drivers, coresight_etm4x refused pm_save_enable out of range, saying why.
	grep -q "\] coresight_etm4x: pm_save_enable=3: 0 (as the firmware says), 1 (never) or 2 (always)" "$d/console.log" &&
		grep -q "^CSPD: insmod_bad: coresight_etm4x.ko refused pm_save_enable=3: .*Invalid argument" "$d/console.log" ||
		{ echo "coresight_etm4x did not refuse pm_save_enable=3 with its message" >&2; return 1; }
	echo "coresight_etm4x refused pm_save_enable=3, saying which values it takes"
}

# A CPU that comes online after the drivers loaded (maxcpus=1, then CPU 1 online: cspd.late_cpu=1).
# The ETMv4 driver reads a unit from its own CPU at probe: etm1 waits for CPU 1 (the driver says
# so) and is probed by the driver's CPU hotplug callback when CPU 1 comes online, as upstream's
# driver does, with no bind from the user; the sysfs session then traces both CPUs: check_trace
# judges both windows against the truth and the execution record.
# check_late_cpu DIR: etm1 waited for CPU 1 (the driver said so) and was bound when CPU 1 came
# online, no device left without a driver.
check_late_cpu() {
	local d=$1
	grep -q "\] coresight-etm4x 7ff11000.etm: CPU1 is offline: probed when it comes online" "$d/console.log" ||
		{ echo "FAIL: the ETMv4 driver did not say etm1 waits for CPU 1" >&2; return 1; }
	grep -q "CSPD: late cpu: cpu1 online; coresight devices: [^;]*etm1[^;]*; without a driver: none" "$d/console.log" || {
		echo "FAIL: etm1 was not probed when CPU 1 came online:" >&2
		grep -a "late cpu:" "$d/console.log" >&2
		return 1
	}
	echo "etm1: waited for CPU 1 (the driver said so), probed by the driver when CPU 1 came online"
}

scenario_trace-late-cpu() {
	local d=$RUNS/trace-late-cpu
	cs_qemu qemu-dump mod "$d" "maxcpus=1 cspd.late_cpu=1 cspd.test=panic $TRACE_MOD_APPEND" || return 1
	check_late_cpu "$d" || return 1
	check_trace "$d" mod || return 1
	# The judge's negative: the guest's listing as it was before the driver probed waiting units.
	mkdir -p "$d/neg"
	sed 's/\(CSPD: late cpu: cpu1 online; coresight devices: etm0 \)etm1 \([^;]*; without a driver:\) none/\1\2 7ff11000.etm/g' \
		"$d/console.log" >"$d/neg/console.log"
	judge_negative "etm1 left without a driver when CPU 1 came online" "FAIL: etm1 was not probed when CPU 1 came online" \
		check_late_cpu "$d/neg"
}

# The same hotplug steps on upstream's C drivers (the upstream kernel, upstream-drivers' sequence
# with cspd.hotplug=1,0), which this project's follow: check_hotplug on its console and plugin log
# (the sysfs session of each CPU's unit ended as it went, enable_source 0 while offline and after
# it came back, the unit enabled again after its power-up).
scenario_upstream-hotplug() {
	local d=$RUNS/upstream-hotplug
	sysfs_run "$d" upstream "cspd.hotplug=1,0" || return 1
	HOTPLUG_PREFIX="upstream: " check_hotplug "$d" - 1 0
}

# check_hotplug fails with its own message on a run where CPU 1's trace unit is left as the
# power-up left it (cspd.hotplug=1:norestart: the guest does not enable it again): its trace after
# it came back is missing.
scenario_harness-hotplug() {
	local d=$RUNS/harness-hotplug
	cs_qemu qemu-dump mod "$d" "cspd.test=panic $TRACE_MOD_APPEND cspd.hotplug=1:norestart cspd.trigger_cpu=1" || return 1
	judge_negative "CPU 1's trace unit not programmed again after CPU 1 came back" \
		"FAIL: CPU1: its trace unit was not enabled again after it came back" check_hotplug "$d" 1 1
}

# check_trace.py --plain-kdump's own judges fail, each with its message: on trace-kdump's run (the
# panic path committed it), on trace-kdump-plain's with trace counted after the capture kernel
# stopped the sink (plugin.log's exit counters), with the panic said to be on the other CPU than
# the one csdump infers, and with the capture kernel's drain not complete.
# plugin_log_add FILE PREFIX N: adds N to the number right after the first match of the regular
# expression PREFIX in the plugin log FILE (a counter the judges read).
plugin_log_add() {
	python3 - "$@" <<'PY'
import re, sys
path, prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
text = open(path).read()
m = re.search("(" + prefix + r")(\d+)", text)
if not m:
    sys.exit(f"{path}: no {prefix!r} followed by a number")
open(path, "w").write(text[:m.start(2)] + str(int(m.group(2)) + n) + text[m.end(2):])
PY
}

scenario_harness-kdump-plain() {
	local src=$RUNS/trace-kdump-plain d=$RUNS/harness-kdump-plain c rc=0
	[ -f "$src/check.txt" ] || scenario_trace-kdump-plain || return 1
	[ -f "$RUNS/trace-kdump/check.txt" ] || scenario_trace-kdump || return 1
	[ -f "$RUNS/trace-kdump-hardlockup/check.txt" ] || scenario_trace-kdump-hardlockup || return 1
	[ -f "$RUNS/trace-kdump-hardlockup-unarmed/check.txt" ] || scenario_trace-kdump-hardlockup-unarmed || return 1
	rm -rf "$d"
	mkdir -p "$d"
	local -a judge=(python3 "$REPO/scripts/check_trace.py" --csdump "$CSDUMP" --vmlinux "$CSPD_CACHE/build-mod/vmlinux"
		--cpus "$SMP" --modules-dir "$CSPD_CACHE/build-mod" "${SYSRQ_STOP[@]}" --plain-kdump --no-el0)
	c=$d/notifier
	judge_copy "$RUNS/trace-kdump" "$c"
	judge_negative "trace-kdump's run (the panic path ran) judged as plain kdump" \
		"plain kdump: the dump's path is 'panic-path'" "${judge[@]}" --panic-cpu 0 --dir "$c" || rc=1
	c=$d/late
	judge_copy "$src" "$c"
	plugin_log_add "$c/plugin.log" "exit: .*?trace bytes " 16 || return 1
	judge_negative "16 trace bytes counted after the capture kernel stopped the sink" \
		"trace reached the funnel after the capture kernel stopped the sink" "${judge[@]}" --panic-cpu 1 --dir "$c" || rc=1
	c=$d/cpu0
	judge_copy "$src" "$c"
	judge_negative "trace-kdump-plain's run judged with the panic on CPU 0" \
		"plain kdump: csdump names CPU1 as the panicking one" "${judge[@]}" --panic-cpu 0 --dir "$c" || rc=1
	c=$d/drain
	judge_copy "$src" "$c"
	sed -i 's/left it capturing: drained (complete)/left it capturing: drained (flush_timeout)/' "$c/console.log"
	judge_negative "the capture kernel's drain not complete" \
		"the capture kernel's log does not say tmc_etf0 was drained completely" "${judge[@]}" --panic-cpu 1 --dir "$c" || rc=1
	# The capture kernel's CPU debug samples: a CPU said powered off that the plugin never powered
	# off, a sample that is not the PC the plugin's EDPCSR read returned.
	c=$d/never-off
	judge_copy "$src" "$c"
	sed -i '/^qemu-coresight: cpu 0: powered off/d' "$c/plugin.log"
	judge_negative "CPU 0 never powered off in the plugin's log" \
		"csdump says CPU0 was powered off, but the plugin did not power it off" \
		"${judge[@]}" --panic-cpu 1 --capture-debug --dir "$c" || rc=1
	local -a locked=(python3 "$REPO/scripts/check_trace.py" --csdump "$CSDUMP" --vmlinux "$CSPD_CACHE/build-mod/vmlinux"
		--cpus "$SMP" --modules-dir "$CSPD_CACHE/build-mod" --through sysrq_handle_crash --hw-stop "$HARDLOCKUP_STOP"
		--plain-kdump --panic-cpu 1 --capture-debug --locked-cpu 0:lkdtm_HARDLOCKUP --nokaslr --no-el0)
	c=$d/sample
	judge_copy "$RUNS/trace-kdump-hardlockup" "$c"
	python3 - "$c/plugin.log" <<'PY' || return 1
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r"(debug 0: EDPCSR read by cpu 1, sample )(0x[0-9a-f]+)",
              lambda m: m.group(1) + hex(int(m.group(2), 16) + 0x40), text)
open(sys.argv[1], "w").write(text)
PY
	judge_negative "the locked CPU's sample not the plugin's EDPCSR read" \
		"capture samples: CPU0's sample 0x" "${locked[@]}" --dir "$c" || rc=1
	# How much of the sink the locked CPU took after the crash: 16 more bytes counted by the
	# plugin than csdump finds (the armed run: none); the unarmed run's count below the sink's
	# size, so that csdump's "none of the panicking CPU's trace is left" is not what happened.
	c=$d/after
	judge_copy "$RUNS/trace-kdump-hardlockup" "$c"
	plugin_log_add "$c/plugin.log" "tmc stopped: .*?trace bytes \d+ by cpu " 16 || return 1
	judge_negative "16 bytes of the locked CPU counted after the crash" \
		"locked CPU0: csdump says its trace took 0 bytes of the sink after the panicking CPU1's trace ended, the plugin counted 16" \
		"${locked[@]}" --dir "$c" || rc=1
	c=$d/overwritten
	judge_copy "$RUNS/trace-kdump-hardlockup-unarmed" "$c"
	python3 - "$c/plugin.log" <<'PY' || return 1
import re, sys
text = open(sys.argv[1]).read()
stop = re.search(r"etm 1: stop point .*?trace bytes \d+ by cpu (\d+)", text)
m = re.search(r"(tmc stopped: .*?trace bytes \d+ by cpu )(\d+)", text)
text = text[:m.start(2)] + str(int(stop.group(1)) + 1000) + text[m.end(2):]
open(sys.argv[1], "w").write(text)
PY
	python3 - "$REPO/scripts" "$c" >"$c.txt" 2>&1 <<'PY'
import json, sys, types
sys.path.insert(0, sys.argv[1])
import check_trace
rep = json.load(open(f"{sys.argv[2]}/report.json"))
try:
    check_trace.check_locked_cpu(types.SimpleNamespace(dir=sys.argv[2], panic_cpu=1, locked_cpu="0:lkdtm_HARDLOCKUP"), rep)
except check_trace.Bad as e:
    sys.exit(str(e))
PY
	if [ $? = 0 ] || ! grep -q "csdump finds none of the panicking CPU1's trace in the sink" "$c.txt"; then
		echo "harness did not detect: the locked CPU's 1000 bytes after the crash said to overwrite a 256 KiB sink ($c.txt)" >&2
		rc=1
	else
		echo "harness detected: the locked CPU's 1000 bytes after the crash said to overwrite a 256 KiB sink"
	fi
	return $rc
}

ALL=(sample-qemu-dump sample-kdump sample-builtin amba-probe cpu-debug-module cpu-debug-builtin dump-qemu-dump dump-cleaned dump-builtin dump-kdump dump-warm-reboot
	dump-warm-corrupt dump-hung-callback dump-nested-panic dump-dt-region dump-dt-kdump harness-dt-kdump-no-core dump-region-full harness-bad-input harness-no-module harness-no-panic harness-wrong-record
	trace-kdump trace-kdump-plain trace-kdump-plain-no-driver trace-kdump-hardlockup trace-kdump-hardlockup-unarmed harness-kdump-plain trace-dt-kdump trace-builtin trace-smp8 trace-warm-reboot harness-last-dump trace-oops trace-irq-oops trace-module-oops trace-gdb trace-two-cpus trace-no-hw-stop trace-tmc-stuck trace-tmc-never-empty trace-tmc-never-ready
	trace-tmc-flush-stuck trace-debug-power-off trace-debug-ignore-corepurq trace-debug-all-off trace-debug-double-lock trace-etm-os-lock
	trace-etm-never-idle trace-unload harness-trace-ground-truth harness-exec-record coresight-devmem
	harness-coresight-wrong-id upstream-drivers devfile-etf harness-devfile devfile-etr harness-devfile-etr tmc-sysfs-listing harness-judges perf-cpu-wide perf-per-thread harness-perf
	perf-filter harness-perf-filter perf-pause harness-perf-pause perf-snapshot perf-panic harness-perf-snapshot
	trace-etr-kdump trace-etr-kdump-plain trace-etr-dma-kdump-plain trace-etr-warm-reboot harness-crash-device trace-etr-dma trace-etr-never-ready upstream-etr tmc-etr-sysfs-listing
	perf-etr perf-etr-snapshot perf-etr-panic harness-perf-etr upstream-perf upstream-perf-snapshot harness-upstream-perf
	devfile-etb harness-devfile-etb upstream-etb tmc-etb-sysfs-listing trace-exclude-user harness-exclude-user trace-etm-range harness-etm-range trace-etm-exclude-range etm-sysfs-listing trace-hotplug harness-hotplug trace-cpu-pm harness-cpu-pm trace-late-cpu upstream-hotplug)

# Dies unless the cache directory, QEMU and the module variant's kernel and initramfs are there
# (what the benchmarks' boots need).
require_mod_guest() {
	ensure_cache_dir
	command -v qemu-system-aarch64 >/dev/null ||
		die "qemu-system-aarch64 is missing: run scripts/setup.sh (package qemu-system-arm)"
	[ -f "$(kernel_of mod)" ] || die "no kernel $(kernel_of mod): run scripts/kernel.sh all mod"
	[ -f "$(initrd_of mod)" ] || die "no initramfs $(initrd_of mod): run scripts/initramfs.sh mod"
}

# keep_failed NAME: what a failed scenario's guest said (its last "CSPD:" lines), in the log, and
# its run directory's small files kept in NAME.failed (a later scenario may run NAME again).
keep_failed() {
	local d=$RUNS/$1 f
	[ -d "$d" ] || return 0
	if [ -f "$d/console.log" ]; then
		echo "--- $1: the guest's last words (console.log):"
		grep -a "^CSPD: " "$d/console.log" | grep -av "^CSPD: module: \|tmc listing:" | tail -n 25
	fi
	rm -rf "$d.failed"
	mkdir -p "$d.failed"
	(cd "$d" && find . -maxdepth 2 -type f -size -64M -exec cp --parents -t "$d.failed" {} +) 2>/dev/null
	return 0
}

# The scenarios whose runs a scenario reads (it runs them itself when their files are missing): in
# a parallel run (CSPD_E2E_JOBS) it starts after them, and never beside another that needs the same.
declare -A NEEDS=(
	[dump-warm-corrupt]="dump-warm-reboot"
	[harness-wrong-record]="sample-qemu-dump"
	[harness-trace-ground-truth]="trace-builtin"
	[harness-last-dump]="trace-warm-reboot"
	[harness-crash-device]="trace-etr-warm-reboot"
	[trace-gdb]="trace-kdump trace-builtin trace-module-oops trace-kdump-plain"
	[harness-coresight-wrong-id]="coresight-devmem"
	[harness-devfile]="devfile-etf"
	[harness-devfile-etr]="devfile-etr"
	[harness-devfile-etb]="devfile-etb"
	[tmc-etb-sysfs-listing]="upstream-etb devfile-etb"
	[etm-sysfs-listing]="upstream-drivers trace-builtin"
	[harness-exclude-user]="trace-exclude-user trace-no-hw-stop"
	[harness-etm-range]="trace-etm-range trace-builtin trace-etm-exclude-range"
	[tmc-sysfs-listing]="upstream-drivers trace-builtin"
	[tmc-etr-sysfs-listing]="upstream-etr trace-etr-warm-reboot"
	[harness-judges]="trace-builtin trace-oops trace-module-oops dump-qemu-dump dump-cleaned upstream-drivers"
	[harness-perf]="perf-cpu-wide perf-per-thread"
	[perf-filter]="perf-filter-start-stop"
	[harness-perf-filter]="perf-filter perf-filter-start-stop"
	[harness-perf-pause]="perf-pause"
	[harness-perf-snapshot]="perf-snapshot perf-panic"
	[harness-perf-etr]="perf-etr perf-etr-snapshot perf-etr-panic"
	[harness-upstream-perf]="upstream-perf upstream-perf-snapshot"
	[harness-kdump-plain]="trace-kdump-plain trace-kdump trace-kdump-hardlockup trace-kdump-hardlockup-unarmed"
)

# run_scenario NAME: runs it, says how it went and how long it took.
run_scenario() {
	local s=$1 start=$SECONDS
	if "scenario_$s"; then
		say "e2e: $s passed ($((SECONDS - start)) s)"
	else
		say "e2e: $s FAILED ($((SECONDS - start)) s; logs in $RUNS/$s)"
		keep_failed "$s"
		return 1
	fi
}

# What the slower scenarios took, in seconds, two at a time in a clean-clone run: a parallel run
# starts the longest chains first (a scenario's own time and that of those that need it), so
# that no long one starts last beside an idle slot. Unlisted ones count as 10 s.
declare -A COST=(
	[devfile-etr]=151 [devfile-etf]=89 [harness-perf-pause]=81 [trace-etr-kdump]=79 [trace-kdump]=74
	[devfile-etb]=74 [harness-exec-record]=71 [harness-devfile-etr]=69 [upstream-etr]=64 [perf-filter]=59
	[harness-perf-etr]=57 [trace-etr-warm-reboot]=56 [harness-judges]=54 [harness-perf-snapshot]=51
	[trace-etr-dma]=48 [perf-etr-panic]=48 [harness-perf-filter]=48 [perf-snapshot]=47 [perf-etr-snapshot]=42
	[trace-dt-kdump]=39 [harness-perf]=38 [trace-smp8]=36 [trace-etr-never-ready]=36 [perf-pause]=36
	[perf-etr]=36 [harness-devfile]=36 [trace-warm-reboot]=35 [upstream-perf-snapshot]=33 [trace-gdb]=33
	[perf-cpu-wide]=33 [upstream-drivers]=32 [dump-kdump]=29 [upstream-perf]=28 [trace-irq-oops]=27
	[perf-panic]=26 [upstream-etb]=25 [perf-per-thread]=25 [trace-kdump-hardlockup]=48
	[trace-kdump-hardlockup-unarmed]=37 [trace-kdump-plain]=31 [trace-etr-dma-kdump-plain]=56
)

# by_cost NAME...: the names, the longest chain first (COST of the scenario and of those that
# NEED it), the list's order among equals.
by_cost() {
	local s n i=0 w
	for s in "$@"; do
		w=${COST[$s]:-10}
		for n in "${!NEEDS[@]}"; do
			[[ " ${NEEDS[$n]} " != *" $s "* ]] || w=$((w + ${COST[$n]:-10}))
		done
		printf '%06d %04d %s\n' "$w" "$i" "$s"
		i=$((i + 1))
	done | sort -k1,1nr -k2,2n | cut -d' ' -f3
}

# run_parallel JOBS NAME...: the scenarios JOBS at a time, each after the ones it NEEDS that are in
# the list; a scenario's output is printed whole when it ends. Sets `failures`.
run_parallel() {
	local jobs=$1 s n pid rc ready bad
	shift
	local -a pending=("$@")
	local -A state=() running=() log=()
	local logs=$RUNS/.logs
	mkdir -p "$logs"
	for s in "$@"; do state[$s]=pending; done
	while [ ${#pending[@]} -gt 0 ] || [ ${#running[@]} -gt 0 ]; do
		while [ ${#running[@]} -lt "$jobs" ]; do
			ready=""
			for s in "${pending[@]}"; do
				scenario_ready "$s" && { ready=$s; break; }
			done
			[ -n "$ready" ] || break
			local -a left=()
			for n in "${pending[@]}"; do [ "$n" = "$ready" ] || left+=("$n"); done
			pending=("${left[@]}")
			log[$ready]=$logs/$ready.log
			bad=""
			for n in ${NEEDS[$ready]:-}; do
				[ "${state[$n]:-}" != failed ] || bad=$n
			done
			if [ -n "$bad" ]; then
				say "e2e: $ready FAILED (not run: it needs $bad's run, which failed)"
				state[$ready]=failed
				failures+=("$ready")
				continue
			fi
			state[$ready]=running
			say "e2e: $ready started"
			run_scenario "$ready" >"${log[$ready]}" 2>&1 &
			running[$!]=$ready
		done
		[ ${#running[@]} -gt 0 ] || die "e2e: none of ${pending[*]} can start (NEEDS)"
		rc=0
		wait -n -p pid "${!running[@]}" || rc=$?
		s=${running[$pid]}
		unset "running[$pid]"
		cat "${log[$s]}"
		if [ $rc = 0 ]; then state[$s]=passed; else state[$s]=failed; failures+=("$s"); fi
	done
}

# scenario_ready NAME (in run_parallel): every scenario NAME needs from the list has ended, and
# no running scenario is one NAME needs or needs one of those NAME needs that are not in the list.
scenario_ready() {
	local s=$1 n r
	for n in ${NEEDS[$s]:-}; do
		case ${state[$n]:-unlisted} in
		pending | running) return 1 ;;
		unlisted)
			for r in "${running[@]}"; do
				[ "$r" != "$n" ] || return 1
				[[ " ${NEEDS[$r]:-} " != *" $n "* ]] || return 1
			done
			;;
		esac
	done
	return 0
}

main() {
	ensure_cache_dir
	command -v qemu-system-aarch64 >/dev/null ||
		die "qemu-system-aarch64 is missing: run scripts/setup.sh (package qemu-system-arm)"
	CSDUMP=${CSDUMP:-$REPO/target/release/csdump}
	(cd "$REPO" && cargo build --release --locked -q -p csdump) || die "could not build csdump"
	# csdump's vmcore reader against libkdumpfile, its test oracle (check_vmcores.py --oracle).
	VMCORE_ORACLE=$REPO/target/release/examples/vmcore_oracle
	(cd "$REPO" && cargo build --release --locked -q -p csdump --example vmcore_oracle) ||
		die "could not build the vmcore oracle"
	local -a list=("$@")
	[ ${#list[@]} -gt 0 ] || list=("${ALL[@]}")
	local s n jobs=${CSPD_E2E_JOBS:-$(nproc)}
	failures=()
	for s in "${list[@]}"; do
		declare -F "scenario_$s" >/dev/null || die "unknown scenario '$s' (known: ${ALL[*]})"
	done
	[[ $jobs =~ ^[1-9][0-9]*$ ]] || die "CSPD_E2E_JOBS=$jobs: give the number of scenarios to run at once (1 or more)"
	# Two at a time by default: a scenario's guest and judges keep about one core busy on average.
	[ -n "${CSPD_E2E_JOBS:-}" ] || [ "$jobs" -le 2 ] || jobs=2
	if [ "$jobs" = 1 ] || [ ${#list[@]} = 1 ]; then
		for s in "${list[@]}"; do
			say "e2e: $s"
			run_scenario "$s" || failures+=("$s")
		done
	else
		say "e2e: ${#list[@]} scenarios, $jobs at a time (CSPD_E2E_JOBS)"
		mapfile -t list < <(by_cost "${list[@]}")
		run_parallel "$jobs" "${list[@]}"
	fi
	echo "e2e: $((${#list[@]} - ${#failures[@]})) passed, ${#failures[@]} failed"
	[ ${#failures[@]} = 0 ] || die "failed scenarios: ${failures[*]}"
}

# scripts/bench-plugin.sh sources this file for make_dtb and the run settings.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
	main "$@"
fi
