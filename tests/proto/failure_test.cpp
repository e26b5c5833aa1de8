// The one failure type (proto/failure.h): what code decides on travels in fields, not in text.
#include "proto/failure.h"

#include <gtest/gtest.h>

#include <cerrno>

using namespace aesxfer;
using proto::Failure;
using proto::Origin;
using proto::Status;

TEST(Failure, DefaultsToALocalInternalFailureWithoutErrno) {
  Failure f("something broke");
  EXPECT_STREQ(f.what(), "something broke");
  EXPECT_EQ(f.status, Status::internal);
  EXPECT_EQ(f.err, 0);
  EXPECT_EQ(f.origin, Origin::local);
}

TEST(Failure, LinkFailuresSayTheConnectionFailed) {
  Failure f = Failure::link("receive from h:1: Connection reset", Status::io_error, ECONNRESET);
  EXPECT_EQ(f.origin, Origin::link);
  EXPECT_EQ(f.err, ECONNRESET);
  EXPECT_EQ(f.status, Status::io_error);
}

TEST(Failure, ARefusalCarriesThePeersStatusAndNamesThePathOnce) {
  proto::Message m;
  m.type = proto::MsgType::response;
  m.status = Status::not_found;
  m.text = "nope.bin: no such file";
  Failure f = proto::refusal(m, "localhost:7227:nope.bin");
  EXPECT_STREQ(f.what(), "localhost:7227:nope.bin: no such file");
  EXPECT_EQ(f.origin, Origin::peer);
  EXPECT_EQ(f.status, Status::not_found);
  EXPECT_EQ(f.err, 0);
}

TEST(Failure, ARefusalWithoutTextUsesTheStatusNameAndIsMadePrintable) {
  proto::Message m;
  m.type = proto::MsgType::result;
  m.status = Status::no_space;
  Failure quiet = proto::refusal(m, "h:1:f");
  EXPECT_EQ(std::string(quiet.what()), std::string("h:1:f: ") + proto::status_name(Status::no_space));
  m.text = "f: \x1b[2Jcleared";
  Failure loud = proto::refusal(m, "h:1:f");
  EXPECT_EQ(std::string(loud.what()).find('\x1b'), std::string::npos) << loud.what();
  EXPECT_NE(std::string(loud.what()).find("\\x1b[2Jcleared"), std::string::npos) << loud.what();
}

TEST(Failure, AnOkAnswerTurnedIntoARefusalIsNeverOk) {
  proto::Message m;
  m.status = Status::ok;  // a caller bug must not produce a failure that reads as success
  EXPECT_NE(proto::refusal(m, "x").status, Status::ok);
}

// The path the peer names against the one asked for: the more exact one is shown, once, and
// nothing that does not start with what the user asked for.
TEST(Failure, ARefusalShowsTheMoreExactPathOnlyBelowTheOneAsked) {
  const auto shown = [](const std::string& text, const std::string& what, Status st = Status::permission) {
    proto::Message m;
    m.status = st;
    m.text = text;
    return std::string(proto::refusal(m, what).what());
  };
  // below: a file put into "d/" is named "d/f"; also below a name without its slash
  EXPECT_EQ(shown("d/f: permission denied", "h:1:d/"), "h:1:d/f: permission denied");
  EXPECT_EQ(shown("d/f: permission denied", "h:1:d"), "h:1:d/f: permission denied");
  // above: the directory of the file asked for refused: the file stays the name shown
  EXPECT_EQ(shown("d/: permission denied", "h:1:d/f"), "h:1:d/f: permission denied");
  // ... but a directory that is not there is named itself, as cp does ("iso/: not a directory")
  EXPECT_EQ(shown("iso/: not a directory", "h:1:iso/a", Status::not_directory), "h:1:iso/: not a directory");
  // below the root "."
  EXPECT_EQ(shown("tdir: exists and is not a directory", "h:1:."), "h:1:tdir: exists and is not a directory");
  EXPECT_EQ(shown("../x: '..' is refused", "h:1:."), "h:1:.: ../x: '..' is refused");
  // a name that only begins the same, or another path: the peer's text shown whole
  EXPECT_EQ(shown("dx/f: permission denied", "h:1:d"), "h:1:d: dx/f: permission denied");
  EXPECT_EQ(shown("/etc/passwd: permission denied", "h:1:d"), "h:1:d: /etc/passwd: permission denied");
}
