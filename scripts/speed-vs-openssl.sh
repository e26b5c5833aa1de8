#!/usr/bin/env bash
# Side by side: `openssl speed -evp` and `aesxfer speed` for the same ciphers in the same run,
# with and without AES-NI, and the aesxfer/openssl ratio at 16 KiB.
#
#   scripts/speed-vs-openssl.sh [path/to/aesxfer]          (default build/aesxfer)
#
# Environment: OSSL_SECONDS (integer, default 1) per openssl cell, AX_SECONDS (default 0.25) per
# aesxfer cell. With the defaults the whole run takes about 1.5 minutes.
#
# What is compared (encryption only; openssl speed -evp times encryption unless -decrypt):
#   openssl aes-128-cbc         EVP_EncryptUpdate in place, one CBC chain continued across calls
#   aesxfer aes128-cbc enc      cbc_encrypt, fresh IV per call
#   aesxfer aes128-cbc enc x8   8 independent chains at once (the record layer's multi-buffer path);
#                               openssl -evp has no equivalent, its row is shown against openssl CBC
#   openssl aes-128-gcm -aead   TLS-like: set IV, 13-byte AAD, update, final (tag) per call; openssl
#                               measures 2, 31, 136 bytes there instead of 16, 64, 256 ("-" below)
#   openssl aes-128-gcm         without -aead: one GCM stream continued by EncryptUpdate, no IV
#                               set-up and no tag per call (the bulk CTR+GHASH speed)
#   aesxfer aes128-gcm enc      Aes128Gcm::seal, 13-byte AAD, tag, fresh nonce per call
#   openssl bf-cbc, rc4         (legacy provider) EVP_EncryptUpdate; aesxfer blowfish-cbc, arcfour
# Both sides use wall-clock time (openssl -elapsed) and report bytes per second; printed in MB/s.
#
# Without AES-NI: aesxfer gets --no-aesni (masks AES-NI, VAES, PCLMULQDQ, SHA-NI); openssl gets
# OPENSSL_ia32cap="~0x200000200000000", which clears CPUID.1:ECX bit 25 (AES-NI) and bit 1
# (PCLMULQDQ) in OpenSSL's capability vector. The script checks the figures: masked AES-128-CBC
# must be several times slower than unmasked, or the mask did not take effect.
#
# Note: the machine may be shared (builds running): both tools run back to back per mode, so
# their ratio is more trustworthy than either absolute figure.
set -euo pipefail

BIN=${1:-build/aesxfer}
OSSL_SECONDS=${OSSL_SECONDS:-1}
AX_SECONDS=${AX_SECONDS:-0.25}
OSSL_MASK='~0x200000200000000'
SIZES="16 64 256 1024 8192 16384"

command -v openssl >/dev/null || { echo "openssl CLI not found" >&2; exit 1; }
[ -x "$BIN" ] || { echo "aesxfer binary not found or not executable: $BIN (build it, or pass its path as \$1)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
data=$tmp/data   # lines: mode tool row size bytes_per_second

# openssl speed -mr prints "+H:16:64:..." (sizes) and "+F:n:NAME:v16:v64:..." (bytes/s).
ossl() {  # mode row args...
  local mode=$1 row=$2
  shift 2
  local out
  if [ "$mode" = noaesni ]; then
    out=$(OPENSSL_ia32cap="$OSSL_MASK" openssl speed -elapsed -mr -seconds "$OSSL_SECONDS" "$@" 2>/dev/null)
  else
    out=$(openssl speed -elapsed -mr -seconds "$OSSL_SECONDS" "$@" 2>/dev/null)
  fi
  awk -F: -v mode="$mode" -v row="$row" '
    /^\+H:/ { for (i = 2; i <= NF; i++) size[i - 1] = $i; n = NF - 1 }
    /^\+F:/ { for (i = 4; i <= NF; i++) print mode, "openssl", row, size[i - 3], $i }' <<<"$out" >>"$data"
}

# aesxfer speed --json writes one line of JSON; grep -o splits it into its result objects (flat, keys
# in the documented order: cipher, op, [lanes,] impl, legacy, no_aesni, block_size, mb_per_s).
ax() {  # mode
  local mode=$1 flags=()
  [ "$mode" = noaesni ] && flags=(--no-aesni)
  "$BIN" speed -c aes128-cbc,aes128-gcm,blowfish-cbc,arcfour --seconds "$AX_SECONDS" --json "${flags[@]}" >"$tmp/ax-$mode.json"
  grep -o '{"cipher":[^{}]*}' "$tmp/ax-$mode.json" |
    sed -n 's/.*"cipher":"\([^"]*\)","op":"\([^"]*\)"\(,"lanes":\([0-9]*\)\)\{0,1\}.*"block_size":\([0-9]*\),"mb_per_s":\([0-9.e+-]*\).*/\1 \2 \4 \5 \6/p' |
    awk -v mode="$mode" '{
      row = $1 " " $2; size = $4; mb = $5
      if ($2 == "enc-lanes") { row = $1 " enc x" $3; }
      else { size = $3; mb = $4 }
      gsub(/ /, "_", row)
      printf "%s aesxfer %s %s %.0f\n", mode, row, size, mb * 1e6 }' >>"$data"
  # The implementation actually used, for the heading.
  sed -n 's/.*"impl":{"aes":"\([^"]*\)","gcm":"\([^"]*\)","ghash":"\([^"]*\)","sha256":"\([^"]*\)".*/aes=\1 gcm=\2 ghash=\3 sha256=\4/p' \
    "$tmp/ax-$mode.json"
}

