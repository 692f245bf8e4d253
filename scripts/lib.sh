# Shared settings and helpers for the project's scripts. Sourced, not run.
# shellcheck shell=bash

set -euo pipefail

# The repository root (this file lives in scripts/).
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# Everything big or downloaded lives outside the repo, in one cache directory.
CSPD_CACHE=${CSPD_CACHE:-/var/tmp/coresight-panic-dump}
# Pristine kernel source tree, extracted from Debian's linux-source-7.3.
KSRC=${KSRC:-$CSPD_CACHE/linux-src}
# Out-of-tree kernel build directory (O=).
KOUT=${KOUT:-$CSPD_CACHE/build}
# Downloaded .deb files (kernel source, arm64 guest userland).
DEBS=$CSPD_CACHE/debs
# The kernel version the overlay is written for.
KVERSION_WANT=7.3
# bindgen-cli version the kernel build uses.
BINDGEN_VERSION=0.72.1
LLVM_SUFFIX=-19

# Kernel make invocation: RUSTC and friends are plain Makefile assignments,
# so they must be given on the command line, not in the environment.
kmake() {
	make -C "$KSRC" O="$KOUT" ARCH=arm64 LLVM="$LLVM_SUFFIX" \
		RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc HOSTRUSTC=/usr/bin/rustc \
		BINDGEN=/usr/local/bin/bindgen CLIPPY_DRIVER=/usr/bin/clippy-driver RUSTFMT=/usr/bin/rustfmt "$@"
}

say() { printf '==> %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Fail early with a clear message when the cache directory cannot be used.
ensure_cache_dir() {
	mkdir -p "$CSPD_CACHE" 2>/dev/null || die "cannot create cache directory $CSPD_CACHE (set CSPD_CACHE to a writable place)"
	local probe="$CSPD_CACHE/.write-test.$$"
	if ! : >"$probe" 2>/dev/null; then
		die "cache directory $CSPD_CACHE is not writable (set CSPD_CACHE to a writable place)"
	fi
	rm -f "$probe"
	cache_lock
}

# One run at a time per cache directory: the kernel trees, the overlay links and the e2e run
# directories are shared, and two kernel builds at once would thrash two cores. The lock is
# held until the script exits; scripts it starts inherit it (CSPD_CACHE_LOCKED). To hold it
# across several commands: flock "$CSPD_CACHE/.lock" env CSPD_CACHE_LOCKED=1 make ...
cache_lock() {
	[ -z "${CSPD_CACHE_LOCKED:-}" ] || return 0
	exec 9>>"$CSPD_CACHE/.lock"
	if ! flock -n 9; then
		say "waiting for another run that holds $CSPD_CACHE/.lock"
		flock 9
	fi
	export CSPD_CACHE_LOCKED=1
}
