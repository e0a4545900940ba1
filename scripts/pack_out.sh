#!/bin/sh
# Packs a results folder for the device tool, which brings back at most 8 files a call (no more
# than 2 folders down): DIR goes whole into DIR.tgz beside it, and DIR keeps only the named files
# (read them without unpacking; the rest is in the archive). Run on the GPU machine:
#
#   sh scripts/pack_out.sh DIR [KEEP ...]
#   e.g. sh scripts/pack_out.sh "$OUT/ab" ratios.txt ab.txt summary.txt
#        sh scripts/pack_out.sh "$OUT/gc" summary.txt
#
# KEEP names files directly in DIR; a name that is not there is skipped. Exits 2 on a bad
# argument (DIR not a folder, a KEEP with a '/'), leaving DIR untouched.
set -eu
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "pack_out.sh: give a folder to pack (got '${1:-}')" >&2
  exit 2
fi
DIR=${1%/}
shift
for k in "$@"; do
  case $k in
    */*|''|.|..) echo "pack_out.sh: keep '$k': a file name directly in $DIR" >&2; exit 2 ;;
  esac
done
parent=$(dirname "$DIR") name=$(basename "$DIR")
tar -czf "$parent/$name.tgz" -C "$parent" "$name"
tmp=$(mktemp -d)
for k in "$@"; do
  [ -f "$DIR/$k" ] && cp "$DIR/$k" "$tmp/$k"
done
rm -rf "$DIR"
mkdir -p "$DIR"
for k in "$@"; do
  [ -f "$tmp/$k" ] && mv "$tmp/$k" "$DIR/$k"
done
rm -rf "$tmp"
echo "pack_out.sh: $parent/$name.tgz ($(tar -tzf "$parent/$name.tgz" | grep -vc '/$') files), kept in $DIR: $(ls "$DIR" | tr '\n' ' ')"
