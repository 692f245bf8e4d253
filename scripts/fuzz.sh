#!/usr/bin/env bash
# Bounded fuzzing of csdump (`make fuzz`, part of `make check`): the fuzz target reads regions,
# vmcores, snapshot directories, a dump with a --vmlinux, and builds the report (decoded in
# process). cargo-fuzz on the stable toolchain: no sanitizer (`-s none`; ASan needs nightly),
# libFuzzer's coverage guidance and its crash detection (any panic is a crash).
#
#   scripts/fuzz.sh [SECONDS]      default 60
#
# The corpus lives in $CSPD_CACHE/fuzz/csdump, seeded by the robustness test's seeds; a crash
# leaves its input in tools/csdump/fuzz/artifacts/ and fails the run.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

secs=${1:-60}
command -v cargo-fuzz >/dev/null || die "cargo-fuzz is not installed (scripts/setup.sh installs it)"
corpus=$CSPD_CACHE/fuzz/csdump
mkdir -p "$corpus"
say "fuzz seeds into $corpus"
(cd "$REPO" && CSPD_FUZZ_SEEDS=$corpus cargo test --locked -q -p csdump --test robustness fuzz_seeds_reach_the_readers)
say "cargo fuzz run -s none parse, $secs s"
cd "$REPO/tools/csdump"
cargo fuzz run -s none parse "$corpus" -- \
	-max_total_time="$secs" -timeout=20 -rss_limit_mb=4096 -max_len=262144 -print_final_stats=1
say "fuzzing: no crash in $secs s ($(ls "$corpus" | wc -l) inputs in the corpus)"
