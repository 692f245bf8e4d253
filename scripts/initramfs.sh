#!/usr/bin/env bash
# Build the guest initramfs images for a kernel variant.
#
#   scripts/initramfs.sh VARIANT
#
# Writes $CSPD_CACHE/guest-VARIANT/capture.cpio.gz (busybox, init and makedumpfile: the kdump
# capture kernel's)
# and main.cpio.gz (also kexec-tools with its libraries, the static arm64 perf of
# scripts/guest-perf.sh at /bin/perf, the kernel Image and capture initramfs for `kexec -p`, and
# the variant's modules in /modules, perf mode's test program at /bin/cspd-loop). Everything comes
# from the arm64 Debian packages fetched by setup.sh, this repo's scripts/guest/init and
# cspd-loop.c, guest-perf.sh's build and the kernel build.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

variant=${1:?usage: initramfs.sh VARIANT}
cache_lock
out="$CSPD_CACHE/build-$variant"
dest="$CSPD_CACHE/guest-$variant"
root_debs="$CSPD_CACHE/guest-debs-root"
image="$out/arch/arm64/boot/Image"
perf_bin="$CSPD_CACHE/perf-arm64/perf"

[ -x "$root_debs/bin/busybox" ] || die "no arm64 busybox in $root_debs: run scripts/setup.sh"
[ -x "$root_debs/sbin/kexec" ] || die "no arm64 kexec in $root_debs: run scripts/setup.sh"
[ -x "$root_debs/usr/bin/makedumpfile" ] || die "no arm64 makedumpfile in $root_debs: run scripts/setup.sh"
[ -x "$perf_bin" ] || die "no arm64 perf $perf_bin: run scripts/guest-perf.sh"
[ -f "$image" ] || die "no kernel image $image: run scripts/kernel.sh all $variant"
READELF=$(command -v llvm-readelf-19 || command -v readelf) || die "no readelf"

mkdir -p "$dest"

# /bin/cspd-loop (scripts/guest/cspd-loop.c): a static arm64 program with known control flow,
# built by clang-19 against the arm64 sysroot of scripts/guest-perf.sh, into $CSPD_CACHE/cspd-loop/
# (the same bytes for every variant; check_perf.py reads it there).
loop_bin="$CSPD_CACHE/cspd-loop/cspd-loop"
build_loop() {
	local sysroot=$CSPD_CACHE/perf-sysroot
	[ -f "$sysroot/usr/lib/aarch64-linux-gnu/libc.a" ] || die "no arm64 sysroot in $sysroot: run scripts/setup.sh"
	mkdir -p "${loop_bin%/*}"
	"clang$LLVM_SUFFIX" --target=aarch64-linux-gnu --sysroot="$sysroot" -O1 -static -fuse-ld=lld \
		-Wl,--build-id=sha1 -o "$loop_bin.tmp" "$REPO/scripts/guest/cspd-loop.c" ||
		die "could not build $loop_bin"
	mv "$loop_bin.tmp" "$loop_bin"
}

# Lays out the common part of a guest root in $1.
base_root() {
	local r=$1
	rm -rf "$r"
	mkdir -p "$r"/{bin,sbin,dev,proc,sys,tmp,etc,modules,boot,lib}
	cp "$root_debs/bin/busybox" "$r/bin/busybox"
	install -m 0755 "$REPO/scripts/guest/init" "$r/init"
	# A console node so the first messages of init reach the serial port before devtmpfs.
	mknod -m 600 "$r/dev/console" c 5 1 2>/dev/null || true
}

# Copies an arm64 binary and, recursively, the shared libraries it needs.
copy_with_libs() {
	local r=$1 bin=$2
	local -a todo=("$bin")
	declare -A seen=()
	while [ ${#todo[@]} -gt 0 ]; do
		local f=${todo[0]}
		todo=("${todo[@]:1}")
		[ -n "${seen[$f]:-}" ] && continue
		seen[$f]=1
		local rel=${f#"$root_debs"}
		mkdir -p "$r$(dirname "$rel")"
		cp -L "$f" "$r$rel"
		local interp
		interp=$("$READELF" -l "$f" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)]/\1/p')
		if [ -n "$interp" ]; then
			local li
			li=$(find "$root_debs/lib" "$root_debs/usr/lib" -name "$(basename "$interp")" 2>/dev/null | head -n1)
			[ -n "$li" ] || die "interpreter $interp of $bin not in the arm64 packages"
			mkdir -p "$r$(dirname "$interp")"
			cp -L "$li" "$r$interp"
		fi
		local lib
		for lib in $("$READELF" -d "$f" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'); do
			local found
			found=$(find "$root_debs/lib" "$root_debs/usr/lib" -name "$lib" 2>/dev/null | head -n1)
			[ -n "$found" ] || die "library $lib needed by $(basename "$f") is not in the arm64 packages"
			todo+=("$found")
		done
	done
}

pack() {
	local r=$1 file=$2
	(cd "$r" && find . -print0 | LC_ALL=C sort -z | cpio --null -o -H newc --quiet -R 0:0) | gzip -1 >"$file.tmp"
	mv "$file.tmp" "$file"
}

stage="$dest/stage"

# The modules of the build, for both initramfs images.
copy_modules() {
	local ko n=0
	while IFS= read -r -d '' ko; do
		cp "$ko" "$1/modules/"
		n=$((n + 1))
	done < <(find "$out/samples/rust/coresight_panic_dump" "$out/drivers/hwtracing/coresight/rust" -name '*.ko' -print0 2>/dev/null)
	echo "$n"
}

# The capture kernel's initramfs: busybox, init and makedumpfile with its libraries (it saves
# the vmcore the way distributions' kdump does, next to the raw copy), and the modules (a capture
# kernel's TMC driver collects the trace a crashed kernel left in its sink).
base_root "$stage"
copy_with_libs "$stage" "$root_debs/usr/bin/makedumpfile"
copy_modules "$stage" >/dev/null
pack "$stage" "$dest/capture.cpio.gz"

# The main initramfs.
base_root "$stage"
copy_with_libs "$stage" "$root_debs/sbin/kexec"
# Statically linked: records cs_etm's AUX trace in the guest (the host decodes it).
cp "$perf_bin" "$stage/bin/perf"
# perf mode's traced program (cspd.perf=per-thread); check_perf.py decodes its trace against it.
build_loop
cp "$loop_bin" "$stage/bin/cspd-loop"
# bookworm's libc lives in /lib/aarch64-linux-gnu; some packages use /usr/lib.
cp "$image" "$stage/boot/Image"
cp "$dest/capture.cpio.gz" "$stage/boot/capture.cpio.gz"
nmods=$(copy_modules "$stage")
pack "$stage" "$dest/main.cpio.gz"
rm -rf "$stage"

say "initramfs for $variant: $(du -h "$dest/main.cpio.gz" | cut -f1) main ($nmods modules), $(du -h "$dest/capture.cpio.gz" | cut -f1) capture, in $dest"
