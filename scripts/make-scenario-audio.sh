#!/usr/bin/env bash
# Regenerates scenarios/audio/: the bundled utterances. Run once by a maintainer; the outputs
# are committed (small WAVs), so neither CI nor users need to run it.
#
# Real speech: prompts from Debian's asterisk-core-sounds-en-wav (the "Allison" voice,
# CC-BY-SA-3.0, Digium), kept as they ship: 8 kHz mono 16-bit. Their transcripts come from
# the same package's core-sounds-en.txt.
# Synthetic speech: espeak-ng (Debian), 16 kHz mono 16-bit. Labelled `synthetic` in the
# scenario files.
set -euo pipefail
cd "$(dirname "$0")/.."
out=scenarios/audio
mkdir -p "$out"

need() { command -v "$1" >/dev/null || { echo "needs $1 (apt-get install $2)" >&2; exit 1; }; }
need espeak-ng espeak-ng
need sox sox

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download asterisk-core-sounds-en-wav >/dev/null && dpkg -x ./*.deb x)
for name in privacy-prompt tt-weasels agent-alreadyon conf-getpin auth-thankyou; do
  cp "$tmp/x/usr/share/asterisk/sounds/en_US_f_Allison/$name.wav" "$out/real-$name.wav"
done

# Real speech with a pause inside one turn (two prompts joined by silence), for the
# endpointing sweep: a short hangover cuts the speaker off at the pause.
pause() { # out first second pause_seconds
  sox "$out/real-$2.wav" -p pad 0 "$4" | sox - "$out/real-$3.wav" -r 8000 -b 16 -c 1 "$out/real-pause-$1.wav"
}
pause 450ms tt-weasels conf-getpin 0.45
pause 300ms privacy-prompt conf-getpin 0.30

# Very short real commands (digits, single words), where Whisper's greedy decode is most
# likely to loop, kept as they ship.
short() { # source-path-in-package out-name
  cp "$tmp/x/usr/share/asterisk/sounds/en_US_f_Allison/$1.wav" "$out/real-$2.wav"
}
short digits/5 digit-5
short digits/10 digit-10
short digits/40 digit-40
short letters/q letter-q
short hello word-hello
short goodbye word-goodbye
short cancelled word-cancelled
# The same real speech, degraded after the fact, so the clean clip's speech end is still the
# truth: white noise at about 20 dB below the speech, running 1 s past the word, with a 60 Hz
# microphone thump 150 ms after it; and a clip driven 20 dB into hard clipping.
src="$tmp/x/usr/share/asterisk/sounds/en_US_f_Allison"
sox "$src/digits/7.wav" "$tmp/7-padded.wav" pad 0 1.0
sox -n -r 8000 -c 1 -b 16 "$tmp/thump.wav" synth 0.08 sine 60 fade q 0 0.08 0.07 vol 0.5 pad "$(sox --i -D "$src/digits/7.wav" | awk '{print $1 + 0.15}')" 0
sox -n -r 8000 -c 1 -b 16 "$tmp/noise.wav" synth "$(sox --i -D "$tmp/7-padded.wav")" whitenoise vol 0.01
sox -m "$tmp/7-padded.wav" "$tmp/noise.wav" "$tmp/thump.wav" -b 16 "$out/real-noisy-digit-7.wav"
sox "$src/digits/9.wav" -b 16 "$out/real-clipped-digit-9.wav" gain 20 2>/dev/null

synth() { # name text
  espeak-ng -v en-us -s 165 -w "$tmp/$1.raw.wav" "$2"
  sox "$tmp/$1.raw.wav" -r 16000 -c 1 -b 16 "$out/synthetic-$1.wav"
}
synth weather "What's the weather like in Paris today?"
synth timer "Set a timer for ten minutes."
synth joke "Can you tell me a short joke about computers?"
synth moon "How far is the moon from the earth?"
synth remind "Remind me to call my mother tomorrow at nine."
ls -l "$out"
