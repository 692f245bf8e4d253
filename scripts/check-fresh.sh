#!/usr/bin/env bash
# The fresh-machine check: the README's set-up line and its two commands, in a minimal Debian 12
# root that has nothing else, from a clone of the current commit. Prints each step's time.
#
#   scripts/check-fresh.sh [--keep] [COMMAND...]   default: make demo, then make check
#
# Not part of `make check` (it builds everything from nothing: about an hour on 2 cores).
# Run as root. The root is bootstrapped with `debootstrap --variant=minbase bookworm` from the
# Debian archive this machine's apt is configured with (installed first if missing), gets this
# machine's Debian apt sources (bookworm, -updates, -security) and resolv.conf, and /proc, /sys,
# /dev, /dev/pts and a tmpfs on /dev/shm. The commit is handed in as a git bundle and cloned
# with the root's own git, after the README's set-up line installed it.
#
# Environment: FRESH_ROOT (default /var/tmp/cspd-fresh-root), removed first and, unless
# --keep, afterwards. Logs: $FRESH_ROOT.logs/<step>.log (kept).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { printf '==> %s\n' "$*"; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

keep=
if [ "${1:-}" = --keep ]; then keep=1; shift; fi
commands=("$@")
[ ${#commands[@]} -gt 0 ] || commands=("make demo" "make check")

[ "$(id -u)" = 0 ] || die "check-fresh.sh bootstraps a root and mounts into it: run it as root"
ROOT=${FRESH_ROOT:-/var/tmp/cspd-fresh-root}
LOGS=$ROOT.logs
case $ROOT in /|/var|/var/tmp|/tmp|"") die "FRESH_ROOT=$ROOT: choose a directory of its own" ;; esac

# The README's set-up line, as the README shows it: a README that says something else fails here.
SETUP_LINE='apt-get update && apt-get install -y --no-install-recommends ca-certificates git make'
grep -qF "    $SETUP_LINE" "$REPO/README.md" ||
	die "README.md does not show the set-up line this script runs: $SETUP_LINE"

# The Debian archive this machine is configured with.
mirror=$(sed -n 's/^URIs: *\(http[^ ]*\/debian\)\/\?$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
[ -n "$mirror" ] || mirror=$(sed -n 's/^deb \(http[^ ]*\/debian\)\/\? bookworm .*/\1/p' /etc/apt/sources.list 2>/dev/null | head -n1)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian

declare -A took
order=()
timed() { # timed NAME CMD...: runs CMD with its output in $LOGS/NAME.log, records its time
	local name=$1 t0 rc=0
	shift
	say "$name"
	t0=$(date +%s)
	"$@" >"$LOGS/$name.log" 2>&1 || rc=$?
	took[$name]=$(($(date +%s) - t0))
	order+=("$name")
	printf '    %s: %dm%02ds (exit %d)\n' "$name" $((took[$name] / 60)) $((took[$name] % 60)) "$rc"
	if [ $rc -ne 0 ]; then
		tail -n 40 "$LOGS/$name.log" >&2
		die "$name failed (exit $rc); whole log: $LOGS/$name.log"
	fi
}

unmount_all() {
	local m
	for m in dev/shm dev/pts dev sys proc; do
		mountpoint -q "$ROOT/$m" 2>/dev/null && umount -l "$ROOT/$m"
	done
	return 0
}
cleanup() {
	unmount_all
	[ -n "$keep" ] || rm -rf --one-file-system "$ROOT"
}
trap cleanup EXIT

unmount_all
rm -rf --one-file-system "$ROOT" "$LOGS"
mkdir -p "$ROOT" "$LOGS"
# The toolchain, four kernel trees, the guest images and the runs: about 30 GiB (the QEMU
# scenarios' vmcores keep only their data blocks, about 50 MiB of each 1 GiB; qemu.py digs the
# zero pages out). A run that ran out of space failed in its last step with no message (the
# message could not be written either), so the script asks for room to spare.
free_gib=$(($(df --output=avail -k "$ROOT" | tail -n 1) / 1024 / 1024))
[ "$free_gib" -ge 40 ] || die "$ROOT has $free_gib GiB free; the fresh path needs about 30, asks for 40 (and nothing else filling the disk meanwhile)"

if ! command -v debootstrap >/dev/null; then
	timed install-debootstrap bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap'
fi
timed debootstrap debootstrap --variant=minbase bookworm "$ROOT" "$mirror"

# A Debian 12 installation's apt sources: the main archive, -updates and -security.
rm -f "$ROOT/etc/apt/sources.list"
if [ -f /etc/apt/sources.list.d/debian.sources ]; then
	cp /etc/apt/sources.list.d/debian.sources "$ROOT/etc/apt/sources.list.d/"
else
	cat >"$ROOT/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://security.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
fi
# This machine's network settings: its resolver, the certificate authorities it added itself
# (a TLS-inspecting proxy's; the root's ca-certificates takes them in when the set-up line
# installs it), and the proxy and CA-bundle variables of the environment.
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
mkdir -p "$ROOT/usr/local/share/ca-certificates"
cp /usr/local/share/ca-certificates/*.crt "$ROOT/usr/local/share/ca-certificates/" 2>/dev/null || true
net_env=()
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY SSL_CERT_FILE SSL_CERT_DIR \
	CURL_CA_BUNDLE GIT_SSL_CAINFO REQUESTS_CA_BUNDLE PIP_CERT CARGO_HTTP_CAINFO; do
	[ -z "${!v:-}" ] || net_env+=("$v=${!v}")
done
mount -t proc proc "$ROOT/proc"
mount -t sysfs sys "$ROOT/sys"
mount --bind /dev "$ROOT/dev"
mount --bind /dev/pts "$ROOT/dev/pts"
mount -t tmpfs -o size=50%,mode=1777 shm "$ROOT/dev/shm"

# The commit under test, as a bundle the root's own git clones.
git -C "$REPO" bundle create "$ROOT/root/project.bundle" HEAD >/dev/null 2>&1
commit=$(git -C "$REPO" rev-parse HEAD)
[ -z "$(git -C "$REPO" status --porcelain --untracked-files=no)" ] ||
	say "note: $REPO has uncommitted changes; the fresh root gets commit ${commit:0:12} without them"

in_root() { # in_root CMD: runs CMD with bash -c in the root, as a login would
	chroot "$ROOT" /usr/bin/env -i HOME=/root TERM=dumb LANG=C.UTF-8 "${net_env[@]}" \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin /bin/bash -c "$1"
}
timed set-up-line in_root "$SETUP_LINE"
timed clone in_root "git clone -q /root/project.bundle /root/coresight-panic-dump && cd /root/coresight-panic-dump && git checkout -q $commit"
step_name() { printf '%s' "$1" | tr -c 'A-Za-z0-9.' '-' | cut -c1-40; }
for c in "${commands[@]}"; do
	timed "$(step_name "$c")" in_root "cd /root/coresight-panic-dump && $c"
done

echo
say "fresh Debian 12 (minbase) from $mirror, commit ${commit:0:12}, $(nproc) cores:"
total=0
for n in "${order[@]}"; do
	printf '    %-22s %3dm%02ds\n' "$n" $((took[$n] / 60)) $((took[$n] % 60))
	total=$((total + took[$n]))
done
printf '    %-22s %3dm%02ds\n' total $((total / 60)) $((total % 60))
say "disk the root takes: $(du -sh --one-file-system "$ROOT" | cut -f1) (of it the cache: $(du -sh "$ROOT/var/tmp/coresight-panic-dump" 2>/dev/null | cut -f1))"
for c in "${commands[@]}"; do
	steps=$(sed -n 's/^==> time: //p' "$LOGS/$(step_name "$c").log")
	[ -n "$steps" ] || continue
	say "the steps of $c:"
	printf '%s\n' "$steps" | sed 's/^/    /'
done
