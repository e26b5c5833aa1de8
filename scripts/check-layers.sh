#!/bin/sh
# The layers, enforced: every #include "..." in a layer's folder names its own folder or one
# below it. app -> client, server (never each other) -> net -> files -> proto -> crypto. Exits 1 and names
# each include that points up or sideways. Run by ctest (Layers.IncludesPointDownOnly).
cd "$(dirname "$0")/.." || exit 2
allowed() {
  case "$1" in
    crypto) echo "crypto" ;;
    proto) echo "crypto proto" ;;
    files) echo "crypto proto files" ;;
    net) echo "crypto proto files net" ;;
    client) echo "crypto proto files net client" ;;
    server) echo "crypto proto files net server" ;;
  esac
}
bad=0
for layer in crypto proto files net client server; do
  ok=$(allowed "$layer")
  for f in "$layer"/*.h "$layer"/*.cpp; do
    [ -e "$f" ] || continue
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f"); do
      top=${inc%%/*}
      [ "$top" = "$inc" ] && continue  # same-folder include without a path
      case " $ok " in
        *" $top "*) ;;
        *) echo "$f includes $inc: $layer may include only from: $ok"; bad=1 ;;
      esac
    done
  done
done
# The CLI's library (app/ without main.cpp) sits below the lab (app/lab/): it never includes it.
for f in app/*.h app/*.cpp; do
  [ "$f" = app/main.cpp ] && continue
  if grep -q '^[[:space:]]*#[[:space:]]*include[[:space:]]*"app/lab/' "$f"; then
    echo "$f includes app/lab/: only app/main.cpp and app/lab/ itself may"
    bad=1
  fi
done
[ $bad -eq 0 ] && echo "layers: every include points down"
exit $bad
