#!/usr/bin/env bash
# Install everything the project needs, from Debian's archive and crates.io only.
#
# Idempotent: each step checks whether its result is already there and says
# "have" instead of doing it again. Run as root.
#
#   scripts/setup.sh            everything
#
# Environment: CSPD_CACHE (default /var/tmp/coresight-panic-dump) holds the
# downloaded .deb files and the private apt state used to fetch them.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[ "$(id -u)" = 0 ] || die "setup.sh installs packages and must run as root"
ensure_cache_dir
mkdir -p "$DEBS"

# Host packages from bookworm (and bookworm-security for the Rust toolchain).
HOST_PKGS=(
	# kernel build
	make bc flex bison libelf-dev cpio xz-utils gzip python3 kmod ca-certificates git
	# allmodconfig (scripts/kernel.sh allmod) signs modules: its scripts/sign-file needs OpenSSL
	libssl-dev
	# checkpatch.pl needs the whole perl (a minimal Debian has only perl-base)
	perl
	# bench-csdump measures csdump's peak RSS with GNU time: a child's own rusage would count
	# the memory of the bench that spawned it (vfork), not csdump's
	time
	# LLVM for LLVM=-19 kernel builds
	clang-19 lld-19 llvm-19 libclang1-19
	# Rust 1.96 with its library source, which the kernel compiles against
	rustc-web cargo-web rust-web-src rustfmt-web rust-web-clippy
	# guest and capture
	qemu-system-arm device-tree-compiler
	# csdump decodes with OpenCSD's library; perf and trc_pkt_lister judge what it writes
	linux-perf libopencsd-bin libopencsd-dev
	# the host's perf of the kernel tree (scripts/host-perf.sh) links libelf and zlib
	zlib1g-dev
	# cargo-fuzz's libfuzzer-sys builds libFuzzer (C++)
	g++
	# csdump's vmcore reader (ELF and makedumpfile's kdump-compressed dumps)
	libkdumpfile-dev
	# make dt_binding_check: a venv for dtschema, and dtc with YAML output
	# (pylibfdt, a dtschema dependency, is built from source against Python.h)
	python3-venv python3-dev libyaml-dev pkg-config
	# GDB replays csdump gdb's trace in the end-to-end and host tests
	gdb-multiarch
)

missing=()
for p in "${HOST_PKGS[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
	say "have host packages (${#HOST_PKGS[@]})"
else
	say "installing host packages: ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The kernel must use Debian's rustc (1.96), whose library source rust-web-src
# installs under its sysroot. Check that they match.
sysroot=$(/usr/bin/rustc --print sysroot)
[ -d "$sysroot/lib/rustlib/src/rust/library/core" ] ||
	die "/usr/bin/rustc has no library source under $sysroot (rust-web-src missing?)"

# bindgen-cli, pinned. bookworm's is too old for Linux 7.3.
if [ -x /usr/local/bin/bindgen ] && /usr/local/bin/bindgen --version 2>/dev/null | grep -q " $BINDGEN_VERSION\$"; then
	say "have bindgen $BINDGEN_VERSION"
else
	say "building bindgen-cli $BINDGEN_VERSION (a few minutes)"
	CARGO_TARGET_DIR="$CSPD_CACHE/cargo-bindgen" \
		cargo install --locked --root /usr/local "bindgen-cli@$BINDGEN_VERSION"
fi

# cargo-fuzz, pinned, for `make fuzz` (stable toolchain, `-s none`; g++ above builds libFuzzer).
CARGO_FUZZ_VERSION=0.13.1
if command -v cargo-fuzz >/dev/null && cargo-fuzz --version 2>/dev/null | grep -q " $CARGO_FUZZ_VERSION\$"; then
	say "have cargo-fuzz $CARGO_FUZZ_VERSION"
else
	say "building cargo-fuzz $CARGO_FUZZ_VERSION (a few minutes)"
	CARGO_TARGET_DIR="$CSPD_CACHE/cargo-fuzz-build" \
		cargo install --locked --root /usr/local "cargo-fuzz@$CARGO_FUZZ_VERSION"
fi

# dtschema and yamllint from PyPI, pinned, in a venv in the cache: make dt_binding_check
# (scripts/kernel-gates.sh).
DTSCHEMA_VENV=$CSPD_CACHE/dtschema-venv
DTSCHEMA_PINS=(dtschema==2026.9 yamllint==1.38.0)
if [ -x "$DTSCHEMA_VENV/bin/dt-doc-validate" ] &&
	[ "$("$DTSCHEMA_VENV/bin/pip" freeze 2>/dev/null | grep -cxF -e "${DTSCHEMA_PINS[0]}" -e "${DTSCHEMA_PINS[1]}")" = 2 ]; then
	say "have ${DTSCHEMA_PINS[*]}"
