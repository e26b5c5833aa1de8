#!/bin/sh
# Style the build does not check: every C++ file as .clang-format has it, and no product function
# (crypto, proto, files, net, client, server, app) longer than 80 lines, no raw ::close. Run by scripts/test.sh
# (stage "style"); needs clang-format and universal-ctags (scripts/setup-debian.sh installs them).
cd "$(dirname "$0")/.." || exit 2
bad=0
files=$(git ls-files '*.cpp' '*.h' 2>/dev/null || find crypto proto files net client server app tests bench -name '*.cpp' -o -name '*.h')
unformatted=$(for f in $files; do clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || echo "$f"; done)
if [ -n "$unformatted" ]; then
  echo "not as .clang-format has it (run clang-format -i on them):"
  echo "$unformatted" | sed 's/^/  /'
  bad=1
fi
long=$(ctags -R --languages=C++ --kinds-C++=f --fields=+ne -o - crypto proto files net client server app |
  awk -F'\t' '{ l = 0; e = 0
                for (i = 4; i <= NF; i++) { if ($i ~ /^line:/) l = substr($i, 6); if ($i ~ /^end:/) e = substr($i, 5) }
                if (l && e && e - l + 1 > 80) printf "  %s %s: %d lines\n", $2, $1, e - l + 1 }')
if [ -n "$long" ]; then
  echo "functions longer than 80 lines:"
  echo "$long"
  bad=1
fi
# Descriptors are owned by files::UniqueFd, the one place the product calls close(2).
raw=$(grep -n '[^A-Za-z_]::close(' $(git ls-files crypto proto files net client server app 2>/dev/null) /dev/null |
  grep -v '^files/unique_fd.h:')
if [ -n "$raw" ]; then
  echo "raw ::close outside files/unique_fd.h (own the descriptor with UniqueFd):"
  echo "$raw" | sed 's/^/  /'
  bad=1
fi
[ $bad -eq 0 ] && echo "style: every file formatted, no product function over 80 lines, close(2) only in UniqueFd"
exit $bad
