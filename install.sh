#!/bin/sh
# Installs the skulk executable (one self-contained binary per OS), checked against its published SHA-256,
# and optionally runs it as a service (docs/packaging.md). On Debian and Ubuntu the apt package is simpler.
#
#   curl -fsSL <release-url>/install.sh | sh
#   sh install.sh [--from FILE [--sha256 HEX]] [--prefix DIR] [--service [--user]] [--version V] [--uninstall]
#
# --from FILE    install this binary instead of downloading one (e.g. from `make binary`); checked against
#                --sha256 HEX, else FILE.sha256 when it exists
# --sha256 HEX   the SHA-256 the binary must have (a download is checked against <url>.sha256 without it)
# --prefix DIR   install into DIR/bin (default: /usr/local when root, else ~/.local)
# --service      also run it as a service: `skulk service install` (systemd system unit as root, user unit
#                otherwise; launchd on macOS)
# --user         with --service: the user unit even when root
# --uninstall    stop and remove the service and the binary (state in ~/.skulk or /var/lib/skulk is kept)
# Environment: SKULK_RELEASE_BASE (where release binaries are downloaded from), SKULK_VERSION.
set -eu

FROM=""
SHA256=""
PREFIX=""
SERVICE=0
SCOPE=""
UNINSTALL=0
VERSION="${SKULK_VERSION:-latest}"
BASE="${SKULK_RELEASE_BASE:-https://github.com/skulk-dev/skulk/releases}"

while [ $# -gt 0 ]; do
  case "$1" in
    --from) FROM="$2"; shift 2 ;;
    --sha256) SHA256="$2"; shift 2 ;;
    --prefix) PREFIX="$2"; shift 2 ;;
    --service) SERVICE=1; shift ;;
    --user) SCOPE=--user; shift ;;
    --uninstall) UNINSTALL=1; shift ;;
    --version) VERSION="$2"; shift 2 ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [ -z "$PREFIX" ]; then
  if [ "$(id -u)" = 0 ]; then PREFIX=/usr/local; else PREFIX="$HOME/.local"; fi
fi
BIN="$PREFIX/bin/skulk"

if [ "$UNINSTALL" = 1 ]; then
  if [ -x "$BIN" ]; then
    # Only a service this binary runs is removed; `service uninstall` fails harmlessly where there is none.
    for unit in /etc/systemd/system/skulk.service "${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user/skulk.service" \
      "$HOME/Library/LaunchAgents/dev.skulk.node.plist"; do
      if [ -f "$unit" ] && grep -q "$BIN" "$unit"; then
        case "$unit" in
          /etc/*) "$BIN" service uninstall --system || rm -f "$unit" ;;
          *.plist) "$BIN" service uninstall || rm -f "$unit" ;;
          *) "$BIN" service uninstall --user || rm -f "$unit" ;;
        esac
      fi
    done
    rm -f "$BIN"
    echo "removed $BIN"
  else
    echo "install.sh: no skulk at $BIN (give the --prefix it was installed with)" >&2
    exit 1
  fi
  exit 0
fi

os="$(uname -s)"; arch="$(uname -m)"
case "$os-$arch" in
  Linux-x86_64) target=x86_64-unknown-linux-gnu ;;
  Linux-aarch64|Linux-arm64) target=aarch64-unknown-linux-gnu ;;
  Darwin-x86_64) target=x86_64-apple-darwin ;;
  Darwin-arm64) target=aarch64-apple-darwin ;;
  *) echo "install.sh: no skulk build for $os $arch" >&2; exit 1 ;;
esac

fetch() { # $1: url, $2: file
  if command -v curl >/dev/null 2>&1; then curl -fsSL --retry 3 -o "$2" "$1"
  elif command -v wget >/dev/null 2>&1; then wget -q -O "$2" "$1"
  else echo "install.sh: need curl or wget" >&2; exit 1; fi
}
sha256() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d' ' -f1
  else shasum -a 256 "$1" | cut -d' ' -f1; fi
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [ -n "$FROM" ]; then
  [ -f "$FROM" ] || { echo "install.sh: --from $FROM: no such file" >&2; exit 2; }
  cp "$FROM" "$tmp/skulk"
  if [ -z "$SHA256" ] && [ -f "$FROM.sha256" ]; then SHA256="$(cut -d' ' -f1 "$FROM.sha256")"; fi
else
  if [ "$VERSION" = latest ]; then url="$BASE/latest/download/skulk-$target"; else url="$BASE/download/v$VERSION/skulk-$target"; fi
  echo "downloading $url"
  fetch "$url" "$tmp/skulk" || { echo "install.sh: cannot download $url" >&2; exit 1; }
  if [ -z "$SHA256" ]; then
    fetch "$url.sha256" "$tmp/skulk.sha256" || { echo "install.sh: cannot download $url.sha256, so the binary cannot be checked; refusing" >&2; exit 1; }
    SHA256="$(cut -d' ' -f1 "$tmp/skulk.sha256")"
  fi
fi
if [ -n "$SHA256" ]; then
  got="$(sha256 "$tmp/skulk")"
  if [ "$got" != "$(echo "$SHA256" | tr 'A-F' 'a-f')" ]; then
    echo "install.sh: SHA-256 mismatch: expected $SHA256, got $got; refusing to install" >&2
    exit 3
  fi
  echo "SHA-256 verified: $got"
fi
chmod 755 "$tmp/skulk"
"$tmp/skulk" version >/dev/null 2>&1 || { echo "install.sh: the binary does not run on this machine ($target)" >&2; exit 1; }

mkdir -p "$PREFIX/bin"
mv "$tmp/skulk" "$BIN"
echo "installed $("$BIN" version) at $BIN"
case ":$PATH:" in *":$PREFIX/bin:"*) ;; *) echo "note: $PREFIX/bin is not on your PATH" ;; esac

if [ "$SERVICE" = 1 ]; then
  "$BIN" service install $SCOPE --exec "$BIN" || {
    echo "install.sh: the service could not be started here; once a service manager runs, try: $BIN service install --exec $BIN" >&2
    exit 4
  }
fi
