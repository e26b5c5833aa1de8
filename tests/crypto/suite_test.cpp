// crypto/suite.h beyond the rows themselves: crypto::mac_label, the one answer to "which MAC"
// that the summary, --json, the server log, the key log and bench print.
#include "crypto/suite.h"

#include <gtest/gtest.h>

#include <string>

namespace aesxfer::crypto {
namespace {

TEST(Suite, MacLabelIsAeadForAnAeadCipherAndTheMacsNameOtherwise) {
  const MacDesc* hmac = find_mac("hmac-sha256");
  const MacDesc* none = find_mac("none");
  ASSERT_TRUE(hmac && none);
  for (const CipherDesc& c : ciphers()) {
    SCOPED_TRACE(c.name);
    if (c.aead) {
      EXPECT_EQ(std::string(mac_label(&c, hmac)), "aead") << "an AEAD ignores the MAC";
      EXPECT_EQ(std::string(mac_label(&c, nullptr)), "aead");
    } else {
      EXPECT_EQ(std::string(mac_label(&c, hmac)), "hmac-sha256");
      EXPECT_EQ(std::string(mac_label(&c, none)), "none");
      EXPECT_EQ(std::string(mac_label(&c, nullptr)), "?") << "the key log's placeholder";
    }
  }
  EXPECT_EQ(std::string(mac_label(nullptr, hmac)), "hmac-sha256");
}

}  // namespace
}  // namespace aesxfer::crypto
