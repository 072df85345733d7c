#!/usr/bin/env bash
# Writes the English text that char_lstm and tiny_gpt train on: the King James
# Bible (4,137,850 bytes, 62 distinct characters), dumped by Debian's bible-kjv
# package (its `bible` program over bible-kjv-text's data), verse references
# stripped, one verse a line.
#
#   scripts/get_text.sh [OUT_FILE]
#
# OUT_FILE defaults to ${MINIDL_DATA:-$HOME/.cache/minidl}/text/kjv.txt, where
# minidl::data::default_text_path() looks. Installs bible-kjv when run as root
# and it is missing (scripts/setup.sh lists it too). The result is checked
# against its SHA-256; running it again when the file is right does nothing.
set -euo pipefail

out="${1:-${MINIDL_DATA:-$HOME/.cache/minidl}/text/kjv.txt}"
sha256="b5c4940bcfeee072c0935b5200d0f9d88a00a0199cb0961d16133458fcdfae5d"

if [[ -s "$out" ]] && echo "$sha256  $out" | sha256sum --check --status; then
  echo "text already in $out"
  exit 0
fi
if ! command -v bible >/dev/null; then
  if [[ $(id -u) -ne 0 ]]; then
    echo "get_text.sh: the Debian package bible-kjv is missing: sudo apt-get install -y bible-kjv" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bible-kjv >/dev/null
fi
mkdir -p "$(dirname "$out")"
bible -f "Gen1:1-Rev22:21" | sed 's/^[^ ]* //' > "$out.tmp.$$"
if ! echo "$sha256  $out.tmp.$$" | sha256sum --check --status; then
  echo "get_text.sh: $out: the dump's SHA-256 is not $sha256 (another bible-kjv version?)" >&2
  rm -f "$out.tmp.$$"
  exit 1
fi
mv "$out.tmp.$$" "$out"
echo "text: $(wc -c < "$out") bytes in $out"
