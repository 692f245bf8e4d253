#!/usr/bin/env bash
# Prepare and build the Linux 7.3 arm64 kernel with this repo's code laid over it.
#
#   scripts/kernel.sh source            extract linux-source-7.3 into $KSRC (once), check version
#   scripts/kernel.sh overlay           copy this repo's kernel files into $KSRC, add the hooks
#   scripts/kernel.sh config VARIANT    configure $CSPD_CACHE/build-VARIANT from configs/
#   scripts/kernel.sh build VARIANT     build Image and modules (incremental)
#   scripts/kernel.sh all VARIANT       all of the above
#   scripts/kernel.sh rustdoc VARIANT   rustdoc of the kernel crate, failing on warnings in our files
#   scripts/kernel.sh allmod [CHOICE..] drivers/hwtracing/coresight/ of an allmodconfig tree with the
#                                       Rust drivers (rust) or the C ones (c) chosen
#
# VARIANT is "mod" (project code as modules), "builtin" (project code built in, compiled with
# W=1 and CLIPPY=1 so that it doubles as the lint build) or "upstream" (Linux's own C TMC and
# ETMv4 drivers built in instead of this project's Rust ones, for the upstream-drivers scenario).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Directories of this repo whose files are laid over the kernel tree.
OVERLAY_DIRS=(rust drivers samples include Documentation)
# Single files of this repo laid over the kernel tree under another name: repo path|kernel path.
OVERLAY_FILES=("Kconfig|drivers/hwtracing/coresight/Kconfig.panic_dump")
# Kernel files that earlier layouts of this repo hooked and this one does not: rewritten as their
# originals, so a cache that an older clone hooked loses those lines.
FORMERLY_HOOKED=(samples/rust/Kconfig)
MANIFEST_NAME=.cspd-overlay-manifest
HOOKS_FILE=$REPO/scripts/kernel-hooks.txt

cmd_source() {
	ensure_cache_dir
	if [ ! -f "$KSRC/Makefile" ]; then
		local deb
		deb=$(ls "$DEBS"/linux-source-7.3_*.deb 2>/dev/null | head -n1)
		[ -n "$deb" ] || die "no linux-source-7.3 .deb in $DEBS: run scripts/setup.sh first"
		say "extracting $(basename "$deb") into $KSRC"
		local tmp="$CSPD_CACHE/src-extract.$$"
		rm -rf "$tmp"
		mkdir -p "$tmp"
		dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" ./usr/src/linux-source-7.3.tar.xz
		tar -xJf "$tmp/usr/src/linux-source-7.3.tar.xz" -C "$tmp"
		rm -rf "$KSRC"
		mv "$tmp/linux-source-7.3" "$KSRC"
		rm -rf "$tmp"
	fi
	local v p
	v=$(sed -n 's/^VERSION = //p' "$KSRC/Makefile")
	p=$(sed -n 's/^PATCHLEVEL = //p' "$KSRC/Makefile")
	[ "$v.$p" = "$KVERSION_WANT" ] ||
		die "kernel source in $KSRC is version $v.$p, but this project is written for Linux $KVERSION_WANT (set KSRC or remove the tree)"
	say "kernel source: Linux $v.$p.$(sed -n 's/^SUBLEVEL = //p' "$KSRC/Makefile") in $KSRC"
	apply_source_patches
}

