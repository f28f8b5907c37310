#!/usr/bin/env bash
# A private PulseAudio daemon whose default output (null sink `spk`) comes back as its default
# input (`spk.monitor`): a sound card with a loopback cable, for the live-mode tests on
# machines without /dev/snd (see docs/audio-testing.md). ALSA's `default` device then
# goes to it through the pulse plugin (libasound2-plugins) for any client with PULSE_SERVER.
#
#   start DIR   start a daemon under DIR, wait until it answers, print PULSE_SERVER=…
#   stop DIR    end the daemon started under DIR (by its PID, never by name)
set -euo pipefail
cmd=${1:-}
dir=${2:-}
[[ -n "$cmd" && -n "$dir" ]] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
run="$dir/runtime"
case "$cmd" in
start)
  command -v pulseaudio >/dev/null || {
    echo "pulseaudio is not installed: run scripts/setup.sh (or apt-get install pulseaudio pulseaudio-utils libasound2-plugins)" >&2
    exit 1
  }
  mkdir -p "$run" "$dir/home"
  chmod 700 "$run"
  cat >"$dir/null-sink.pa" <<'PA'
load-module module-native-protocol-unix auth-anonymous=1
load-module module-null-sink sink_name=spk rate=48000 channels=2
load-module module-null-sink sink_name=drain
load-module module-loopback source=spk.monitor sink=drain latency_msec=20 source_dont_move=true sink_dont_move=true
set-default-sink spk
set-default-source spk.monitor
PA
  # HOME only for the daemon: it writes its cookie there.
  HOME="$dir/home" XDG_RUNTIME_DIR="$run" pulseaudio -n -F "$dir/null-sink.pa" \
    --daemonize=yes --exit-idle-time=-1 --log-target=file:"$dir/pulse.log" >/dev/null 2>&1 || {
    echo "pulseaudio failed to start; its log:" >&2
    cat "$dir/pulse.log" >&2 2>/dev/null || true
    exit 1
  }
  export PULSE_SERVER="unix:$run/pulse/native"
  for _ in $(seq 1 50); do
    pactl info >/dev/null 2>&1 && break
    sleep 0.1
  done
  pactl info >/dev/null 2>&1 || { echo "pulseaudio did not answer on $PULSE_SERVER" >&2; exit 1; }
  # A freshly started null sink can deliver its first capture data seconds late.
  sleep 2
  echo "PULSE_SERVER=$PULSE_SERVER"
  ;;
stop)
  pidfile="$run/pulse/pid"
  if [[ -f "$pidfile" ]]; then
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  ;;
*) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