start=$(date +%s)
declare -A impl
for mode in aesni noaesni; do
  echo "== $mode: openssl speed (${OSSL_SECONDS}s per cell) ..." >&2
  ossl "$mode" aes-128-cbc -evp aes-128-cbc
  ossl "$mode" aes-128-gcm -evp aes-128-gcm -aead
  ossl "$mode" aes-128-gcm-stream -evp aes-128-gcm
  ossl "$mode" bf-cbc -provider legacy -provider default -evp bf-cbc
  ossl "$mode" rc4 -provider legacy -provider default -evp rc4
  echo "== $mode: aesxfer speed (${AX_SECONDS}s per cell) ..." >&2
  impl[$mode]=$(ax "$mode")
done

val() {  # mode tool row size -> MB/s or "-"
  awk -v m="$1" -v t="$2" -v r="$3" -v s="$4" \
    '$1 == m && $2 == t && $3 == r && $4 == s { printf "%.1f", $5 / 1e6; found = 1 } END { if (!found) printf "-" }' "$data"
}
ratio() {  # a b -> a/b
  awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'
}

echo
echo "CPU: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$(openssl version)"
echo "MB/s (10^6 bytes per second), encryption, wall clock; ratio = aesxfer / openssl at 16384 bytes"
pairs=(
  "aes-128-cbc aes128-cbc_enc"
  "aes-128-cbc aes128-cbc_enc_x8"
  "aes-128-cbc aes128-cbc_enc_x16"
  "aes-128-gcm aes128-gcm_enc"
  "aes-128-gcm-stream aes128-gcm_enc"
  "bf-cbc blowfish-cbc_enc"
  "rc4 arcfour_enc"
)
for mode in aesni noaesni; do
  echo
  if [ "$mode" = aesni ]; then
    echo "--- with AES-NI (aesxfer: ${impl[$mode]})"
  else
    echo "--- without AES-NI (aesxfer --no-aesni: ${impl[$mode]}; openssl OPENSSL_ia32cap=$OSSL_MASK)"
  fi
  printf "%-34s" "cipher"
  for s in $SIZES; do printf "%11s" "$s"; done
  printf "%9s\n" "ratio"
  prev_o=""
  for p in "${pairs[@]}"; do
    read -r orow arow <<<"$p"
    [ "$(val "$mode" aesxfer "$arow" 16384)" = "-" ] && continue   # x16 only with vaes
    if [ "$orow" != "$prev_o" ]; then
      case $orow in
        aes-128-gcm) label="openssl aes-128-gcm -aead" ;;
        aes-128-gcm-stream) label="openssl aes-128-gcm (stream, no tag)" ;;
        *) label="openssl $orow" ;;
      esac
      printf "%-34s" "$label"
      for s in $SIZES; do printf "%11s" "$(val "$mode" openssl "$orow" "$s")"; done
      echo
    fi
    printf "%-34s" "aesxfer ${arow//_/ }"
    for s in $SIZES; do printf "%11s" "$(val "$mode" aesxfer "$arow" "$s")"; done
    prev_o=$orow
    printf "%9s\n" "$(ratio "$(val "$mode" aesxfer "$arow" 16384)" "$(val "$mode" openssl "$orow" 16384)")"
  done
done

echo
# The mask check: masked figures must be far below unmasked ones for the AES-NI-backed ciphers.
status=0
for who in "openssl aes-128-cbc" "openssl aes-128-gcm" "aesxfer aes128-cbc_enc" "aesxfer aes128-gcm_enc"; do
  read -r tool row <<<"$who"
  on=$(val aesni "$tool" "$row" 16384)
  off=$(val noaesni "$tool" "$row" 16384)
  r=$(ratio "$on" "$off")
  if [ "$r" = "-" ] || awk -v r="$r" 'BEGIN { exit !(r < 2) }'; then
    echo "WARNING: $tool $row is only ${r}x faster with AES-NI than masked: the mask did not take effect" >&2
    status=1
  else
    echo "mask check: $tool ${row//_/ } ${r}x faster with AES-NI than masked (mask effective)"
  fi
done
echo "elapsed: $(( $(date +%s) - start )) s"
exit $status
