#!/usr/bin/env bash
# Installs mpio as a system service: the binary, the systemd unit, the
# udev rule that links its ublk devices by name, an example config
# (never over an existing one), the manual pages and the bash, zsh and
# fish completions (both made by the binary itself). Run as root from the
# repository after `cargo build --release -p mpio` (built here if absent):
#
#   scripts/install.sh
#   systemctl daemon-reload && systemctl enable --now mpio
#
# Variables (defaults in brackets):
#   PREFIX      [/usr]          the binary goes to $PREFIX/sbin
#   SYSCONFDIR  [/etc]          the config is $SYSCONFDIR/mpio/mpio.toml
#   UNITDIR     [$PREFIX/lib/systemd/system]
#   UDEVDIR     [$PREFIX/lib/udev/rules.d]
#   MANDIR      [$PREFIX/share/man]  mpio.8, mpio-VERB.8 in man8, mpio.toml.5 in man5
#   DATADIR     [$PREFIX/share]      completions where bash-completion, zsh and
#                                    fish look for packaged ones
#   DESTDIR     []              staged install: every path above under it
#   MPIO_BIN    [target/release/mpio]
# The unit is written with the binary's and the config's installed paths.
set -euo pipefail
cd "$(dirname "$0")/.."

PREFIX=${PREFIX:-/usr}
SYSCONFDIR=${SYSCONFDIR:-/etc}
UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
UDEVDIR=${UDEVDIR:-$PREFIX/lib/udev/rules.d}
MANDIR=${MANDIR:-$PREFIX/share/man}
DATADIR=${DATADIR:-$PREFIX/share}
DESTDIR=${DESTDIR:-}
MPIO_BIN=${MPIO_BIN:-target/release/mpio}

sbin=$PREFIX/sbin
config=$SYSCONFDIR/mpio/mpio.toml

if [[ ! -x "$MPIO_BIN" ]]; then
  echo "install: building $MPIO_BIN"
  cargo build --release -p mpio --locked
fi

install -d "$DESTDIR$sbin" "$DESTDIR$UNITDIR" "$DESTDIR$SYSCONFDIR/mpio"
install -m 0755 "$MPIO_BIN" "$DESTDIR$sbin/mpio"
echo "install: $DESTDIR$sbin/mpio"

unit=$(mktemp)
trap 'rm -f "$unit"' EXIT
sed -e "s|/usr/sbin/mpio|$sbin/mpio|g" \
  -e "s|/etc/mpio/mpio.toml|$config|g" \
  dist/systemd/mpio.service >"$unit"
install -m 0644 "$unit" "$DESTDIR$UNITDIR/mpio.service"
echo "install: $DESTDIR$UNITDIR/mpio.service"

install -d "$DESTDIR$UDEVDIR"
install -m 0644 dist/udev/99-mpio.rules "$DESTDIR$UDEVDIR/99-mpio.rules"
echo "install: $DESTDIR$UDEVDIR/99-mpio.rules"

if [[ -e "$DESTDIR$config" ]]; then
  echo "install: $DESTDIR$config exists: kept as it is"
else
  install -m 0644 dist/mpio.toml "$DESTDIR$config"
  echo "install: $DESTDIR$config (an example: edit it, then systemctl reload mpio)"
fi

pages=$(mktemp -d)
trap 'rm -f "$unit"; rm -rf "$pages"' EXIT
"$MPIO_BIN" generate man "$pages"
install -d "$DESTDIR$MANDIR/man8" "$DESTDIR$MANDIR/man5"
install -m 0644 "$pages"/*.8 "$DESTDIR$MANDIR/man8/"
install -m 0644 "$pages/mpio.toml.5" "$DESTDIR$MANDIR/man5/"
echo "install: $DESTDIR$MANDIR/man8/mpio.8 and $(($(ls "$pages"/*.8 | wc -l) - 1)) mpio-VERB.8, man5/mpio.toml.5"

for shell in bash zsh fish; do
  case $shell in
    bash) file=$DATADIR/bash-completion/completions/mpio ;;
    zsh) file=$DATADIR/zsh/vendor-completions/_mpio ;;
    fish) file=$DATADIR/fish/vendor_completions.d/mpio.fish ;;
  esac
  install -d "$DESTDIR$(dirname "$file")"
  "$MPIO_BIN" generate completion "$shell" >"$DESTDIR$file"
  chmod 0644 "$DESTDIR$file"
  echo "install: $DESTDIR$file"
done