else
	say "installing ${DTSCHEMA_PINS[*]} into $DTSCHEMA_VENV"
	rm -rf "$DTSCHEMA_VENV"
	python3 -m venv "$DTSCHEMA_VENV"
	"$DTSCHEMA_VENV/bin/pip" install -q "${DTSCHEMA_PINS[@]}"
fi

# A private apt configuration: its own sources, state and cache, so that
# fetching from other releases or architectures never touches the system's apt.
#   $1 name, $2 architecture, $3 suites line (deb822 "Suites:" value), $4 types (default deb)
private_apt() {
	local name=$1 arch=$2 suites=$3 types=${4:-deb} dir="$CSPD_CACHE/apt-$1"
	mkdir -p "$dir/lists/partial" "$dir/archives/partial" "$dir/sources.list.d" "$dir/preferences.d"
	: >"$dir/status"
	cat >"$dir/sources.list.d/debian.sources" <<EOS
Types: $types
URIs: http://deb.debian.org/debian
Suites: $suites
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOS
	cat >"$dir/apt.conf" <<EOC
Dir::State "$dir";
Dir::State::Lists "$dir/lists";
Dir::State::status "$dir/status";
Dir::Cache "$dir";
Dir::Cache::archives "$dir/archives";
Dir::Etc::SourceList "/dev/null";
Dir::Etc::SourceParts "$dir/sources.list.d";
Dir::Etc::Preferences "/dev/null";
Dir::Etc::PreferencesParts "$dir/preferences.d";
APT::Architecture "$arch";
APT::Architectures { "$arch"; };
Acquire::Languages "none";
EOC
	echo "$dir/apt.conf"
}

# Linux 7.3 source: only in trixie-backports. Fetch that one .deb; never install it.
if ls "$DEBS"/linux-source-7.3_*.deb >/dev/null 2>&1; then
	say "have $(basename "$(ls "$DEBS"/linux-source-7.3_*.deb | head -n1)")"
else
	say "fetching linux-source-7.3 from trixie-backports (download only)"
	conf=$(private_apt trixie-bpo amd64 "trixie-backports")
	APT_CONFIG=$conf apt-get update -qq
	(cd "$DEBS" && APT_CONFIG=$conf apt-get download -qq linux-source-7.3)
fi

# OpenCSD from Debian's libopencsd source package (trixie's, 1.5.5: bookworm's 1.3.3 decoder
# crashes on some corrupt traces, and its orig tarball is gone from the mirrors), into the cache:
# - its test snapshots (real ETMv4 captures from Juno and Cortex-A55 boards), which the host
#   tests decode ($CSPD_OPENCSD_TESTDATA, set by the Makefile);
# - the library itself, built as static libraries with this machine's g++, which csdump links
#   (crates/opencsd-sys reads $OPENCSD_DIR, default $CSPD_CACHE/opencsd/lib).
OPENCSD_SNAPSHOTS=$CSPD_CACHE/opencsd/snapshots
OPENCSD_LIB=$CSPD_CACHE/opencsd/lib
opencsd_tarball() {
	local t
	t=$(ls "$CSPD_CACHE"/opencsd/libopencsd_*.orig.tar.* 2>/dev/null | head -n1 || true)
	if [ -z "$t" ]; then
		say "fetching libopencsd's source package (download only)" >&2
		conf=$(private_apt trixie-src amd64 "trixie" deb-src)
		APT_CONFIG=$conf apt-get update -qq
		mkdir -p "$CSPD_CACHE/opencsd"
		(cd "$CSPD_CACHE/opencsd" && APT_CONFIG=$conf apt-get source -qq --download-only --tar-only libopencsd) >&2
		t=$(ls "$CSPD_CACHE"/opencsd/libopencsd_*.orig.tar.* | head -n1)
	fi
	echo "$t"
}
if [ -f "$OPENCSD_SNAPSHOTS/juno-ret-stck/snapshot.ini" ] && [ -f "$OPENCSD_SNAPSHOTS/a55-test-tpiu/snapshot.ini" ]; then
	say "have the OpenCSD test snapshots in $OPENCSD_SNAPSHOTS"
else
	tarball=$(opencsd_tarball)
	rm -rf "$OPENCSD_SNAPSHOTS.tmp" "$OPENCSD_SNAPSHOTS"
	mkdir -p "$OPENCSD_SNAPSHOTS.tmp"
	tar -xf "$tarball" -C "$OPENCSD_SNAPSHOTS.tmp" --strip-components=4 --wildcards '*/decoder/tests/snapshots/*'
	[ -f "$OPENCSD_SNAPSHOTS.tmp/juno-ret-stck/snapshot.ini" ] || die "$tarball has no decoder/tests/snapshots/juno-ret-stck"
	mv "$OPENCSD_SNAPSHOTS.tmp" "$OPENCSD_SNAPSHOTS"
	say "extracted $(ls "$OPENCSD_SNAPSHOTS" | wc -l) OpenCSD snapshots from $(basename "$tarball")"
