# Shared by scripts/setup.sh and scripts/test.sh. Every step checks before it installs, so a
# second run does nothing but verify.

step() { printf '\n==> %s\n' "$*" >&2; }

# Debian/Ubuntu package names; see docs/models.md for why each is needed.
SYSTEM_PACKAGES=(cmake clang libclang-dev g++ pkg-config libespeak-ng-dev espeak-ng-data python3 python3-pip ca-certificates)
# Live mode: cpal's ALSA host (libasound2-dev), and for its tests a private PulseAudio daemon
# reached through ALSA's pulse plugin (scripts/pulse-null-sink.sh; paplay plays into it).
SYSTEM_PACKAGES+=(libasound2-dev pulseaudio pulseaudio-utils libasound2-plugins)
# prometheus: the real Prometheus server tests/metrics_prometheus.rs scrapes `voxlat serve` with.
SYSTEM_PACKAGES+=(prometheus)

# Prints the words after the first that differ from it: removes whole package names only
# (a pattern substitution such as ${a[@]/python3} would also mangle python3-pip).
drop_word() {
  local drop=$1 w
  shift
  for w in "$@"; do [[ "$w" != "$drop" ]] && printf '%s\n' "$w"; done
  return 0
}

install_system_packages() {
  local missing=()
  for p in "${SYSTEM_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # A pip from elsewhere (pyenv, venv) does as well as Debian's, and so does any python3.
  python3 -m pip --version >/dev/null 2>&1 && missing=($(drop_word python3-pip "${missing[@]}"))
  command -v python3 >/dev/null 2>&1 && missing=($(drop_word python3 "${missing[@]}"))
  # On a PipeWire desktop, installing pulseaudio would replace pipewire-pulse: leave it out
  # (only the live-mode tests need it; they say so if it is missing).
  if [[ " ${missing[*]} " == *" pulseaudio "* ]] && dpkg-query -W -f='${Status}' pipewire-pulse 2>/dev/null | grep -q "install ok installed"; then
    echo "note: pipewire-pulse is installed, so pulseaudio (for the live-mode tests) is not" >&2
    missing=($(drop_word pulseaudio "${missing[@]}"))
  fi
  local want=("${missing[@]}")
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
  cargo run --release --quiet --locked -- models fetch --all
}

# Unless told otherwise, ggml compiles llama.cpp for x86-64-v3 (SSE4.2, AVX, AVX2, BMI2, FMA,
# F16C), and on an older x86-64 that portable voxlat-server dies of SIGILL as it starts. Prints,
# for the x86 flags given (as /proc/cpuinfo spells them), the ggml option that switches off
# each of those the CPU lacks: nothing on a CPU of the last decade.
portable_ggml_flags() {
  local flags=" $1 " pair
  for pair in sse4_2:SSE42 avx:AVX avx2:AVX2 bmi2:BMI2 fma:FMA f16c:F16C; do
    [[ "$flags" == *" ${pair%%:*} "* ]] || echo "GGML_${pair#*:}=OFF"
  done
}

# Exports those options for this CPU, so the build of voxlat-server runs here (llama-cpp-sys-2
# passes GGML_* from the environment to ggml's CMake; whisper.cpp is built for the native CPU
# anyway). Both scripts call it before they build, so the second build reuses the first.
export_portable_ggml_flags() {
  [[ $(uname -m) == x86_64 ]] || return 0
  local flags v off=()
  flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2)
  [[ -n "$flags" ]] || return 0
  for v in $(portable_ggml_flags "$flags"); do
    export "${v?}"
    off+=("$v")
  done
  if ((${#off[@]})); then
    echo "note: this CPU lacks instructions that llama.cpp's default build uses; building voxlat-server with ${off[*]}" >&2
  fi
}

# voxlat-server built for AVX-512 (with VNNI, VBMI and BF16) beside the portable build, as
# target/release/voxlat-server-avx512, on a CPU that has every one of those features; voxlat
# runs it there instead (src/embedded/builds.rs lists the same features and checks them
# again at run time). ggml's flags change the whole build of llama.cpp, so it has a target
# directory of its own. The copy is made even when nothing was rebuilt: voxlat passes over a
# variant older than the portable server as stale.
build_server_variants() {
  local need="avx2 fma f16c bmi2 avx512f avx512cd avx512vl avx512dq avx512bw avx512vbmi avx512_vnni avx512_bf16 avx_vnni"
  local flags f
  flags=" $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | cut -d: -f2) "
  for f in $need; do
    if [[ "$flags" != *" $f "* ]]; then
      echo "note: no AVX-512 build of voxlat-server: this CPU lacks $f (the portable build runs)" >&2
      return 0
    fi
  done
  step "building voxlat-server for this CPU's AVX-512 (target/variants/avx512; the first build compiles llama.cpp again: about 6 min on 2 cores)"
  local built=$SECONDS
  GGML_AVX512=ON GGML_AVX512_VBMI=ON GGML_AVX512_VNNI=ON GGML_AVX512_BF16=ON GGML_AVX_VNNI=ON \
    cargo build --release --locked -p voxlat-server --target-dir target/variants/avx512
  cp target/variants/avx512/release/voxlat-server target/release/voxlat-server-avx512
  echo "built in $((SECONDS - built)) s" >&2
}
