#!/usr/bin/env bash
# Bounded fuzzing of csdump (`make fuzz`, part of `make check`): the fuzz target runs what
# `info`, `perf` and `report` run (csdump::fuzz_entry) on regions, vmcores of every format (ELF,
# kdump-compressed with zlib, lzo, snappy and zstd pages, flattened, gzip'ed), snapshot
# directories, a dump with a real vmlinux, and GDB sessions. No C code parses a vmcore in csdump
# (its readers and decompressors are Rust); OpenCSD (C++) decodes the trace. cargo-fuzz on the
# stable toolchain: no sanitizer (`-s none`; ASan needs nightly), libFuzzer's coverage guidance
# and its crash detection (any panic is a crash).
#
#   scripts/fuzz.sh [SECONDS]      default 60
#
# CSPD_FUZZ_ASAN=1: the same run with AddressSanitizer on the nightly toolchain (`-s address`),
# OpenCSD rebuilt with clang (ASan and libFuzzer's coverage, so that its C++ is both checked and
# guided; into $CSPD_CACHE/opencsd/asan, from the source package setup.sh fetched). Not part of
# `make check` (nightly, and about five minutes of builds).
#
# Repeatable: the corpus is made afresh from the robustness test's seeds in
# $CSPD_CACHE/fuzz/csdump and libFuzzer runs with a fixed -seed (CSPD_FUZZ_SEED, default 1).
# At the end the target prints how many inputs of each kind ran; a kind that never ran fails the
# run, as does a crash (its input is left in tools/csdump/fuzz/artifacts/).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

secs=${1:-60}
seed=${CSPD_FUZZ_SEED:-1}
command -v cargo-fuzz >/dev/null || die "cargo-fuzz is not installed (scripts/setup.sh installs it)"
corpus=$CSPD_CACHE/fuzz/csdump
rm -rf "$corpus"
mkdir -p "$corpus"
say "fuzz seeds into $corpus"
(cd "$REPO" && CSPD_FUZZ_SEEDS=$corpus cargo test --locked -q -p csdump --test robustness fuzz_seeds_reach_the_readers)
if [ "${CSPD_FUZZ_ASAN:-0}" = 1 ]; then
	asan=$CSPD_CACHE/opencsd/asan
	if [ ! -f "$asan/lib/libopencsd_c_api.a" ]; then
		tarball=$(ls "$CSPD_CACHE"/opencsd/libopencsd_*.orig.tar.* 2>/dev/null | head -n1 || true)
		[ -n "$tarball" ] || die "no OpenCSD source package in $CSPD_CACHE/opencsd (run scripts/setup.sh)"
		command -v clang++-19 >/dev/null || die "clang++-19 is missing (apt-get install clang-19)"
		say "building OpenCSD with clang, ASan and libFuzzer's coverage into $asan"
		src=$(mktemp -d)
		tar -xf "$tarball" -C "$src" --strip-components=1
		flags=(-fsanitize=address -fsanitize=fuzzer-no-link -fPIC -std=c++11 -O2 -DNDEBUG
			-I"$src/decoder/include" -I"$src/decoder/source")
		mkdir -p "$src/obj/lib" "$src/obj/capi" "$asan.tmp/lib"
		# The library's sources as its makefiles list them: everything under source/ but the
		# C API, which is its own library.
		while IFS= read -r f; do
			o=$src/obj/lib/$(echo "${f#"$src"/decoder/source/}" | tr / _).o
			clang++-19 "${flags[@]}" -c "$f" -o "$o" || die "OpenCSD (ASan): $f does not build"
		done < <(find "$src/decoder/source" -name '*.cpp' -not -path '*/c_api/*' | sort)
		for f in "$src"/decoder/source/c_api/*.cpp; do
			clang++-19 "${flags[@]}" -c "$f" -o "$src/obj/capi/$(basename "$f" .cpp).o" ||
				die "OpenCSD (ASan): $f does not build"
		done
		ar rcs "$asan.tmp/lib/libopencsd.a" "$src"/obj/lib/*.o
		ar rcs "$asan.tmp/lib/libopencsd_c_api.a" "$src"/obj/capi/*.o
		cp -r "$src/decoder/include" "$asan.tmp/include"
		rm -rf "$asan" "$src" && mv "$asan.tmp" "$asan"
	fi
	export OPENCSD_DIR=$asan
	sanitizer=(+nightly fuzz run -s address)
else
	sanitizer=(fuzz run -s none)
fi
say "cargo ${sanitizer[*]} parse, $secs s, -seed=$seed"
cd "$REPO/tools/csdump"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
# The fuzz build lives in the cache: a fresh clone rebuilds only this repository's crates, not
# every dependency with the fuzzer's instrumentation (about a minute).
cargo "${sanitizer[@]}" --target-dir "$CSPD_CACHE/fuzz-target" parse "$corpus" -- \
	-seed="$seed" -max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -max_len=262144 \
	-print_final_stats=1 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || die "fuzzing found a crash (exit $rc): see tools/csdump/fuzz/artifacts/"
counts=$(grep -o 'csdump fuzz: executions by input kind: .*' "$log" | tail -n 1)
[ -n "$counts" ] || die "the fuzz target did not print its per-kind counts"
say "${counts#csdump fuzz: }"
for kind in "region/raw" "ELF vmcore" "kdump-compressed" "flattened" "gzip" "snapshot" "dump+vmlinux" "gdb"; do
	n=$(sed -n "s|.*[:,] $kind \([0-9]*\).*|\1|p" <<<"$counts")
	[ "${n:-0}" -gt 0 ] || die "fuzzing ran no input of kind '$kind'"
done
say "fuzzing: no crash in $secs s with -seed=$seed ($(ls "$corpus" | wc -l) inputs in the corpus)"
