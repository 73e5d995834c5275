#!/usr/bin/env bash
# Fetch the reader-training documents (never used by any evaluation set) into $1 (default
# ~/.cache/chapterverse/reader-training). Debian packages are pinned by version; every PDF is
# checked against the sha256 in SOURCES.md. FAA documents are copied from ../shared/training-corpus
# (or $FAA_TRAINING_DIR) and checked the same way.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$HOME/.cache/chapterverse/reader-training}"
faa="${FAA_TRAINING_DIR:-$here/../../../../shared/training-corpus}"
mkdir -p "$out" "$out/.debs"
# package=version  path-inside-package  name-in-corpus
while read -r pkg path name; do
  [ -z "$pkg" ] && continue
  if [ ! -f "$out/$name" ]; then
    (cd "$out/.debs" && [ -f "$(echo "${pkg%%=*}"_*.deb)" ] || apt-get download "$pkg" >/dev/null)
    tmp="$(mktemp -d)"; dpkg-deb -x "$out/.debs/${pkg%%=*}"_*.deb "$tmp"
    src="$tmp/$path"
    if [ -f "$src.gz" ]; then gunzip -c "$src.gz" > "$out/$name"; else cp "$src" "$out/$name"; fi
    rm -rf "$tmp"
  fi
done <<'LIST'
debian-reference-en=2.100 usr/share/debian-reference/debian-reference.en.pdf debian-reference.pdf
developers-reference=12.18 usr/share/developers-reference/developers-reference.pdf developers-reference.pdf
asymptote-doc=2.85+ds-1 usr/share/doc/asymptote/asymptote.pdf asymptote.pdf
glpk-doc=5.0-1 usr/share/doc/glpk-doc/glpk.pdf glpk.pdf
glpk-doc=5.0-1 usr/share/doc/glpk-doc/gmpl.pdf gmpl.pdf
zsh-doc=5.9-4 usr/share/doc/zsh-common/zsh.pdf zsh.pdf
texlive-latex-recommended-doc=2022.20230122-3 usr/share/doc/texlive-doc/latex/beamer/beameruserguide.pdf beameruserguide.pdf
texlive-latex-recommended-doc=2022.20230122-3 usr/share/doc/texlive-doc/latex/xcolor/xcolor.pdf xcolor.pdf
texlive-latex-base-doc=2022.20230122-3 usr/share/doc/texlive-doc/latex/hyperref/hyperref.pdf hyperref.pdf
autoconf-doc=2.71-3 usr/share/doc/autoconf/autoconf.pdf autoconf.pdf
gnu-standards=2022.03.23-0.1 usr/share/doc/gnu-standards/standards.pdf gnu-standards.pdf
gnu-standards=2022.03.23-0.1 usr/share/doc/gnu-standards/maintain.pdf gnu-maintain.pdf
LIST
for f in FAA-G-ACS-2_ACS-Companion-Guide-for-Pilots.pdf FAA-S-ACS-25_Flight-Instructor-Airplane-ACS.pdf; do
  [ -f "$out/$f" ] || cp "$faa/$f" "$out/$f"
done
# verify every file against SOURCES.md (the table's 2nd column is the file, the 4th its sha256)
fail=0
while IFS='|' read -r _ name _ sha _; do
  name="$(echo "$name" | tr -d ' `')"; sha="$(echo "$sha" | tr -d ' `')"
  [[ "$sha" =~ ^[0-9a-f]{64}$ ]] || continue
  got="$(sha256sum "$out/$name" | cut -d' ' -f1)"
  if [ "$got" != "$sha" ]; then echo "sha256 mismatch: $name ($got)" >&2; fail=1; fi
done < "$here/SOURCES.md"
[ "$fail" = 0 ] && echo "reader training documents ready in $out"
exit "$fail"
