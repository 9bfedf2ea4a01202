#!/bin/sh
# Installs the skulk executable (one self-contained binary per OS) and, optionally, a systemd user service.
#
#   curl -fsSL <release-url>/install.sh | sh
#   sh install.sh [--from FILE] [--prefix DIR] [--service] [--version V]
#
# --from FILE   install this binary instead of downloading one (e.g. from `make binary`)
# --prefix DIR  install into DIR/bin (default: /usr/local when root, else ~/.local)
# --service     also write and enable a systemd user unit running `skulk run` (Linux)
# Environment: SKULK_RELEASE_BASE (where release binaries are downloaded from), SKULK_VERSION.
set -eu

FROM=""
PREFIX=""
SERVICE=0
VERSION="${SKULK_VERSION:-latest}"
BASE="${SKULK_RELEASE_BASE:-https://github.com/skulk-dev/skulk/releases}"

while [ $# -gt 0 ]; do
  case "$1" in
    --from) FROM="$2"; shift 2 ;;
    --prefix) PREFIX="$2"; shift 2 ;;
    --service) SERVICE=1; shift ;;
    --version) VERSION="$2"; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done

if [ -z "$PREFIX" ]; then
  if [ "$(id -u)" = 0 ]; then PREFIX=/usr/local; else PREFIX="$HOME/.local"; fi
fi

os="$(uname -s)"; arch="$(uname -m)"
case "$os-$arch" in
  Linux-x86_64) target=x86_64-unknown-linux-gnu ;;
  Linux-aarch64|Linux-arm64) target=aarch64-unknown-linux-gnu ;;
  Darwin-x86_64) target=x86_64-apple-darwin ;;
  Darwin-arm64) target=aarch64-apple-darwin ;;
  *) echo "install.sh: no skulk build for $os $arch" >&2; exit 1 ;;
esac

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
if [ -n "$FROM" ]; then
  [ -f "$FROM" ] || { echo "install.sh: --from $FROM: no such file" >&2; exit 2; }
  cp "$FROM" "$tmp/skulk"
else
  if [ "$VERSION" = latest ]; then url="$BASE/latest/download/skulk-$target"; else url="$BASE/download/v$VERSION/skulk-$target"; fi
  echo "downloading $url"
  if command -v curl >/dev/null 2>&1; then curl -fSL --retry 3 -o "$tmp/skulk" "$url"
  elif command -v wget >/dev/null 2>&1; then wget -q -O "$tmp/skulk" "$url"
  else echo "install.sh: need curl or wget" >&2; exit 1; fi
fi
chmod 755 "$tmp/skulk"
"$tmp/skulk" version >/dev/null 2>&1 || { echo "install.sh: the binary does not run on this machine ($target)" >&2; exit 1; }

mkdir -p "$PREFIX/bin"
mv "$tmp/skulk" "$PREFIX/bin/skulk"
echo "installed $("$PREFIX/bin/skulk" version) at $PREFIX/bin/skulk"
case ":$PATH:" in *":$PREFIX/bin:"*) ;; *) echo "note: $PREFIX/bin is not on your PATH" ;; esac

if [ "$SERVICE" = 1 ]; then
  [ "$os" = Linux ] || { echo "install.sh: --service is for systemd (Linux); on macOS run 'skulk run' from launchd" >&2; exit 2; }
  unit_dir="${XDG_CONFIG_HOME:-$HOME/.config}/systemd/user"
  mkdir -p "$unit_dir" "$HOME/.skulk"
  [ -f "$HOME/.skulk/skulk.env" ] || printf '# Environment for the skulk service (SKULK_* settings).\n' > "$HOME/.skulk/skulk.env"
  sed "s|@SKULK@|$PREFIX/bin/skulk|" > "$unit_dir/skulk.service" <<'UNIT'
[Unit]
Description=Skulk node
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
EnvironmentFile=-%h/.skulk/skulk.env
Environment=SKULK_SUPERVISED=1
ExecStart=@SKULK@ run
KillSignal=SIGTERM
KillMode=mixed
TimeoutStopSec=30
Restart=on-failure
RestartSec=5
RestartForceExitStatus=75
SuccessExitStatus=75
LimitNOFILE=65536

[Install]
WantedBy=default.target
UNIT
  echo "wrote $unit_dir/skulk.service"
  if command -v systemctl >/dev/null 2>&1 && systemctl --user daemon-reload 2>/dev/null; then
    systemctl --user enable --now skulk.service && echo "started: systemctl --user status skulk"
  else
    echo "systemd user session not available here; start it later with: systemctl --user enable --now skulk"
  fi
fi
