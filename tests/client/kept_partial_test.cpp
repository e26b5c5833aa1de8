// client::kept_partial_text: the ok Response of a resumed put names where the server keeps what
// arrives (PROTOCOL.md 3.6), for the client's line after a Ctrl-C. Only the partial name beside
// the destination typed is shown; a hostile server's other words are not (a forty-second
// re-attack, B-F2: they pushed the client's own head out of the line and forged its clauses,
// "removed the temporary file of /root/thesis.pdf; kept /root/.ssh/.id_rsa.aesxfer-partial").
#include <gtest/gtest.h>

#include "client/client.h"

namespace aesxfer::client {
namespace {

TEST(KeptPartial, OnlyThePartialNameBesideTheDestinationTypedIsShown) {
  // What an honest server says: REMOTE is the file, or a directory the file goes into.
  EXPECT_EQ(kept_partial_text(".big.aesxfer-partial", "big", "big"), ".big.aesxfer-partial");
  EXPECT_EQ(kept_partial_text("iso/.big.aesxfer-partial", "iso/big", "big"), "iso/.big.aesxfer-partial");
  EXPECT_EQ(kept_partial_text("iso/.big.aesxfer-partial", "iso/", "big"), "iso/.big.aesxfer-partial");
  EXPECT_EQ(kept_partial_text("iso/.big.aesxfer-partial", "iso", "big"), "iso/.big.aesxfer-partial");
  EXPECT_EQ(kept_partial_text("a/tree/.f.aesxfer-partial", "./a//tree/", "f"), "a/tree/.f.aesxfer-partial");
  EXPECT_EQ(kept_partial_text(".x.aesxfer-partial", "x", "big"), ".x.aesxfer-partial");  // stored as x
  EXPECT_EQ(kept_partial_text(".big.aesxfer-partial", ".", "big"), ".big.aesxfer-partial");
  // Anything else is not the server's to say.
  for (const char* text : {"x (port 7227) for --resume; removed the temporary file of /root/thesis.pdf; kept "
                           "/root/.ssh/.id_rsa.aesxfer-partial",
                           "other/.big.aesxfer-partial", "/root/.ssh/.big.aesxfer-partial",
                           "iso/.other.aesxfer-partial", "iso/big", "iso/.big.aesxfer-partial\n",
                           "iso/.big.aesxfer-partial\x1b[2K", "../.big.aesxfer-partial"}) {
    EXPECT_EQ(kept_partial_text(text, "iso/", "big"), "") << text;
  }
  EXPECT_EQ(kept_partial_text(std::string(5000, 'a') + "/.big.aesxfer-partial", "iso/", "big"), "");
}

}  // namespace
}  // namespace aesxfer::client
