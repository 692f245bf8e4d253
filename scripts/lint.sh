#!/usr/bin/env bash
# Style checks that need no kernel build: rustfmt of the kernel Rust files (with the kernel's
# rustfmt settings), rustfmt and clippy of the host crates.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$REPO"
RUSTFMT=${RUSTFMT:-/usr/bin/rustfmt}
[ -x "$RUSTFMT" ] || RUSTFMT=rustfmt
mapfile -t kfiles < <(find rust drivers samples -name '*.rs' 2>/dev/null | sort)
if [ ${#kfiles[@]} -gt 0 ]; then
	"$RUSTFMT" --check --edition 2021 --config newline_style=Unix "${kfiles[@]}" ||
		die "kernel Rust files are not rustfmt-clean (run: $RUSTFMT --edition 2021 --config newline_style=Unix FILE)"
	say "rustfmt: ${#kfiles[@]} kernel Rust files clean"
fi
cargo fmt --all --check || die "host crates are not rustfmt-clean (run: cargo fmt --all)"
cargo clippy --workspace --all-targets --locked -- -D warnings || die "clippy found problems in the host crates"
say "lint clean"
