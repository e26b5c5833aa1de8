// proto/kdf.h: the one labelled BLAKE2b derivation behind the handshake's direction keys and the
// record layer's RC4 and Blowfish epoch keys. Expected values from Python's
// hashlib.blake2b(label || context, digest_size=n, key=K) with K = 00 01 .. 1f.
#include "proto/kdf.h"

#include <gtest/gtest.h>

#include <array>

#include "tests/test_util.h"

namespace aesxfer::proto {
namespace {

std::array<uint8_t, 32> key() {
  std::array<uint8_t, 32> k{};
  for (size_t i = 0; i < k.size(); ++i) k[i] = uint8_t(i);
  return k;
}

TEST(Kdf, CounterContextIsBigEndianU64) {
  const auto k = key();
  uint8_t out[16];
  kdf(out, sizeof out, k.data(), "aesxfer-v1 rc4", 0x0102030405060708);
  EXPECT_EQ(test::to_hex(out, 16), "ac3cd35540ee13b276983b42f1380d8a");
  kdf(out, sizeof out, k.data(), "aesxfer-v1 rekey", 1);
  EXPECT_EQ(test::to_hex(out, 16), "eff278be2be27d8a9b9c45bfac3dbf4e");
  const uint8_t be[8] = {0, 0, 0, 0, 0, 0, 0, 1};
  uint8_t again[16];
  kdf(again, sizeof again, k.data(), "aesxfer-v1 rekey", be);
  EXPECT_EQ(test::to_hex(again, 16), test::to_hex(out, 16));
}

TEST(Kdf, EmptyContextAndLongestOutput) {
  const auto k = key();
  uint8_t out[64];
  kdf(out, sizeof out, k.data(), "label", std::span<const uint8_t>{});
  EXPECT_EQ(test::to_hex(out, 64),
            "d0f663641b165e697e719dbb779688d8b594e4c8ffa8d6fb135972484cae7b5c"
            "fafea46fc3cd1aebe9e84f4eb7e038a1992af8a394e530b1a969c0c9d96ee8bc");
}

}  // namespace
}  // namespace aesxfer::proto
