#!/usr/bin/env bash
# Build the host's perf: an x86-64 perf from the Linux 7.3 tree's tools/perf that decodes CoreSight.
#
#   scripts/host-perf.sh
#
# Writes $CSPD_CACHE/perf-host/perf (the build tree is perf-host/build). The guest's perf
# (scripts/guest-perf.sh) is 7.3's: its perf.data has fields bookworm's perf 6.1 refuses ("uses
# a more recent and unsupported ABI"), so the judges of perf mode (scripts/check_perf.py) read it
# with a perf from the same tree. Built with CORESIGHT=1 against the OpenCSD 1.5.5 that
# scripts/setup.sh builds from Debian's source package ($CSPD_CACHE/opencsd/lib: its headers and
# static libraries, linked in with libstdc++, so the system's older libopencsd is never loaded).
# Only what `perf script` and `perf report -D` on cs_etm's AUX trace need: libelf (symbols of
# vmlinux and the .ko files) and zlib; no scripting, TUI, DWARF, unwinding, BPF, libtraceevent,
# JSON events, compression or disassemblers. The tree carries scripts/patches/ (scripts/kernel.sh
# source applies them): perf-cs-etm-flush-at-block-end.patch, without which the last branches of
# an AUX buffer are dropped now and then. Skipped when the binary was built from the same
# inputs (kernel source, OpenCSD, compiler, options, this script); other inputs build it from
# scratch, an interrupted build resumes.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ensure_cache_dir
OPENCSD=${OPENCSD_DIR:-$CSPD_CACHE/opencsd/lib}
dest=$CSPD_CACHE/perf-host
build=$dest/build

for t in gcc g++ flex bison make pkg-config; do
	command -v "$t" >/dev/null || die "no $t, which perf's build runs: run scripts/setup.sh"
done
for f in libelf.h zlib.h; do
	[ -f "/usr/include/$f" ] || die "no /usr/include/$f (packages libelf-dev, zlib1g-dev): run scripts/setup.sh"
done
for f in include/opencsd/c_api/opencsd_c_api.h include/opencsd/ocsd_if_version.h lib/libopencsd.a lib/libopencsd_c_api.a; do
	[ -f "$OPENCSD/$f" ] || die "no OpenCSD $f in $OPENCSD: run scripts/setup.sh"
done
ocsd_version=$(awk '/define OCSD_VER_STRING/ {gsub(/"/, "", $3); print $3}' "$OPENCSD/include/opencsd/ocsd_if_version.h")
bash "$REPO/scripts/kernel.sh" source
[ -f "$KSRC/tools/perf/Makefile.perf" ] || die "no tools/perf in $KSRC"

# Everything perf's make is given besides -C, -f, O= and -j. OPENCSDLIBS on the command line
# replaces Makefile.config's (-lopencsd_c_api -lopencsd, -lstdc++ only for a static perf): the
# libraries are static C++ archives, for its feature check and for the link alike. (Through
# Makefile.perf itself: tools/perf/Makefile passes command-line variables on in the environment,
# where Makefile.config's assignments override them.)
PERF_ARGS=(
	WERROR=0 prefix=/usr
	CORESIGHT=1 CSINCLUDES="$OPENCSD/include" CSLIBS="$OPENCSD/lib"
	OPENCSDLIBS="-lopencsd_c_api -lopencsd -lstdc++"
	NO_LIBPYTHON=1 NO_SLANG=1 NO_GTK2=1 NO_LIBDW=1 NO_LIBUNWIND=1 NO_LIBBPF=1 BUILD_BPF_SKEL=0
	NO_LIBNUMA=1 NO_JEVENTS=1 NO_LIBTRACEEVENT=1 NO_BABELTRACE2=1 NO_LIBZSTD=1 NO_LZMA=1
	NO_CAPSTONE=1 NO_LIBPFM4=1 NO_LIBLLVM=1 NO_DEMANGLE=1 NO_LIBDEBUGINFOD=1 NO_SDT=1 NO_JVMTI=1
	NO_RUST=1 NO_SHELLCHECK=1
)

# What the binary is made of; a change rebuilds it.
inputs=$(
	sed -n 's/^\(VERSION\|PATCHLEVEL\|SUBLEVEL\|EXTRAVERSION\) = /\1 /p' "$KSRC/Makefile"
	for deb in "$DEBS"/linux-source-7.3_*.deb "$CSPD_CACHE"/opencsd/libopencsd_*.orig.tar.*; do
		[ ! -f "$deb" ] || printf 'source %s\n' "${deb##*/}"
	done
	printf 'OpenCSD %s\n' "$ocsd_version"
	sha256sum "$OPENCSD/lib/libopencsd.a" "$OPENCSD/lib/libopencsd_c_api.a" | cut -d' ' -f1
	gcc --version | sed -n 1p
	printf '%s\n' "${PERF_ARGS[@]}"
	sha256sum <"$REPO/scripts/host-perf.sh"
	cat "$REPO"/scripts/patches/*.patch | sha256sum
)
if [ -x "$dest/perf" ] && [ "$(cat "$dest/perf.inputs" 2>/dev/null)" = "$inputs" ]; then
	say "have host perf with CoreSight decoding (OpenCSD $ocsd_version) in $dest"
	exit 0
fi

rm -f "$dest/perf" "$dest/perf.inputs"
# perf's make does not see a new OpenCSD, compiler or set of options: other inputs, a clean tree.
if [ -f "$build/.cspd-inputs" ] && [ "$(cat "$build/.cspd-inputs")" != "$inputs" ]; then
	say "the inputs of $build changed: building it from scratch"
	rm -rf "$build"
fi
say "building the host's perf (CoreSight decoding, OpenCSD $ocsd_version) from $KSRC/tools/perf into $build (about a minute)"
start=$SECONDS
mkdir -p "$build"
printf '%s\n' "$inputs" >"$build/.cspd-inputs"
if ! nice -n 10 make -C "$KSRC/tools/perf" -f Makefile.perf O="$build" -j2 "${PERF_ARGS[@]}" perf >"$dest/build.log" 2>&1; then
	tail -n 40 "$dest/build.log"
	die "host perf build failed (log: $dest/build.log)"
fi
# The decoder must be in: perf says which features it was built with.
"$build/perf" version --build-options >"$dest/build-options.txt" 2>&1 ||
	die "$build/perf does not run: $(tail -n 3 "$dest/build-options.txt")"
grep -qE 'libopencsd: \[ on  \]' "$dest/build-options.txt" ||
	die "$build/perf was built without OpenCSD: $(grep -i opencsd "$dest/build-options.txt")"
! ldd "$build/perf" | grep -q opencsd || die "$build/perf loads a shared OpenCSD: $(ldd "$build/perf" | grep opencsd)"
cp "$build/perf" "$dest/perf.tmp"
mv "$dest/perf.tmp" "$dest/perf"
printf '%s\n' "$inputs" >"$dest/perf.inputs"
say "host perf in $dest/perf (OpenCSD $ocsd_version linked in), built in $((SECONDS - start)) s"
