# Shared by scripts/setup.sh and scripts/test.sh. Every step checks before it installs, so a
# second run does nothing but verify.

step() { printf '\n==> %s\n' "$*" >&2; }

# Debian/Ubuntu package names; see shared/docs/models.md for why each is needed.
SYSTEM_PACKAGES=(cmake clang libclang-dev g++ pkg-config libespeak-ng-dev espeak-ng-data python3 python3-pip ca-certificates)
# Live mode: cpal's ALSA host (libasound2-dev), and for its tests a private PulseAudio daemon
# reached through ALSA's pulse plugin (scripts/pulse-null-sink.sh; paplay plays into it).
SYSTEM_PACKAGES+=(libasound2-dev pulseaudio pulseaudio-utils libasound2-plugins)
# prometheus: the real Prometheus server tests/metrics_prometheus.rs scrapes `voxlat serve` with.
SYSTEM_PACKAGES+=(prometheus)

install_system_packages() {
  local missing=()
  for p in "${SYSTEM_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # A pip from elsewhere (pyenv, venv) does as well as Debian's.
  if [[ " ${missing[*]} " == *" python3-pip "* ]] && python3 -m pip --version >/dev/null 2>&1; then
    missing=("${missing[@]/python3-pip}")
  fi
  if [[ " ${missing[*]} " == *" python3 "* ]] && command -v python3 >/dev/null 2>&1; then
    missing=("${missing[@]/python3}")
  fi
  # On a PipeWire desktop, installing pulseaudio would replace pipewire-pulse: leave it out
  # (only the live-mode tests need it; they say so if it is missing).
  if [[ " ${missing[*]} " == *" pulseaudio "* ]] && dpkg-query -W -f='${Status}' pipewire-pulse 2>/dev/null | grep -q "install ok installed"; then
    echo "note: pipewire-pulse is installed, so pulseaudio (for the live-mode tests) is not" >&2
    local keep=()
    for p in "${missing[@]}"; do [[ "$p" != pulseaudio ]] && keep+=("$p"); done
    missing=("${keep[@]}")
  fi
  local want=()
  for p in "${missing[@]}"; do [[ -n "$p" ]] && want+=("$p"); done
  if ((${#want[@]})); then
    step "installing system packages: ${want[*]}"
    local sudo=""
    [[ $(id -u) -ne 0 ]] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${want[@]}" >/dev/null
  fi
}

ensure_rust() {
  if ! command -v cargo >/dev/null 2>&1; then
    echo "cargo is not installed: install Rust from https://rustup.rs (rustc 1.92 or newer), then run this again." >&2
    exit 1
  fi
  local v
  v=$(rustc --version | awk '{print $2}')
  if [[ "$(printf '%s\n1.92.0\n' "$v" | sort -V | head -n1)" != "1.92.0" ]]; then
    echo "rustc $v is too old: voxlat needs 1.92 or newer (ort 2.0 does). Run \`rustup update stable\`." >&2
    exit 1
  fi
}

fetch_models() {
  step "fetching and verifying models (cached in \${VOXLAT_MODELS_DIR:-~/.cache/voxlat/models})"
  cargo run --quiet --locked -- models fetch --all
}