# Applies each of scripts/patches/*.patch to the tree once (a patch that reverses cleanly is in).
# They fix tools the judges run (the host's perf), not the kernel: scripts/host-perf.sh names
# them among its inputs.
apply_source_patches() {
	local patch
	for patch in "$REPO"/scripts/patches/*.patch; do
		[ -f "$patch" ] || continue
		if git -C "$KSRC" apply --check -R -p1 "$patch" 2>/dev/null; then
			continue
		fi
		git -C "$KSRC" apply --check -p1 "$patch" ||
			die "${patch#"$REPO"/} applies neither forward nor in reverse to $KSRC"
		git -C "$KSRC" apply -p1 "$patch" || die "could not apply ${patch#"$REPO"/} to $KSRC"
		say "applied ${patch#"$REPO"/}"
	done
}

# Pristine copies of the kernel files the hooks change, so that every overlay rebuilds each hooked
# file from its original: a hook another clone of this repo added (and this one does not have) is
# gone again, and a file whose hooks did not change keeps its time (no needless rebuild).
PRISTINE=$KSRC/.cspd-pristine

# Copies the original of each kernel file named ($@, paths in the tree) into $PRISTINE, from the
# linux-source .deb, for files that have no pristine copy yet.
save_pristine() {
	local f want=()
	for f in "$@"; do
		[ -f "$PRISTINE/$f" ] || want+=("linux-source-7.3/$f")
	done
	[ ${#want[@]} -gt 0 ] || return 0
	local deb tmp="$CSPD_CACHE/pristine-extract.$$"
	deb=$(ls "$DEBS"/linux-source-7.3_*.deb 2>/dev/null | head -n1)
	[ -n "$deb" ] || die "no linux-source-7.3 .deb in $DEBS: run scripts/setup.sh first"
	say "saving the originals of ${#want[@]} hooked kernel files"
	rm -rf "$tmp"
	mkdir -p "$tmp"
	dpkg-deb --fsys-tarfile "$deb" | tar -x -O ./usr/src/linux-source-7.3.tar.xz |
		tar -xJ -C "$tmp" "${want[@]}" || die "could not extract ${want[*]} from $deb"
	for f in "$@"; do
		[ -f "$tmp/linux-source-7.3/$f" ] || continue
		mkdir -p "$(dirname "$PRISTINE/$f")"
		mv "$tmp/linux-source-7.3/$f" "$PRISTINE/$f"
	done
	rm -rf "$tmp"
}

# Adds one hook line to the file at $path (kernel file $file); checks it afterwards.
add_hook() {
	local file=$1 path=$2 where=$3 anchor=$4 line=$5
	if grep -qxF -- "$line" "$path"; then
		return 0
	fi
	local n
	case $where in
	append)
		printf '%s\n' "$line" >>"$path"
		;;
	after)
		n=$(grep -nE -- "$anchor" "$path" | head -n1 | cut -d: -f1)
		[ -n "$n" ] || die "hook anchor '$anchor' not found in $file"
		sed -i "${n}a\\$line" "$path"
		;;
	before-last)
		n=$(grep -nE -- "$anchor" "$path" | tail -n1 | cut -d: -f1)
		[ -n "$n" ] || die "hook anchor '$anchor' not found in $file"
		sed -i "${n}i\\$line" "$path"
		;;
	replace)
		grep -qE -- "$anchor" "$path" || die "hook anchor '$anchor' not found in $file"
		A=$anchor L=$line awk '$0 ~ ENVIRON["A"] { print ENVIRON["L"]; next } { print }' \
			"$path" >"$path.tmp" && mv "$path.tmp" "$path"
		;;
	*) die "unknown hook position '$where' for $file" ;;
	esac
	grep -qxF -- "$line" "$path" || die "hook '$line' could not be added to $file"
}

# Rebuilds every hooked kernel file (those of $HOOKS_FILE, and those an earlier hook list changed)
# as its original plus this repo's hooks, and replaces it only when the result differs.
apply_hooks() {
	local files=() f file where anchor line count=0
	mapfile -t files < <({
		grep -vE '^(#|$)' "$HOOKS_FILE" | cut -d'|' -f1
		printf '%s\n' "${FORMERLY_HOOKED[@]}"
		[ -d "$PRISTINE" ] && (cd "$PRISTINE" && find . -type f | sed 's|^\./||')
	} | sort -u)
	for f in "${files[@]}"; do
		[ -f "$KSRC/$f" ] || die "hook target $f does not exist in $KSRC"
	done
	save_pristine "${files[@]}"
	for f in "${files[@]}"; do
		local new="$KSRC/$f.cspd-new"
		cp "$PRISTINE/$f" "$new"
		while IFS='|' read -r file where anchor line; do
			case $file in '' | '#'*) continue ;; esac
			[ "$file" = "$f" ] || continue
			add_hook "$file" "$new" "$where" "$anchor" "$line"
			count=$((count + 1))
		done <"$HOOKS_FILE"
		if cmp -s "$new" "$KSRC/$f"; then
			rm -f "$new"
		else
			mv "$new" "$KSRC/$f"
			say "rewrote $f: its original and $(grep -c "^$f|" "$HOOKS_FILE" || true) hooks"
		fi
	done
	say "hooks: $count in ${#files[@]} kernel files"
}

# Copies this repo's file $1 into the kernel tree as $2, unless the tree's copy has the same
# content. Kbuild decides by modification time: a copy whose content did not change keeps its
# time, so a fresh clone of the same code (CI's) rebuilds nothing; a changed file gets a new time
# and rebuilds what depends on it. (Links into the clone would carry the clone's times: every
# clean clone would rebuild every object of the overlay.) Returns 1 when it copied.
copy_into_tree() {
	local src=$REPO/$1 dst=$KSRC/$2
	if [ -f "$dst" ] && [ ! -L "$dst" ] && cmp -s "$src" "$dst"; then
		return 0
	fi
	mkdir -p "$(dirname "$dst")"
	rm -f "$dst"
	cp "$src" "$dst" || die "could not copy $1 into $KSRC"
	return 1
}

cmd_overlay() {
	[ -f "$KSRC/Makefile" ] || die "no kernel source in $KSRC: run '$0 source' first"
	local manifest="$KSRC/$MANIFEST_NAME" new="$KSRC/$MANIFEST_NAME.new"
	# The files an earlier overlay put into the tree (copies, or links of an older layout): only
	# these may be replaced or removed; any other existing file belongs to the pristine tree.
	local -A ours=()
	local f
	if [ -f "$manifest" ]; then
		while IFS= read -r f; do ours[$f]=1; done <"$manifest"
	fi
	: >"$new"
	local -a pairs=()
	local d
	for d in "${OVERLAY_DIRS[@]}"; do
		[ -d "$REPO/$d" ] || continue
		while IFS= read -r -d '' f; do
			f=${f#"$REPO"/}
			pairs+=("$f|$f")
		done < <(find "$REPO/$d" -type f -print0)
	done
	pairs+=("${OVERLAY_FILES[@]}")
	local entry changed=0
	for entry in "${pairs[@]}"; do
		f=${entry#*|}
		if [ -e "$KSRC/$f" ] && [ ! -L "$KSRC/$f" ] && [ -z "${ours[$f]:-}" ]; then
			die "overlay file $f would replace a file of the pristine tree; add a hook instead"
		fi
		copy_into_tree "${entry%%|*}" "$f" || changed=$((changed + 1))
		echo "$f" >>"$new"
	done
	# Remove the files this repo no longer has.
	for f in "${!ours[@]}"; do
		grep -qxF -- "$f" "$new" || { rm -f "$KSRC/$f" && say "removed $f"; }
	done
	mv "$new" "$manifest"
	say "overlay: $(wc -l <"$manifest") files in $KSRC, $changed of them copied anew"

	apply_hooks
}

variant_fragments() {
	case $1 in
	mod) echo "$REPO/configs/base.config $REPO/configs/debugfs.config $REPO/configs/modules.config" ;;
	builtin) echo "$REPO/configs/base.config $REPO/configs/builtin.config" ;;
	upstream) echo "$REPO/configs/base.config $REPO/configs/debugfs.config $REPO/configs/upstream.config" ;;
	*) die "unknown kernel variant '$1' (use mod, builtin or upstream)" ;;
	esac
}

variant_make_flags() {
	case $1 in
	# Line tables only (clang's -gline-tables-only after the config's -g): what GDB needs to show
	# the source of a trace, a fraction of full DWARF's types for it to read (configs/modules.config).
	# CLIPPY=1: the code only a kernel with modules builds (the module notifier) is linted here;
	# the builtin variant has no module support.
	mod) echo "KCFLAGS=-gline-tables-only CLIPPY=1" ;;
	builtin) echo "W=1 CLIPPY=1" ;;
	upstream) ;;
	esac
}

cmd_config() {
	local variant=${1:?variant}
	local frags out="$CSPD_CACHE/build-$variant"
	frags=$(variant_fragments "$variant")
	mkdir -p "$out"
	local all="$out/.cspd-allconfig" stamp="$out/.cspd-config-inputs"
	# shellcheck disable=SC2086
	cat $frags >"$all.new"
	if [ -f "$out/.config" ] && cmp -s "$all.new" "$stamp" 2>/dev/null; then
		rm -f "$all.new"
		say "config build-$variant: unchanged"
		return 0
	fi
	mv "$all.new" "$all"
	KOUT=$out kmake -s rustavailable || die "Rust is not available to the kernel build (see above)"
	KOUT=$out kmake -s KCONFIG_ALLCONFIG="$all" allnoconfig
	# merge_config-style check: every requested symbol must have its value.
	local sym val bad=0
	while IFS='=' read -r sym val; do
		case $sym in '' | '#'*) continue ;; esac
		if ! grep -qxF -- "$sym=$val" "$out/.config"; then
			echo "error: $sym=$val was requested but the configuration has: $(grep -E "^(# )?$sym[= ]" "$out/.config" || echo unset)" >&2
			bad=1
		fi
	done <"$all"
	[ $bad = 0 ] || die "kernel configuration dropped requested symbols (missing dependencies?)"
	cp "$all" "$stamp"
	say "config build-$variant: written from $(echo "$frags" | wc -w) fragments"
}

cmd_build() {
	local variant=${1:?variant}
	local out="$CSPD_CACHE/build-$variant" log
	log="$out/build.log"
	[ -f "$out/.config" ] || die "build-$variant is not configured: run '$0 config $variant'"
	say "building Image and modules in build-$variant (log: $log)"
	local start=$SECONDS
	# The files an earlier build warned about are compiled again, so that a rebuild that would
	# compile nothing cannot pass over their warnings.
	local warned="$out/.cspd-warned-files" f
	if [ -f "$warned" ]; then
		while read -r f; do
			[ -f "$f" ] && touch "$f"
		done <"$warned"
	fi
	# shellcheck disable=SC2046
	if ! KOUT=$out kmake -j"$(nproc)" $(variant_make_flags "$variant") Image modules >"$log" 2>&1; then
		tail -n 40 "$log" >&2
		die "kernel build failed (full log: $log)"
	fi
	# Our code must build without warnings. Look for rustc/clippy/C warnings naming our files.
	local ours
	ours=$(cd "$REPO" && { find "${OVERLAY_DIRS[@]}" -type f \( -name '*.rs' -o -name '*.c' -o -name '*.h' \) 2>/dev/null || true; } | sed 's/[.[\*^$]/\\&/g' | paste -sd'|')
	if [ -n "$ours" ] && grep -qE -- "($ours)" <(grep -B2 -A12 -E '^(warning|error)' "$log"); then
		grep -B2 -A12 -E '^(warning|error)' "$log" | grep -B6 -A8 -E -- "($ours)" >&2 || true
		grep -B2 -A12 -E '^(warning|error)' "$log" | grep -oE -- "/[^ :]*($ours)" | sort -u >"$warned" || true
		die "the build warns about this project's code (build-$variant, $log)"
	fi
	rm -f "$warned"
	say "built build-$variant in $((SECONDS - start)) s: $(ls -la "$out/arch/arm64/boot/Image" | awk '{print $5}') byte Image"
}

# rustdoc of the kernel crate (with this project's abstractions): no warning may name our files.
cmd_rustdoc() {
	local variant=${1:?variant}
	local out="$CSPD_CACHE/build-$variant" log
	log="$out/rustdoc.log"
	[ -f "$out/.config" ] || die "build-$variant is not configured: run '$0 config $variant'"
	# `make rustdoc` documents every crate anew each time (two minutes here). What it reads: the
	# files of the tree's rust/ and include/ (this repo's copies keep their times while unchanged;
	# the directories do not, as the overlay's hooks write a file next to each hooked one), the
	# configuration and the Rust toolchain. When none of them changed since the last clean run,
	# that run's verdict stands.
	local stamp="$out/.cspd-rustdoc-clean" tools
	tools=$(/usr/bin/rustc --version; /usr/bin/rustdoc --version)
	if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$tools" ] && [ ! "$out/.config" -nt "$stamp" ] &&
		[ -z "$(find "$KSRC/rust" "$KSRC/include" -type f -newer "$stamp" -print -quit)" ]; then
		say "rustdoc clean: nothing it reads changed since its last clean run ($(date -r "$stamp" '+%F %T'))"
		return 0
	fi
	rm -f "$stamp"
	# With the variant's flags (CLIPPY=1): other flags change the commands of the rust/ objects,
	# and the next build of the variant would rebuild them all.
	if ! KOUT=$out kmake -j"$(nproc)" $(variant_make_flags "$variant") rustdoc >"$log" 2>&1; then
		tail -n 40 "$log" >&2
		die "rustdoc failed (full log: $log)"
	fi
	local ours
	ours=$(cd "$REPO" && { find "${OVERLAY_DIRS[@]}" -type f -name '*.rs' 2>/dev/null || true; } | sed 's/[.[\*^$]/\\&/g' | paste -sd'|')
	if [ -n "$ours" ] && grep -qE -- "($ours)" <(grep -A8 -E '^(warning|error)' "$log"); then
		grep -A8 -E '^(warning|error)' "$log" >&2
		die "rustdoc warns about this project's code ($log)"
	fi
	printf '%s\n' "$tools" >"$stamp"
	say "rustdoc clean: $out/Documentation/output/rust/rustdoc/kernel/coresight/index.html"
}

# The coresight directory of an allmodconfig configuration of the overlaid tree, with each choice
# of driver implementation (CHOICE rust: the Rust drivers under the C symbols, as allmodconfig
# sets every bool; c: the C drivers): what a distribution's configuration, which has the C drivers
# on, builds. KCONFIG_ALLCONFIG keeps out what Rust cannot be built with (randstruct, BTF without
# a pahole that can leave Rust out, MODVERSIONS without gendwarfksyms, CFI) and the kernel crate's
# doctests, and builds the CoreSight core in (the panic dump core needs it there). Each choice has its own tree (build-allmod-CHOICE), so that a later run is
# incremental; only `prepare` (scripts, headers, the rust/ crates) and drivers/hwtracing/coresight/
# are built. Fails when the choice did not take, when the other implementation was built, or on a
# warning about this project's code.
cmd_allmod() {
	local choice
	# The overlaid tree, as the other builds have it (a no-op after them).
	cmd_source
	cmd_overlay
	for choice in "${@:-rust}"; do
		case $choice in rust | c) ;; *) die "allmod: unknown choice '$choice' (rust or c)" ;; esac
		local out="$CSPD_CACHE/build-allmod-$choice" log frag start=$SECONDS
		mkdir -p "$out"
		log=$out/build.log
		frag=$out/.cspd-allmod-fragment
		{
			printf '%s\n' CONFIG_RUST=y CONFIG_CORESIGHT=y CONFIG_RANDSTRUCT_NONE=y '# CONFIG_MODVERSIONS is not set' \
				'# CONFIG_DEBUG_INFO_BTF is not set' '# CONFIG_CFI is not set' \
				'# CONFIG_RUST_KERNEL_DOCTESTS is not set' CONFIG_CORESIGHT_PANIC_DUMP=y
			if [ "$choice" = c ]; then
				printf '# %s is not set\n' CONFIG_CORESIGHT_TMC_RUST CONFIG_CORESIGHT_ETM4X_RUST \
					CONFIG_CORESIGHT_CPU_DEBUG_RUST
			fi
			# What the configuration also follows from: a change to the project's Kconfig files or
			# hooks runs allmodconfig again (Kbuild alone would give new symbols their defaults).
			printf '# inputs %s\n' "$(cat "$REPO/Kconfig" "$REPO"/drivers/hwtracing/coresight/rust/Kconfig "$HOOKS_FILE" | sha256sum | cut -c1-16)"
		} >"$frag.new"
		if ! [ -f "$out/.config" ] || ! cmp -s "$frag.new" "$frag"; then
			mv "$frag.new" "$frag"
			KOUT=$out kmake -s KCONFIG_ALLCONFIG="$frag" allmodconfig >"$log" 2>&1 ||
				{ tail -n 20 "$log" >&2; die "allmodconfig failed ($log)"; }
		else
			rm -f "$frag.new"
		fi
		local want sym bad=0
		if [ "$choice" = rust ]; then want=y; else want=n; fi
		for sym in CONFIG_RUST=y CONFIG_CORESIGHT=y CONFIG_CORESIGHT_PANIC_DUMP=y CONFIG_CORESIGHT_LINK_AND_SINK_TMC=m \
			CONFIG_CORESIGHT_SOURCE_ETM4X=m CONFIG_CORESIGHT_CPU_DEBUG=m CONFIG_CORESIGHT_TMC_RUST=$want \
			CONFIG_CORESIGHT_ETM4X_RUST=$want CONFIG_CORESIGHT_CPU_DEBUG_RUST=$want; do
			case $sym in
			*=n) ! grep -q "^${sym%=n}=" "$out/.config" ;;
			*) grep -qxF "$sym" "$out/.config" ;;
			esac || { echo "error: allmodconfig ($choice) did not give $sym: $(grep -E "^(# )?${sym%=*}[= ]" "$out/.config" || echo unset)" >&2; bad=1; }
		done
		[ $bad = 0 ] || die "allmodconfig ($choice): the configuration is not the one asked for"
		if ! KOUT=$out kmake -j"$(nproc)" drivers/hwtracing/coresight/ >>"$log" 2>&1; then
			tail -n 40 "$log" >&2
			die "allmodconfig ($choice): drivers/hwtracing/coresight/ failed to build ($log)"
		fi
		local d=$out/drivers/hwtracing/coresight o
		for o in tmc/coresight_tmc.o etm4x/coresight_etm4x.o cpu_debug/coresight_cpu_debug.o; do
			local c_obj
			case $o in tmc/*) c_obj=coresight-tmc.o ;; etm4x/*) c_obj=coresight-etm4x.o ;; *) c_obj=coresight-cpu-debug.o ;; esac
			if [ "$choice" = rust ]; then
				[ -f "$d/rust/$o" ] && [ ! -f "$d/$c_obj" ] ||
					die "allmodconfig (rust): expected rust/$o and no $c_obj in $d"
			else
				[ -f "$d/$c_obj" ] && [ ! -f "$d/rust/$o" ] ||
					die "allmodconfig (c): expected $c_obj and no rust/$o in $d"
			fi
		done
		local ours
		ours=$(cd "$REPO" && { find "${OVERLAY_DIRS[@]}" -type f \( -name '*.rs' -o -name '*.c' -o -name '*.h' \) 2>/dev/null || true; } | sed 's/[.[\*^$]/\\&/g' | paste -sd'|')
		if [ -n "$ours" ] && grep -qE -- "($ours)" <(grep -B2 -A12 -E '^(warning|error)' "$log"); then
			grep -B2 -A12 -E '^(warning|error)' "$log" | grep -B6 -A8 -E -- "($ours)" >&2 || true
			die "allmodconfig ($choice): the build warns about this project's code ($log)"
		fi
		say "allmodconfig ($choice): drivers/hwtracing/coresight/ built in $((SECONDS - start)) s, the $choice drivers"
	done
}

main() {
	local cmd=${1:-}
	shift || true
	case $cmd in source | overlay | config | build | rustdoc | allmod | all) ensure_cache_dir ;; esac
	case $cmd in
	source) cmd_source ;;
	overlay) cmd_overlay ;;
	config) cmd_config "$@" ;;
	build) cmd_build "$@" ;;
	rustdoc) cmd_rustdoc "$@" ;;
	allmod) cmd_allmod "$@" ;;
	all)
		cmd_source
		cmd_overlay
		cmd_config "$@"
		cmd_build "$@"
		;;
	*) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
	esac
}

main "$@"