fi
if [ -f "$OPENCSD_LIB/lib/libopencsd_c_api.a" ] && [ -f "$OPENCSD_LIB/include/opencsd/c_api/opencsd_c_api.h" ] &&
	[ -x "$OPENCSD_LIB/bin/trc_pkt_lister" ]; then
	say "have OpenCSD $(awk '/define OCSD_VER_STRING/ {print $3}' "$OPENCSD_LIB/include/opencsd/ocsd_if_version.h") static libraries in $OPENCSD_LIB"
else
	tarball=$(opencsd_tarball)
	say "building OpenCSD's libraries from $(basename "$tarball") (about a minute)"
	src=$CSPD_CACHE/opencsd/src
	rm -rf "$src" "$OPENCSD_LIB.tmp"
	mkdir -p "$src" "$OPENCSD_LIB.tmp/lib"
	tar -xf "$tarball" -C "$src" --strip-components=1
	make -C "$src/decoder/build/linux" -j2 libs tests >"$src/build.log" 2>&1 || { tail -n 30 "$src/build.log"; die "OpenCSD library build failed"; }
	cp "$src"/decoder/lib/builddir/libopencsd.a "$src"/decoder/lib/builddir/libopencsd_c_api.a "$OPENCSD_LIB.tmp/lib/"
	cp -r "$src/decoder/include" "$OPENCSD_LIB.tmp/include"
	# The library's own trc_pkt_lister, with its shared libraries: what the tests compare
	# csdump's in-process decode with (the same library through its snapshot reader).
	mkdir -p "$OPENCSD_LIB.tmp/bin" "$OPENCSD_LIB.tmp/so"
	cp -a "$src"/decoder/lib/builddir/*.so* "$OPENCSD_LIB.tmp/so/"
	cp "$src/decoder/tests/bin/builddir/trc_pkt_lister" "$OPENCSD_LIB.tmp/bin/trc_pkt_lister.bin"
	printf '#!/bin/sh\n# OpenCSD %s trc_pkt_lister, with the libraries it was built with.\nd=$(dirname "$0")\nLD_LIBRARY_PATH="$d/../so" exec "$d/trc_pkt_lister.bin" "$@"\n' \
		"$(basename "$tarball")" >"$OPENCSD_LIB.tmp/bin/trc_pkt_lister"
	chmod +x "$OPENCSD_LIB.tmp/bin/trc_pkt_lister"
	rm -rf "$OPENCSD_LIB" && mv "$OPENCSD_LIB.tmp" "$OPENCSD_LIB"
	rm -rf "$src"
	say "OpenCSD static libraries in $OPENCSD_LIB"
fi

# arm64 guest userland from bookworm: busybox and kexec-tools with the shared
# libraries kexec needs. Downloaded and extracted, never installed.
GUEST_ROOT=$CSPD_CACHE/guest-debs-root
if [ -x "$GUEST_ROOT/bin/busybox" ] && [ -x "$GUEST_ROOT/sbin/kexec" ]; then
	say "have arm64 guest userland in $GUEST_ROOT"
else
	say "fetching arm64 guest userland: busybox-static kexec-tools and libraries"
	conf=$(private_apt bookworm-arm64 arm64 "bookworm bookworm-updates")
	APT_CONFIG=$conf apt-get update -qq
	# kexec-tools links against libxen*: take every library package it depends
	# on (recursively), but not maintainer-script helpers such as debconf.
	mapfile -t deps < <(APT_CONFIG=$conf apt-cache depends --recurse --no-recommends \
		--no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances --no-pre-depends \
		busybox-static kexec-tools | grep -v '^ ' | grep -v '^<' | sort -u |
		grep -E '^(busybox-static|kexec-tools|libc6|libgcc-s1|gcc-12-base|zlib1g|liblzma5|libxen|libyajl|libyaml|libzstd|libuuid|libnl|libxxhash|libsystemd)' || true)
	[ ${#deps[@]} -gt 2 ] || die "could not resolve arm64 guest packages"
	mkdir -p "$DEBS/arm64"
	(cd "$DEBS/arm64" && APT_CONFIG=$conf apt-get download -qq "${deps[@]}")
	rm -rf "$GUEST_ROOT.tmp"
	mkdir -p "$GUEST_ROOT.tmp"
	for deb in "$DEBS"/arm64/*.deb; do dpkg-deb -x "$deb" "$GUEST_ROOT.tmp"; done
	rm -rf "$GUEST_ROOT"
	mv "$GUEST_ROOT.tmp" "$GUEST_ROOT"
	say "extracted ${#deps[@]} arm64 packages into $GUEST_ROOT"
fi


# arm64 makedumpfile for the capture initramfs: it saves the vmcore the way Debian's kdump-tools
# (-F -c -d 31) and Fedora's kdump (-l -d 31) do. bookworm's 1.7.2 with zlib and lzo; its
# libraries (libdw, libelf, liblzo2, libbz2, liblzma, zlib) are taken along, perl (only for
# makedumpfile-R.pl) is not. Downloaded and extracted, never installed.
if [ -x "$GUEST_ROOT/usr/bin/makedumpfile" ]; then
	say "have arm64 makedumpfile in $GUEST_ROOT"
else
	say "fetching arm64 makedumpfile and its libraries"
	conf=$(private_apt bookworm-arm64 arm64 "bookworm bookworm-updates")
	APT_CONFIG=$conf apt-get update -qq
	mapfile -t deps < <(APT_CONFIG=$conf apt-cache depends --recurse --no-recommends \
		--no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances --no-pre-depends \
		makedumpfile | grep -v '^ ' | grep -v '^<' | sort -u |
		grep -E '^(makedumpfile|libc6|libgcc-s1|gcc-12-base|zlib1g|liblzma5|libdw1|libelf1|liblzo2-2|libbz2-1.0)$' || true)
	[ ${#deps[@]} -gt 3 ] || die "could not resolve arm64 makedumpfile packages"
	mkdir -p "$DEBS/arm64-makedumpfile"
	(cd "$DEBS/arm64-makedumpfile" && APT_CONFIG=$conf apt-get download -qq "${deps[@]}")
	for deb in "$DEBS"/arm64-makedumpfile/*.deb; do dpkg-deb -x "$deb" "$GUEST_ROOT"; done
	[ -x "$GUEST_ROOT/usr/bin/makedumpfile" ] || die "makedumpfile missing after extraction"
	say "extracted ${#deps[@]} arm64 packages (makedumpfile $(dpkg-deb -f "$DEBS"/arm64-makedumpfile/makedumpfile_*.deb Version)) into $GUEST_ROOT"
fi

# arm64 sysroot for the guest's perf (scripts/guest-perf.sh: clang-19 --target=aarch64-linux-gnu,
# linked statically by lld): bookworm's static glibc and headers, kernel headers, static libelf
# and zlib, and GCC's crt objects and libgcc. Downloaded and extracted, never installed; the list
# is kept beside it, so that a changed list fetches again.
PERF_SYSROOT=$CSPD_CACHE/perf-sysroot
PERF_SYSROOT_PKGS=(libc6-dev linux-libc-dev libelf-dev zlib1g-dev libgcc-12-dev)
if [ -f "$PERF_SYSROOT/usr/lib/aarch64-linux-gnu/libc.a" ] &&
	[ "$(cat "$PERF_SYSROOT/.packages" 2>/dev/null)" = "${PERF_SYSROOT_PKGS[*]}" ]; then
	say "have arm64 sysroot for perf in $PERF_SYSROOT"
else
	say "fetching arm64 sysroot for perf: ${PERF_SYSROOT_PKGS[*]}"
	conf=$(private_apt bookworm-arm64 arm64 "bookworm bookworm-updates")
	APT_CONFIG=$conf apt-get update -qq
	rm -rf "$DEBS/arm64-perf-sysroot" "$PERF_SYSROOT.tmp"
	mkdir -p "$DEBS/arm64-perf-sysroot" "$PERF_SYSROOT.tmp"
	(cd "$DEBS/arm64-perf-sysroot" && APT_CONFIG=$conf apt-get download -qq "${PERF_SYSROOT_PKGS[@]}")
	for deb in "$DEBS"/arm64-perf-sysroot/*.deb; do dpkg-deb -x "$deb" "$PERF_SYSROOT.tmp"; done
	for f in usr/lib/aarch64-linux-gnu/libc.a usr/lib/aarch64-linux-gnu/libelf.a \
		usr/lib/aarch64-linux-gnu/libz.a usr/include/linux/perf_event.h; do
		[ -f "$PERF_SYSROOT.tmp/$f" ] || die "$f missing from the arm64 perf sysroot packages"
	done
	ls "$PERF_SYSROOT.tmp"/usr/lib/gcc/aarch64-linux-gnu/*/crtbeginT.o >/dev/null 2>&1 ||
		die "libgcc-12-dev:arm64 has no crtbeginT.o"
	printf '%s\n' "${PERF_SYSROOT_PKGS[*]}" >"$PERF_SYSROOT.tmp/.packages"
	rm -rf "$PERF_SYSROOT"
	mv "$PERF_SYSROOT.tmp" "$PERF_SYSROOT"
	say "extracted ${#PERF_SYSROOT_PKGS[@]} arm64 packages into $PERF_SYSROOT"
fi

say "setup complete"
