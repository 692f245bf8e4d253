#!/usr/bin/env bash
# Build the guest's perf: a statically linked arm64 perf from the Linux 7.3 tree's tools/perf.
#
#   scripts/guest-perf.sh
#
# Writes $CSPD_CACHE/perf-arm64/perf (stripped; the build tree is perf-arm64/build), which
# scripts/initramfs.sh puts at /bin/perf in every variant's main initramfs. Compiled by clang-19
# for aarch64-linux-gnu against the bookworm arm64 sysroot scripts/setup.sh extracts
# ($CSPD_CACHE/perf-sysroot), linked by lld with -static. Only what recording cs_etm's AUX trace
# in the guest needs: libelf (perf record writes the build-ids of the kernel and the DSOs, no
# --no-buildid needed) and zlib; no OpenCSD (the host decodes), no scripting, TUI, DWARF,
# unwinding, BPF, libtraceevent, JSON events or compression. Skipped when the binary was built
# from the same inputs (kernel source, sysroot packages, compiler, options, this script); other
# inputs build it from scratch, an interrupted build resumes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_cache_dir
SYSROOT=$CSPD_CACHE/perf-sysroot
dest=$CSPD_CACHE/perf-arm64
build=$dest/build
CLANG=clang$LLVM_SUFFIX

command -v "$CLANG" >/dev/null || die "no $CLANG: run scripts/setup.sh"
command -v "ld.lld$LLVM_SUFFIX" >/dev/null || die "no ld.lld$LLVM_SUFFIX: run scripts/setup.sh"
for t in flex bison make pkg-config; do
	command -v "$t" >/dev/null || die "no $t, which perf's build runs: run scripts/setup.sh"
done
for f in libc.a libelf.a libz.a; do
	[ -f "$SYSROOT/usr/lib/aarch64-linux-gnu/$f" ] || die "no arm64 sysroot for perf in $SYSROOT: run scripts/setup.sh"
done
bash "$REPO/scripts/kernel.sh" source
[ -f "$KSRC/tools/perf/Makefile.perf" ] || die "no tools/perf in $KSRC"

# Everything perf's make is given besides -C, O= and -j. The LLVM=-19 of tools/scripts/Makefile.include
# makes CC clang-19 (Makefile.config adds --target=aarch64-linux-gnu for ARCH=arm64), LD ld.lld-19,
# AR llvm-ar-19, and HOSTCC clang-19 for the host programs the build runs (fixdep and the like).
PERF_ARGS=(
	ARCH=arm64 LLVM="$LLVM_SUFFIX" WERROR=0 prefix=/usr
	EXTRA_CFLAGS="--sysroot=$SYSROOT"
	LDFLAGS="-static -fuse-ld=lld --sysroot=$SYSROOT"
	NO_LIBPYTHON=1 NO_SLANG=1 NO_LIBDW=1 NO_LIBBPF=1 BUILD_BPF_SKEL=0 NO_LIBNUMA=1 NO_JEVENTS=1
	NO_LIBTRACEEVENT=1 NO_BABELTRACE2=1 NO_LIBZSTD=1 NO_LZMA=1 NO_CAPSTONE=1 NO_LIBPFM4=1
	NO_LIBLLVM=1 NO_DEMANGLE=1 NO_LIBDEBUGINFOD=1 NO_SDT=1 NO_JVMTI=1 NO_RUST=1
	NO_PERF_READ_VDSO32=1 NO_SHELLCHECK=1
)

# What the binary is made of; a change rebuilds it.
inputs=$(
	sed -n 's/^\(VERSION\|PATCHLEVEL\|SUBLEVEL\|EXTRAVERSION\) = /\1 /p' "$KSRC/Makefile"
	for deb in "$DEBS"/linux-source-7.3_*.deb "$DEBS"/arm64-perf-sysroot/*.deb; do
		[ ! -f "$deb" ] || printf 'deb %s\n' "${deb##*/}"
	done
	"$CLANG" --version | sed -n 1p
	printf '%s\n' "${PERF_ARGS[@]}"
	sha256sum <"$REPO/scripts/guest-perf.sh"
)
if [ -x "$dest/perf" ] && [ "$(cat "$dest/perf.inputs" 2>/dev/null)" = "$inputs" ]; then
	say "have arm64 perf ($(du -h "$dest/perf" | cut -f1)) in $dest"
	exit 0
fi

rm -f "$dest/perf" "$dest/perf.inputs"
# perf's make does not see a new sysroot, compiler or set of options: other inputs, a clean tree.
if [ -f "$build/.cspd-inputs" ] && [ "$(cat "$build/.cspd-inputs")" != "$inputs" ]; then
	say "the inputs of $build changed: building it from scratch"
	rm -rf "$build"
fi
say "building a static arm64 perf from $KSRC/tools/perf into $build (about a minute)"
start=$SECONDS
mkdir -p "$build"
printf '%s\n' "$inputs" >"$build/.cspd-inputs"
# pkg-config looks in the sysroot only: no host library may leak into the arm64 link.
if ! PKG_CONFIG_LIBDIR="$SYSROOT/usr/lib/aarch64-linux-gnu/pkgconfig:$SYSROOT/usr/share/pkgconfig" \
	PKG_CONFIG_SYSROOT_DIR="$SYSROOT" \
	nice -n 10 make -C "$KSRC/tools/perf" O="$build" -j2 "${PERF_ARGS[@]}" perf >"$dest/build.log" 2>&1; then
	tail -n 40 "$dest/build.log"
	die "perf build failed (log: $dest/build.log)"
fi
elf=$("llvm-readelf$LLVM_SUFFIX" -h -l "$build/perf")
grep -q 'Machine: *AArch64' <<<"$elf" || die "$build/perf is not an arm64 executable"
! grep -q 'INTERP' <<<"$elf" || die "$build/perf is not statically linked"
"llvm-strip$LLVM_SUFFIX" -o "$dest/perf.tmp" "$build/perf"
mv "$dest/perf.tmp" "$dest/perf"
printf '%s\n' "$inputs" >"$dest/perf.inputs"
say "arm64 perf in $dest/perf ($(du -h "$dest/perf" | cut -f1), static), built in $((SECONDS - start)) s"
