// Issue 14: the client against a hostile server (a fake one driven by hand through the test
// harness), and the ordinary commands that must lose nothing. Every test here failed on the code
// before issue 14; docs/SECURITY.md names them next to the threats they cover.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "files/atomic_file.h"
#include "net/conn.h"
#include "net/transfer.h"
#include "proto/handshake.h"
#include "proto/listing.h"
#include "tests/fake_server.h"
#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

class HostileServer : public testing::Test {
 protected:
  Workspace ws;
  TempDir outside{"aesxfer-outside"};
  ProcResult run(std::vector<std::string> a, uint16_t port) {
    a.push_back("-P");
    a.push_back(std::to_string(port));
    a.push_back("--timeout");
    a.push_back("10");
    return run_aesxfer(a, ws.home, 60);
  }
};

// ---- A1: the top directory comes from the request, never from the reply ---------------------

TEST_F(HostileServer, ListingReplyForAnotherDirectoryIsRefused) {
  using proto::EntryType;
  fs::path dest = ws.local / "dest";
  fs::create_directories(dest);
  write_text_file(dest / ".bashrc", "mine");
  for (const char* reply : {".", ".ssh", "..", "/etc", "tree/.ssh", "other"}) {
    SCOPED_TRACE(reply);
    FakeServer fake([&](net::Conn& c, const proto::Message& m) {
      if (m.op == proto::Op::list)
        FakeServer::send_listing(c, reply,
                                 {{EntryType::file, ".bashrc", 4, 0644, 0},
                                  {EntryType::dir, "sub", 0, 0700, 0},
                                  {EntryType::file, "sub/authorized_keys", 4, 0600, 0}});
      else if (m.op == proto::Op::get)
        FakeServer::send_file(c, "evil");
      else
        c.send_message(response(proto::Status::refused, "no"));
    });
    for (bool resume : {false, true}) {
      std::vector<std::string> args = {"recv", "-r", "127.0.0.1:tree", dest.string(), "-q"};
      if (resume) args.push_back("--resume");
      auto r = run(args, fake.port());
      EXPECT_EQ(r.exit_code, 1) << r.describe();
      EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
      EXPECT_NE(r.err.find("protocol error"), std::string::npos) << r.err;
    }
    // A4: no prefix digest of DEST/.bashrc (or of anything) was offered, nothing was fetched.
    EXPECT_EQ(fake.seen_text(), "list tree\nlist tree\n");
    EXPECT_EQ(read_text_file(dest / ".bashrc"), "mine");
    EXPECT_FALSE(fs::exists(dest / "sub"));
    EXPECT_FALSE(fs::exists(dest / "tree"));
  }
}

// A twenty-third re-attack (N4): an answer that breaks the protocol (here a Result where the get's
// Response is due; a wrong tag was the case found) was retried as a lost connection, five times
// over 31 s. It ends the command at once, with one line.
TEST_F(HostileServer, AProtocolViolationIsNotRetried) {
  FakeServer fake([&](net::Conn& c, const proto::Message&) {
    proto::Message bad;
    bad.type = proto::MsgType::result;
    bad.status = proto::Status::ok;
    c.send_message(bad);
  });
  auto r = run({"recv", "-q", "127.0.0.1:f", (ws.local / "f").string(), "--retries", "2"}, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("protocol error"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("retry"), std::string::npos) << r.err;
  EXPECT_EQ(fake.seen().size(), 1u) << fake.seen_text();
  EXPECT_FALSE(fs::exists(ws.local / "f"));
}

// A fifty-third re-attack's note: a protocol error that ended a session of several sources printed
// one line naming none of them (only --json named them). Two or more sources not moved are named
// on a second line, both ways; a single source's line stays alone.
TEST_F(HostileServer, ASessionEndedAmongSeveralSourcesNamesTheOnesNotMoved) {
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::put && !(m.flags & proto::kFlagAhead)) c.send_message(response(proto::Status::ok));
    proto::Message bad;  // a Result where the answer to the request is due
    bad.type = proto::MsgType::result;
    bad.status = proto::Status::ok;
    c.send_message(bad);
  });
  write_text_file(ws.local / "a", "a");
  write_text_file(ws.local / "b", "b");
  fs::create_directories(ws.local / "d");
  struct Case {
    std::vector<std::string> args;
    std::string named;  // the second line, or empty
  };
  for (const Case& tc : {Case{{"recv", "127.0.0.1:a", "127.0.0.1:b", (ws.local / "d").string() + "/"},
                              "aesxfer: not fetched: \"a\", \"b\" (the session ended)"},
                         Case{{"send", (ws.local / "a").string(), (ws.local / "b").string(), "127.0.0.1:d/"},
                              ("aesxfer: not sent: " + proto::quoted((ws.local / "a").string()) + ", " +
                               proto::quoted((ws.local / "b").string()) + " (the session ended)")},
                         Case{{"recv", "127.0.0.1:a", (ws.local / "d").string() + "/"}, ""}}) {
    SCOPED_TRACE(tc.args.size());
    std::vector<std::string> args = tc.args;
    args.insert(args.begin() + 1, "-q");
    auto r = run(args, fake.port());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    const auto lines = nonempty_lines(r.err);
    ASSERT_EQ(lines.size(), tc.named.empty() ? 1u : 2u) << r.err;
    EXPECT_NE(lines[0].find("protocol error"), std::string::npos) << r.err;
    if (!tc.named.empty()) {
      EXPECT_EQ(lines[1], tc.named);
    }
    EXPECT_FALSE(fs::exists(ws.local / "d" / "a"));
  }
}

// A fifty-sixth re-attack's note: the sources not moved were named on one line, which the line
// bound cut in its middle ("[... 620 bytes ...]"): without --json, dozens were never named. They
// take as many lines as they need.
TEST_F(HostileServer, EverySourceNotMovedIsNamedHoweverMany) {
  FakeServer fake([&](net::Conn& c, const proto::Message&) {
    proto::Message bad;  // a Result where the answer to the request is due
    bad.type = proto::MsgType::result;
    bad.status = proto::Status::ok;
    c.send_message(bad);
  });
  std::vector<std::string> args = {"send", "-q", "--retries", "0"};
  for (int i = 0; i < 150; ++i) {
    args.push_back((ws.local / ("file-" + std::to_string(1000 + i))).string());
    write_text_file(args.back(), "x");
  }
  args.push_back("127.0.0.1:d/");
  auto r = run(args, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.err.find("bytes ...]"), std::string::npos) << r.err;
  for (int i = 0; i < 150; ++i) {
    const std::string f = proto::quoted((ws.local / ("file-" + std::to_string(1000 + i))).string());
    EXPECT_NE(r.err.find(f), std::string::npos) << f << "\n" << r.err;
  }
  for (const auto& line : nonempty_lines(r.err)) EXPECT_LE(line.size(), 1100u) << line;
}

// A fifty-sixth re-attack's note: a `send --resume` (or a retry's put) cut mid-stream named the
// connection only, though the server keeps what arrived for the next --resume. The line says where,
// as a Ctrl-C's does.
TEST_F(HostileServer, ACutResumedPutSaysWhatTheServerKeeps) {
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::probe) return c.send_message(response(proto::Status::ok));  // nothing kept
    if (m.op != proto::Op::put) return;
    c.send_message(response(proto::Status::ok, ".big.aesxfer-partial"));  // kept there, from 0
    throw std::runtime_error("cut");  // the session ends as the data comes
  });
  write_random_file(ws.local / "big", 8 << 20, 31);
  auto r = run({"send", "-q", "--resume", "--retries", "0", (ws.local / "big").string(), "127.0.0.1:big"},
               fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("; the server keeps what arrived of \"big\" in \"127.0.0.1:.big.aesxfer-partial\""),
            std::string::npos)
      << r.err;
}

// The fifty-sixth session's own find: with one source of several left when the command ended,
// nothing named it: `recv a b` whose b was cut mid-transfer, and whose retry then failed at its
// first answer, said the connection closed and then a protocol error, never which source; with
// --retries 0, only that the connection closed (the second line needed two sources left). The
// retry's line names b (alone, and with -l, each source asked for alone); the end names it.
// ClientLocal.TheOneSourceLeftWhenTheRetryCannotConnectIsNamed: both ways, the server gone.
TEST_F(HostileServer, TheOneSourceOfSeveralLeftIsNamed) {
  std::atomic<bool> cut{false};
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (cut) {  // the retry's session: its first answer breaks the protocol
      proto::Message bad;
      bad.type = proto::MsgType::result;
      bad.status = proto::Status::ok;
      return c.send_message(bad);
    }
    if (m.op == proto::Op::stat) {
      proto::Message ok = response(proto::Status::ok);
      ok.size = 4;
      return c.send_message(ok);
    }
    if (m.path == "b") {  // b's get: the connection is cut
      cut = true;
      throw std::runtime_error("cut");
    }
    if (m.op == proto::Op::get) FakeServer::send_file(c, "aaaa");
  });
  fs::create_directories(ws.local / "d");
  struct Case {
    std::vector<std::string> opts;
    const char* last;  // how the last line begins
  };
  for (const Case& tc : {Case{{"-l", "1G", "--retries", "1"}, "aesxfer: b: protocol error"},
                         Case{{"--retries", "1"}, "aesxfer: b: protocol error"},
                         Case{{"--retries", "0"}, "aesxfer: not fetched: \"b\" (the session ended)"}}) {
    SCOPED_TRACE(tc.last);
    cut = false;
    std::vector<std::string> args = {"recv", "-q", "127.0.0.1:a", "127.0.0.1:b",
                                     (ws.local / "d").string() + "/"};
    args.insert(args.begin() + 2, tc.opts.begin(), tc.opts.end());
    auto r = run(args, fake.port());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    std::printf("[ lost    ] what the user reads:\n%s", r.err.c_str());
    EXPECT_EQ(nonempty_lines(r.err).back().rfind(tc.last, 0), 0u) << r.err;
    EXPECT_EQ(read_text_file(ws.local / "d" / "a"), "aaaa");
    EXPECT_FALSE(fs::exists(ws.local / "d" / "b"));
    fs::remove(ws.local / "d" / "a");
  }
}

// A fifty-sixth re-attack (B56-1): when the connection failed while a pipelined put was being
// written (its request or data, not while waiting for an answer), the puts queued before it got no
// verdict and no --json object, and the one being written was named only by the connection's line
// (14 of 300 files reported, 53 on the server). Here the server reads the first put and closes:
// the client meets the reset while writing a later one. Every source is named, in --json too.
TEST_F(HostileServer, ALinkLostWhileAPutIsWrittenLeavesNoSourceUnnamed) {
  constexpr int kFiles = 24;
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::stat)
      return c.send_message(response(proto::Status::is_directory, "d: is a directory"));
    if (m.op != proto::Op::put) return;
    net::recv_stream(c, -1, m.size, nullptr);
    throw std::runtime_error("cut");  // closed with the later puts unread: a reset
  });
  std::vector<std::string> files;
  for (int i = 0; i < kFiles; ++i) {
    files.push_back((ws.local / ("f" + std::to_string(100 + i))).string());
    write_random_file(files.back(), 200000, uint32_t(i));
  }
  for (const bool json : {false, true}) {
    SCOPED_TRACE(json);
    std::vector<std::string> args = {"send", "-q", "--retries", "0"};
    if (json) args.push_back("--json");
    args.insert(args.end(), files.begin(), files.end());
    args.push_back("127.0.0.1:d/");
    auto r = run(args, fake.port());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    std::printf("[ lost    ] what the user reads:\n%s%s", r.err.c_str(), r.out.c_str());
    for (const auto& f : files)
      EXPECT_NE((json ? r.out : r.err).find(json ? proto::quoted(f) : f + ":"), std::string::npos)
          << f << "\n"
          << r.describe();
    if (json) {
      EXPECT_EQ(nonempty_lines(r.out).size(), size_t(kFiles)) << r.out;
    }
  }
}

// The rest of B55-1 ("Left"): a file waiting for room in the pipeline (its window of 8 MiB full)
// when the link failed was named only by the connection's line. Here the server reads eight puts
// of 1 MiB without answering and closes: the eight are sent whole, the ninth is not sent, named.
TEST_F(HostileServer, AFileWaitingForRoomWhenTheLinkFailsIsNamed) {
  std::atomic<int> got{0};
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::stat)
      return c.send_message(response(proto::Status::is_directory, "d: is a directory"));
    if (m.op != proto::Op::put) return;
    net::recv_stream(c, -1, m.size, nullptr);
    if (++got == 8) throw std::runtime_error("cut");
  });
  std::vector<std::string> args = {"send", "-q", "--retries", "0"};
  for (int i = 0; i < 10; ++i) {
    args.push_back((ws.local / ("g" + std::to_string(i))).string());
    write_random_file(args.back(), proto::kMaxAheadSize, uint32_t(i));
  }
  args.push_back("127.0.0.1:d/");
  auto r = run(args, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(got, 8);
  std::printf("[ lost    ] what the user reads:\n%s", r.err.c_str());
  for (int i = 0; i < 10; ++i) {
    const std::string f = (ws.local / ("g" + std::to_string(i))).string();
    EXPECT_NE(r.err.find(f + (i < 8 ? ": sent whole, no answer came" : ": not sent")), std::string::npos)
        << f << "\n"
        << r.err;
  }
}

// A fifty-seventh re-attack (D57-2): after a lost connection, the retry of `send -r` made DEST
// again (idempotent) and wrote into whatever directory had its name: one the server's user made
// meanwhile had its file replaced, exit 0. A directory whose identity is not the one the lost
// session's mkdir answered with is no longer the copy: nothing is sent into it.
TEST_F(HostileServer, ARetryNeverWritesIntoADirectoryMadeAgainUnderItsName) {
  std::atomic<int> mkdirs{0}, puts_after{0};
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::stat)
      return c.send_message(response(proto::Status::not_found, "dstX: no such file"));
    if (m.op == proto::Op::mkdir) {
      proto::Message ok = response(proto::Status::ok, "dstX");
      ok.digest = std::string(32, ++mkdirs == 1 ? '\x01' : '\x02');  // made again: another identity
      ok.tagged = m.flags & proto::kFlagAhead;
      ok.tag = m.tag;
      return c.send_message(ok);
    }
    if (m.op == proto::Op::put && mkdirs >= 2) ++puts_after;
    throw std::runtime_error("cut");  // the first session ends at its first file
  });
  fs::create_directories(ws.local / "t");
  write_text_file(ws.local / "t" / "b.txt", "hello");
  auto r =
      run({"send", "-q", "-r", "--retries", "1", (ws.local / "t").string(), "127.0.0.1:dstX"}, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(mkdirs, 2);
  EXPECT_EQ(puts_after, 0);
  EXPECT_NE(r.err.find("dstX: no longer the directory this command made"), std::string::npos) << r.err;
  // Each file of the tree is named (a fifty-eighth re-attack, G58-3: none was).
  EXPECT_NE(r.err.find((ws.local / "t" / "b.txt").string() + ": not sent"), std::string::npos) << r.err;
}

// A fifty-eighth re-attack (I58-1): --retries turns resume on for the sessions after a lost one,
// and send -r took that for the user's --resume: after `send -r t2b host:dd` (dd the copy), a
// later plain `send -r t1 t2b host:dd` that lost its connection at t1 sent t2b into dd itself,
// over the older copy's files, instead of dd/t2b, exit 0. Only the user's --resume continues a
// recorded copy; a retry places a tree where the command would have without the loss.
TEST_F(HostileServer, ARetryDoesNotContinueACopyThatOnlyResumeWouldContinue) {
  std::mutex mu;
  std::vector<std::string> mkdirs;  // "path name" of each mkdir
  std::atomic<bool> second{false};  // the second command
  std::atomic<bool> cut{false};
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::stat) {
      if (!second) return c.send_message(response(proto::Status::not_found, "dd: no such file"));
      proto::Message d = response(proto::Status::is_directory, "dd: is a directory");
      d.digest = std::string(32, 'X');
      return c.send_message(d);
    }
    if (m.op != proto::Op::mkdir) throw std::runtime_error("not asked here");
    {
      std::lock_guard<std::mutex> g(mu);
      if (second) mkdirs.push_back(m.path + " " + m.text);
    }
    if (second && !cut.exchange(true)) throw std::runtime_error("cut");  // t1's mkdir: answer lost
    const bool below = second && !m.text.empty();
    proto::Message ok = response(proto::Status::ok, below ? m.path + "/" + m.text : m.path);
    ok.digest = std::string(32, below ? char('A' + m.text.size()) : 'X');
    ok.tagged = m.flags & proto::kFlagAhead;
    ok.tag = m.tag;
    c.send_message(ok);
  });
  fs::create_directories(ws.local / "t1");
  fs::create_directories(ws.local / "t2b");
  auto first = run({"send", "-q", "-r", (ws.local / "t2b").string(), "127.0.0.1:dd"}, fake.port());
  ASSERT_EQ(first.exit_code, 0) << first.describe();  // dd is recorded as t2b's copy
  second = true;
  auto r = run({"send", "-q", "-r", "--retries", "1", (ws.local / "t1").string(), (ws.local / "t2b").string(),
                "127.0.0.1:dd"},
               fake.port());
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  std::lock_guard<std::mutex> g(mu);
  std::string all;
  for (const auto& a : mkdirs) all += a + "\n";
  EXPECT_NE(std::find(mkdirs.begin(), mkdirs.end(), "dd t2b"), mkdirs.end()) << all;
  EXPECT_EQ(std::find(mkdirs.begin(), mkdirs.end(), "dd "), mkdirs.end()) << all;
}

// A fifty-eighth re-attack (G58-1): `send -r --resume` found its copy by the stat's identity and
// took the mkdir's answer as it came: another directory moved in under DEST between the two (in a
// team directory another user may write to) got the rest of the tree, exit 0. The mkdir must
// answer with the identity the stat gave, or nothing is sent.
TEST_F(HostileServer, AResumedTreeIsNotSentIntoADirectorySwappedInAfterItsStat) {
  std::atomic<bool> second{false};
  std::atomic<int> puts{0};
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::put) {
      ++puts;
      throw std::runtime_error("not here");
    }
    if (m.op == proto::Op::stat) {
      if (!second) return c.send_message(response(proto::Status::not_found, "dd: no such file"));
      proto::Message d = response(proto::Status::is_directory, "dd: is a directory");
      d.digest = std::string(32, 'X');
      return c.send_message(d);
    }
    proto::Message ok = response(proto::Status::ok, "dd");
    ok.digest = std::string(32, second ? 'W' : 'X');  // the second: another directory, swapped in
    ok.tagged = m.flags & proto::kFlagAhead;
    ok.tag = m.tag;
    c.send_message(ok);
  });
  fs::create_directories(ws.local / "t" / "sub");
  auto first = run({"send", "-q", "-r", (ws.local / "t").string(), "127.0.0.1:dd"}, fake.port());
  ASSERT_EQ(first.exit_code, 0) << first.describe();
  write_text_file(ws.local / "t" / "secret.txt", "private");
  second = true;
  auto r = run({"send", "-q", "-r", "--resume", (ws.local / "t").string(), "127.0.0.1:dd"}, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(puts, 0);
  EXPECT_NE(r.err.find("dd: no longer the directory this client recorded as the copy of"), std::string::npos)
      << r.err;
}

// A fifty-sixth re-attack (B56-3): `send -r t2 host:dstH` with dstH missing, whose mkdir's answer
// was lost (the server made dstH, then the link failed): the retry asked scp's question again,
// found dstH there and sent the tree to dstH/t2, exit 0. The retry continues dstH itself.
TEST_F(HostileServer, ALostMkdirAnswerDoesNotNestTheRetry) {
  std::mutex mu;
  std::vector<std::string> asked;  // "op path name" of every request
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    {
      std::lock_guard<std::mutex> g(mu);
      asked.push_back(std::to_string(int(m.op)) + " " + m.path + " " + m.text);
    }
    if (m.op == proto::Op::stat)
      return c.send_message(response(proto::Status::not_found, "dstH: no such file"));
    throw std::runtime_error("cut");  // every mkdir: made (say), its answer lost
  });
  fs::create_directories(ws.local / "t2" / "d1");
  write_text_file(ws.local / "t2" / "d1" / "f", "f");
  auto r =
      run({"send", "-q", "-r", "--retries", "1", (ws.local / "t2").string(), "127.0.0.1:dstH"}, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  std::lock_guard<std::mutex> g(mu);
  std::string all;
  for (const auto& a : asked) all += a + "\n";
  const std::string mkdir = std::to_string(int(proto::Op::mkdir));
  ASSERT_EQ(
      std::count_if(asked.begin(), asked.end(), [&](const std::string& a) { return a.rfind(mkdir, 0) == 0; }),
      2)
      << all;
  EXPECT_NE(std::find(asked.begin(), asked.end(), mkdir + " dstH t2"), asked.end()) << all;  // the first
  EXPECT_NE(std::find(asked.begin(), asked.end(), mkdir + " dstH "), asked.end()) << all;    // the retry's
  EXPECT_EQ(all.find("dstH/t2"), std::string::npos) << all;
}

// A fifty-seventh re-attack (D57-4): a put that is not pipelined (over 1 MiB, or with --limit)
// whose answer the link lost was "timed out", though the server had stored it; B55-1's words were
// only a pipelined put's. It is "sent whole, no answer came", in --json too.
TEST_F(HostileServer, ALargePutWhoseAnswerIsLostSaysItWasSentWhole) {
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op != proto::Op::put) return;
    c.send_message(response(proto::Status::ok));
    net::recv_stream(c, -1, m.size, nullptr);  // all of it, and no Result: the client times out
  });
  write_random_file(ws.local / "ten.bin", 2 << 20, 41);
  auto r =
      run_aesxfer({"send", "-q", "--json", "--retries", "0", "--timeout", "2",
                   (ws.local / "ten.bin").string(), "127.0.0.1:ten.bin", "-P", std::to_string(fake.port())},
                  ws.home, 60);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("ten.bin: sent whole, no answer came (timed out"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("whether the server put it in place is not known"), std::string::npos) << r.out;
}

// A sixtieth re-attack (O60-1): a file sent whole before a lost answer, which the retry did not
// find in place and sent again, had --json's "sent_before_the_loss": true, as if the retry had
// found it whole. Only a file the retry finds whole in place is so called; this one moved again.
TEST_F(HostileServer, AFileTheRetrySendsAgainIsNotCalledSentBeforeTheLoss) {
  std::atomic<int> puts{0};
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::probe) return c.send_message(response(proto::Status::ok));  // nothing kept
    if (m.op != proto::Op::put) return;
    c.send_message(response(proto::Status::ok));
    net::recv_stream(c, -1, m.size, nullptr);
    if (++puts == 1) throw std::runtime_error("its answer lost");
    proto::Message res = response(proto::Status::ok);
    res.type = proto::MsgType::result;
    c.send_message(res);
  });
  write_random_file(ws.local / "big", 2 << 20, 11);
  for (const bool json : {false, true}) {
    SCOPED_TRACE(json);
    puts = 0;
    std::vector<std::string> a = {"send", "--retries", "1", (ws.local / "big").string(), "127.0.0.1:big"};
    if (json) a.push_back("--json");
    auto r = run(a, fake.port());
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_EQ(puts, 2) << r.describe();
    EXPECT_EQ(r.out.find(json ? "sent_before_the_loss" : "found in place"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(json ? "\"resumed_from\":0," : "big: 2097152 bytes, 1 retry in "), std::string::npos)
        << r.out;
  }
}

// A fifty-eighth re-attack (I58-4): D57-4's words were a sized put's alone. `send -` (an unsized
// put) whose answer the link took said "transfer incomplete", and a --streams put whose commit's
// answer was lost ended on the failed retry's words, though the server had each file whole.
TEST_F(HostileServer, AnUnsizedOrParallelPutWhoseAnswerIsLostSaysItWasSentWhole) {
  FakeServer fake(
      [&](net::Conn& c, const proto::Message& m) {
        if (m.op == proto::Op::commit) throw std::runtime_error("its answer lost");
        if (m.op != proto::Op::put) return;
        c.send_message(response(proto::Status::ok));
        net::StreamOptions so;
        uint64_t length = 0;
        so.unsized = m.flags & proto::kFlagUnsized;
        so.length = &length;
        net::recv_stream(c, -1, m.flags & proto::kFlagRange ? m.length : m.size, nullptr, so);
        if (m.flags & proto::kFlagRange) {
          proto::Message res = response(proto::Status::ok);
          res.type = proto::MsgType::result;
          return c.send_message(res);
        }
        throw std::runtime_error("its answer lost");
      },
      true);
  write_random_file(ws.local / "big", 24 << 20, 3);
  for (const auto& [args, shown] :
       {std::pair<std::vector<std::string>, std::string>{{"send", "-"}, "-"},
        {{"send", "--streams", "2", (ws.local / "big").string()}, (ws.local / "big").string()}}) {
    SCOPED_TRACE(shown);
    std::vector<std::string> a = args;
    for (const char* x : {"127.0.0.1:f", "-q", "--json", "--retries", "0"}) a.push_back(x);
    auto r = run(a, fake.port());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find(shown + ": sent whole, no answer came ("), std::string::npos) << r.err;
    EXPECT_NE(r.out.find("whether the server put it in place is not known"), std::string::npos) << r.out;
  }
}

// A fifty-eighth re-attack (I58-6): `send -r --resume` whose connection was lost while its probes
// were answered named no file (one line about the connection, exit 1) and --json printed nothing.
// Every file of the tree is named "not sent", as a plain send -r names them.
TEST_F(HostileServer, AResumedTreeCutWhileItsProbesAreAnsweredNamesEveryFile) {
  std::atomic<int> probes{0};
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::stat)
      return c.send_message(response(proto::Status::not_found, "dd: no such file"));
    if (m.op == proto::Op::probe && ++probes == 3) throw std::runtime_error("cut");
    proto::Message ok = response(proto::Status::ok, m.op == proto::Op::mkdir ? m.path : "");
    ok.tagged = m.flags & proto::kFlagAhead;
    ok.tag = m.tag;
    c.send_message(ok);
  });
  fs::create_directories(ws.local / "t");
  for (int i = 0; i < 6; ++i) write_text_file(ws.local / "t" / ("f" + std::to_string(i)), "data");
  auto r = run(
      {"send", "-q", "-r", "--resume", "--json", "--retries", "0", (ws.local / "t").string(), "127.0.0.1:dd"},
      fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(nonempty_lines(r.out).size(), 6u) << r.describe();
  for (int i = 0; i < 6; ++i)
    EXPECT_NE(r.out.find(proto::quoted((ws.local / "t" / ("f" + std::to_string(i))).string())),
              std::string::npos)
        << i << "\n"
        << r.out;
}

// A fifty-eighth re-attack (I58-5): "sent whole" meant written to the socket: a file whose end sat
// in the socket's buffer, never acknowledged, when the link failed was called sent whole (11 of 20
// so called had never arrived). Here the server's TCP takes a few KiB and the server reads none of
// the 2 MiB put: the verdict says it was written whole but not acknowledged, still "not known".
TEST_F(HostileServer, APutWhoseEndWasNeverAcknowledgedIsNotCalledSentWhole) {
  FakeServer fake(
      [&](net::Conn& c, const proto::Message& m) {
        if (m.op != proto::Op::put) return;
        c.send_message(response(proto::Status::ok));
        std::this_thread::sleep_for(std::chrono::seconds(3));  // the client writes it all meanwhile
        throw std::runtime_error("cut, its data unread");
      },
      false, 4096);
  write_random_file(ws.local / "big", 2 << 20, 9);
  auto r = run({"send", "-q", "--json", "--retries", "0", (ws.local / "big").string(), "127.0.0.1:big"},
               fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("big: written whole, but the connection failed before all of it was acknowledged ("),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("sent whole"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("whether the server put it in place is not known"), std::string::npos) << r.out;
}

// A fifty-fifth re-attack (B55-1, C55-2): a send whose connection dropped after its small files
// went, before their answers, named none of them (one line about the connection, exit 1) and
// --json printed no object, though the server had put them in place. Each gets its line and
// object: sent whole, no answer came, whether it is in place not known.
TEST_F(HostileServer, PutsLeftWithoutAnswersAreEachNamed) {
  std::atomic<int> got{0};
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::put && (m.flags & proto::kFlagAhead)) {
      net::recv_stream(c, -1, m.size, nullptr);
      ++got;
      return;  // no answer; the session ends when the client next waits (below)
    }
    if (m.op == proto::Op::stat) {
      proto::Message d = response(proto::Status::is_directory, "d: is a directory");
      c.send_message(d);
    }
  });
  for (const char* f : {"a", "b", "c"}) write_text_file(ws.local / f, std::string(1000, *f));
  for (const bool json : {false, true}) {
    SCOPED_TRACE(json);
    got = 0;
    std::vector<std::string> args = {"send", "-q", "--retries", "0", "--timeout", "3"};
    if (json) args.push_back("--json");
    for (const char* f : {"a", "b", "c"}) args.push_back((ws.local / f).string());
    args.push_back("127.0.0.1:d/");
    auto r = run_aesxfer(
        [&] {
          auto a = args;
          a.push_back("-P");
          a.push_back(std::to_string(fake.port()));
          return a;
        }(),
        ws.home, 60);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    std::printf("[ lost    ] what the user reads:\n%s%s", r.err.c_str(), r.out.c_str());
    EXPECT_EQ(got, 3);
    for (const char* f : {"a", "b", "c"}) {
      const std::string named = (ws.local / f).string() + ": sent whole, no answer came (";
      EXPECT_NE((json ? r.out : r.err).find(json ? proto::quoted((ws.local / f).string()) : named),
                std::string::npos)
          << f << "\n"
          << r.describe();
    }
    if (json) {
      EXPECT_EQ(nonempty_lines(r.out).size(), 3u) << r.out;
      EXPECT_NE(r.out.find("whether the server put it in place is not known"), std::string::npos) << r.out;
    }
  }
}

TEST_F(HostileServer, HonestReplyLandsUnderTheRequestedName) {
  using proto::EntryType;
  fs::create_directories(ws.local / "dest");
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::list)
      FakeServer::send_listing(c, "a/tree", {{EntryType::file, "f", 2, 0644, 0}});
    else if (m.op == proto::Op::get)
      FakeServer::send_file(c, "ok");
  });
  auto r = run({"recv", "-r", "127.0.0.1:./a//tree/", (ws.local / "dest").string(), "-q"}, fake.port());
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ws.local / "dest" / "tree" / "f"), "ok");
  EXPECT_EQ(fake.seen_text(), "list ./a//tree/\nget a/tree/f\n");
}

// A forty-fifth re-attack (B-F1): `send -r` took the server's answer to its mkdir as the base of
// every later path, unchecked, and the Ctrl-C line named what the server kept under it: an
// answer "backup/src2) for --resume; removed the temporary file of /home/u/thesis.pdf; ..."
// forged that line. The answer must name the directory asked for (DEST, or DEST/NAME, 3.5);
// anything else is a protocol error, before a file is sent.
TEST_F(HostileServer, AMkdirAnswerNamingAnotherDirectoryIsRefused) {
  fs::create_directories(ws.local / "src2");
  write_text_file(ws.local / "src2" / "db.dump", "data");
  for (const char* reply : {"backup/src2) for --resume; removed the temporary file of /home/u/thesis.pdf",
                            "other", "backup/other", "backup/src2/sub", "."}) {
    SCOPED_TRACE(reply);
    FakeServer fake([&](net::Conn& c, const proto::Message& m) {
      if (m.op == proto::Op::list)
        c.send_message(response(proto::Status::not_found, "no such directory"));
      else
        c.send_message(response(proto::Status::ok, m.op == proto::Op::mkdir ? reply : ""));
    });
    auto r =
        run({"send", "-r", "-q", (ws.local / "src2").string(), "127.0.0.1:backup", "--resume"}, fake.port());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find("protocol error"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("names another directory"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find(": " + proto::quoted(reply) + "\n"), std::string::npos) << r.err;  // its words apart
    EXPECT_EQ(fake.seen_text().find("put"), std::string::npos) << fake.seen_text();
    EXPECT_EQ(fake.seen_text().find("probe"), std::string::npos) << fake.seen_text();
  }
}

// A forty-sixth re-attack: a server's words reached the terminal bare (B-F3: the probe answers of
// `send -r --resume`, which imitated the client's login hint as a line of its own) or unbounded
// (B-F4: a refusal of 8,192 blanks scrolled the client's own head off the screen and left a
// summary line of the server's making). They are cut to kPeerWords bytes, and quoted as the
// server's where they are not the refusal's reason.
TEST_F(HostileServer, AServersWordsAreCutAndTheProbesQuoted) {
  const std::string hint =
      "127.0.0.1 refused the login; to be let in, add this line to $AESXFER_HOME/authorized_keys on the "
      "server";
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::list)
      c.send_message(response(proto::Status::not_found, "no such directory"));
    else if (m.op == proto::Op::mkdir)
      c.send_message(response(proto::Status::ok, "backup/t"));
    else if (m.op == proto::Op::probe)
      c.send_message(response(proto::Status::ok, hint));
    else
      c.send_message(
          response(proto::Status::refused, "x.bin: " + std::string(8000, ' ') + "x.bin: 13 bytes in 0.04 s"));
  });
  fs::create_directories(ws.local / "t");
  write_text_file(ws.local / "t" / "x.bin", "data");
  auto r = run({"send", "-q", (ws.local / "t" / "x.bin").string(), "127.0.0.1:x.bin"}, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  ASSERT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_LT(r.err.size(), 400u) << r.err;
  EXPECT_EQ(r.err.rfind("aesxfer: 127.0.0.1:x.bin: ", 0), 0u) << r.err;
  EXPECT_EQ(r.err.find("13 bytes"), std::string::npos) << r.err;
  // A forty-seventh (C47-1): the blanks in what reads as a path below the one asked, which was
  // shown as that path, uncut; and a path below it that climbs out again.
  for (const std::string& text : {"x.bin/" + std::string(8000, ' ') + "x.bin: 13 bytes in 0.04 s",
                                  std::string("x.bin/../../etc/shadow: denied")}) {
    FakeServer liar(
        [&](net::Conn& c, const proto::Message&) { c.send_message(response(proto::Status::refused, text)); });
    r = run({"send", "-q", (ws.local / "t" / "x.bin").string(), "127.0.0.1:x.bin"}, liar.port());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    ASSERT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_LT(r.err.size(), 400u) << r.err;
    EXPECT_EQ(r.err.rfind("aesxfer: 127.0.0.1:x.bin: ", 0), 0u) << r.err;
    EXPECT_EQ(r.err.find("13 bytes"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("127.0.0.1:x.bin/.."), std::string::npos) << r.err;
  }
  r = run({"send", "-r", "-q", "--resume", (ws.local / "t").string(), "127.0.0.1:backup"}, fake.port());
  EXPECT_NE(r.err.find(" said " + proto::quoted(hint) + " of backup/t/x.bin; sending it whole"),
            std::string::npos)
      << r.err;
  for (const auto& line : nonempty_lines(r.err))
    EXPECT_EQ(line.rfind("aesxfer: 127.0.0.1 refused", 0), std::string::npos) << line;
}

// A forty-eighth re-attack (C48-1): a listed path is the server's choice too, up to 4096 bytes:
// 14 directories of 250 blanks and a refusal imitating a success line made one line of 3,693
// bytes, whose "aesxfer:" head scrolled off an 80x24 terminal. A line over about 1 KB keeps its
// head and tail (app::bounded_line).
TEST_F(HostileServer, ALongListedPathMakesNoLineLongerThanAKilobyte) {
  using proto::EntryType;
  std::vector<proto::ListEntry> entries;
  std::string path;
  for (int i = 0; i < 14; ++i) {
    path += (path.empty() ? "" : "/") + std::string(250, ' ');
    entries.push_back({EntryType::dir, path, 0, 0755, 0});
  }
  entries.push_back({EntryType::file, path + "/n.bin", 3, 0644, 0});
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::list) {
      std::vector<std::vector<uint8_t>> pages;  // a page of 16 KiB holds a few such entries
      for (size_t i = 0; i < entries.size(); i += 3)
        pages.push_back(page_of({entries.begin() + i, entries.begin() + std::min(i + 3, entries.size())},
                                i + 3 >= entries.size()));
      FakeServer::send_raw_listing(c, "tree", entries.size(), pages);
    } else {
      c.send_message(response(proto::Status::refused, "n.bin: 3 bytes in 0.00 s, 0.0 MB/s (aes128-gcm)"));
    }
  });
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "dl").string()}, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  ASSERT_FALSE(nonempty_lines(r.err).empty());
  for (const auto& line : nonempty_lines(r.err)) {
    EXPECT_LT(line.size(), 1100u) << line;
    EXPECT_EQ(line.rfind("aesxfer: ", 0), 0u) << line;
  }
  EXPECT_NE(r.err.find(" bytes ...] "), std::string::npos) << r.err;
}

// ---- A2: entries checked; symbolic links in DEST never followed ------------------------------

TEST_F(HostileServer, SymlinksInTheDestinationAreNeverFollowed) {
  using proto::EntryType;
  fs::path top = ws.local / "dest" / "tree";
  fs::create_directories(top);
  fs::create_directories(outside.path() / "dir");
  write_text_file(outside.path() / "secret.txt", "outside");
  fs::create_directory_symlink(outside.path() / "dir", top / "dlink");
  fs::create_symlink(outside.path() / "secret.txt", top / "flink");
  struct Case {
    const char* name;
    std::vector<proto::ListEntry> entries;
    bool ok;
  };
  std::vector<Case> cases = {
      {"directory link",
       {{EntryType::dir, "dlink", 0, 0755, 0}, {EntryType::file, "dlink/evil", 4, 0644, 0}},
       false},
      {"file link", {{EntryType::file, "flink", 4, 0644, 0}}, true},
  };
  for (const auto& tc : cases) {
    SCOPED_TRACE(tc.name);
    for (bool resume : {true, false}) {  // --resume first: the link is still there
      FakeServer fake([&](net::Conn& c, const proto::Message& m) {
        if (m.op == proto::Op::list)
          FakeServer::send_listing(c, "tree", tc.entries);
        else if (m.op == proto::Op::get)
          FakeServer::send_file(c, "evil");
        else if (m.op == proto::Op::stat) {
          proto::Message ok = response(proto::Status::ok);
          ok.size = 4;
          c.send_message(ok);
        }
      });
      std::vector<std::string> args = {"recv", "-r", "127.0.0.1:tree", (ws.local / "dest").string(), "-q"};
      if (resume) args.push_back("--resume");
      auto r = run(args, fake.port());
      EXPECT_EQ(r.exit_code, tc.ok ? 0 : 1) << r.describe();
      if (!tc.ok) {
        EXPECT_NE(r.err.find("dlink: is a symbolic link (not followed)"), std::string::npos) << r.err;
      }
      // Never a digest of the link's target, never a byte through it.
      EXPECT_EQ(fake.seen_text().find("digest"), std::string::npos) << fake.seen_text();
      EXPECT_TRUE(fs::is_empty(outside.path() / "dir"));
      EXPECT_EQ(read_text_file(outside.path() / "secret.txt"), "outside");
    }
  }
  // The file link was replaced by the received file, not written through.
  EXPECT_FALSE(fs::is_symlink(top / "flink"));
  EXPECT_EQ(read_text_file(top / "flink"), "evil");
}

// A fifty-eighth re-attack (I58-7): recv -r whose connection was lost mid-tree, with no retry to
// take over, named the tree alone: the files not fetched had no line and no --json object, where
// send -r names each. Each file of the listing not yet reported is named "not fetched".
TEST_F(HostileServer, ATreeCutWithNoRetryLeftNamesEveryFileNotFetched) {
  using proto::EntryType;
  std::vector<proto::ListEntry> entries;
  for (int i = 0; i < 8; ++i) entries.push_back({EntryType::file, "f" + std::to_string(i), 2, 0644, 0});
  std::atomic<int> gets{0};
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::list) return FakeServer::send_listing(c, "tree", entries);
    if (m.op != proto::Op::get) return;
    if (++gets == 3) throw std::runtime_error("cut");
    FakeServer::send_file(c, "ok");
  });
  auto r =
      run({"recv", "-r", "-q", "--json", "--retries", "0", "127.0.0.1:tree", (ws.local / "dest").string()},
          fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  for (int i = 0; i < 8; ++i)
    EXPECT_NE(r.out.find("\"file\":\"tree/f" + std::to_string(i) + "\""), std::string::npos) << i << "\n"
                                                                                             << r.out;
  EXPECT_EQ(nonempty_lines(r.out).size(), 9u) << r.out;  // each file once, and the tree
}

// A sixtieth re-attack (O60-4): recv -r cut mid-tree whose retry found the tree gone (or now a
// file) named the tree alone: the files the first session listed and never fetched had no line
// and no --json object, where a retry that cannot connect names each (I58-7). Each is named.
TEST_F(HostileServer, ATreeGoneWhenTheRetryListsItNamesEveryFileNotFetched) {
  using proto::EntryType;
  std::vector<proto::ListEntry> entries;
  for (int i = 0; i < 8; ++i) entries.push_back({EntryType::file, "f" + std::to_string(i), 2, 0644, 0});
  for (const auto status : {proto::Status::not_found, proto::Status::not_directory}) {
    SCOPED_TRACE(int(status));
    std::atomic<int> gets{0}, lists{0};
    FakeServer fake([&](net::Conn& c, const proto::Message& m) {
      if (m.op == proto::Op::list) {
        if (++lists == 1) return FakeServer::send_listing(c, "tree", entries);
        return c.send_message(response(status, status == proto::Status::not_found
                                                   ? "tree: no such file or directory"
                                                   : "tree: not a directory"));
      }
      if (m.op != proto::Op::get) return;
      if (++gets == 3) throw std::runtime_error("cut");
      FakeServer::send_file(c, "ok");
    });
    const fs::path dest = ws.local / ("dest" + std::to_string(int(status)));
    auto r =
        run({"recv", "-r", "-q", "--json", "--retries", "1", "127.0.0.1:tree", dest.string()}, fake.port());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_EQ(lists, 2) << r.describe();
    for (int i = 0; i < 8; ++i)
      EXPECT_NE(r.out.find("\"file\":\"tree/f" + std::to_string(i) + "\""), std::string::npos) << i << "\n"
                                                                                               << r.out;
    EXPECT_EQ(nonempty_lines(r.out).size(), 9u) << r.out;  // each file once, and the tree
  }
}

// A sixty-first re-attack (S61-1): a file the first session listed and the retry's listing no
// longer held (gone from the server meanwhile) had no line, no --json object, exit 0. Each is
// named "not fetched", and the command fails.
TEST_F(HostileServer, AFileGoneFromTheRetrysListingIsNamedNotFetched) {
  using proto::EntryType;
  std::vector<proto::ListEntry> entries;
  for (int i = 0; i < 8; ++i) entries.push_back({EntryType::file, "f" + std::to_string(i), 2, 0644, 0});
  std::vector<proto::ListEntry> later = entries;
  later.erase(later.begin() + 5);  // f5 is gone when the retry lists the tree
  std::atomic<int> gets{0}, lists{0};
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::list) return FakeServer::send_listing(c, "tree", ++lists == 1 ? entries : later);
    if (m.op != proto::Op::get) return;
    if (++gets == 3) throw std::runtime_error("cut");
    FakeServer::send_file(c, "ok");
  });
  const fs::path dest = ws.local / "dest";
  auto r =
      run({"recv", "-r", "-q", "--json", "--retries", "1", "127.0.0.1:tree", dest.string()}, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(lists, 2) << r.describe();
  for (int i = 0; i < 8; ++i)
    EXPECT_NE(r.out.find("\"file\":\"tree/f" + std::to_string(i) + "\""), std::string::npos) << i << "\n"
                                                                                             << r.out;
  EXPECT_NE(r.out.find("tree/f5: gone from the server before the retry listed the tree again"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(dest / "f5"));
}

// recv -r meets a local symbolic link where a directory of the tree goes: that subtree alone is
// skipped with one line naming it, every other file is fetched, and the command exits 1 at the end.
TEST_F(HostileServer, ALocalSymlinkSkipsItsSubtreeAndTheRestArrives) {
  using proto::EntryType;
  fs::path top = ws.local / "dest" / "tree";
  fs::create_directories(top);
  fs::create_directories(outside.path() / "dir");
  fs::create_directory_symlink(outside.path() / "dir", top / "dlink");
  FakeServer fake(FakeServer::serves_tree({{EntryType::dir, "a", 0, 0755, 0},
                                           {EntryType::file, "a/f1", 2, 0644, 0},
                                           {EntryType::dir, "dlink", 0, 0755, 0},
                                           {EntryType::file, "dlink/evil", 2, 0644, 0},
                                           {EntryType::dir, "dlink/sub", 0, 0755, 0},
                                           {EntryType::file, "dlink/sub/x", 2, 0644, 0},
                                           {EntryType::file, "f2", 2, 0644, 0},
                                           {EntryType::dir, "dlinked", 0, 0755, 0},
                                           {EntryType::file, "dlinked/f3", 2, 0644, 0}},
                                          "ok"));
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "dest").string(), "-q"}, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(read_text_file(top / "a" / "f1"), "ok");
  EXPECT_EQ(read_text_file(top / "f2"), "ok");
  EXPECT_EQ(read_text_file(top / "dlinked" / "f3"), "ok");  // a name that starts like the skipped one
  EXPECT_TRUE(fs::is_empty(outside.path() / "dir"));
  EXPECT_TRUE(fs::is_symlink(top / "dlink"));
  EXPECT_EQ(fake.seen_text().find("dlink/"), std::string::npos) << fake.seen_text();
  EXPECT_NE(r.err.find("dlink: is a symbolic link (not followed); skipping tree/dlink and all below it"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line for the subtree:\n" << r.err;
}

// A name with a control byte is skipped alone with one escaped line (one bad name must not keep
// the rest of a tree from arriving); a directory so named is skipped with all below it.
TEST_F(HostileServer, NamesWithControlBytesAreSkippedAlone) {
  using proto::EntryType;
  FakeServer fake(FakeServer::serves_tree({{EntryType::file, "a\x1b]0;pwned\x07", 4, 0644, 0},
                                           {EntryType::dir, "d\x01", 0, 0755, 0},
                                           {EntryType::file, "d\x01/inner", 4, 0644, 0},
                                           {EntryType::file, "good", 4, 0644, 0}},
                                          "evil"));
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "dest").string(), "-q"}, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("tree/a\\x1b]0;pwned\\x07: a control byte in the name; skipped\n"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("tree/d\\x01: a control byte in the name; skipped with all below it\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos);
  EXPECT_EQ(r.err.find('\x01'), std::string::npos);
  EXPECT_EQ(fake.seen_text(), "list tree\nget tree/good\n");
  EXPECT_EQ(read_text_file(ws.local / "dest" / "good"), "evil");
  size_t n = 0;
  for (auto it = fs::recursive_directory_iterator(ws.local / "dest");
       it != fs::recursive_directory_iterator(); ++it)
    ++n;
  EXPECT_EQ(n, 1u) << "only the good file";
}

// A name longer than NAME_MAX, which only a hostile or foreign server lists, was fetched whole and
// then failed at the rename (a twenty-eighth re-attack's note). Skipped before its get.
TEST_F(HostileServer, NamesLongerThanAFileNameAreSkippedBeforeTheirGet) {
  using proto::EntryType;
  const std::string long_name(300, 'n');
  FakeServer fake(FakeServer::serves_tree({{EntryType::file, long_name, 4, 0644, 0},
                                           {EntryType::dir, "d" + long_name, 0, 0755, 0},
                                           {EntryType::file, "d" + long_name + "/inner", 4, 0644, 0},
                                           {EntryType::file, "good", 4, 0644, 0}},
                                          "data"));
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "dest").string(), "-q"}, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("tree/" + long_name + ": a name longer than 255 bytes; skipped\n"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(": a name longer than 255 bytes; skipped with all below it\n"), std::string::npos)
      << r.err;
  EXPECT_EQ(fake.seen_text(), "list tree\nget tree/good\n");
  EXPECT_EQ(read_text_file(ws.local / "dest" / "good"), "data");
}

// Protocol 5 (issue 24, F1 and F2): what the server could not list (a directory it cannot read,
// names with CR or LF that no path on the wire may hold) is named, one line each, the rest of the
// tree arrives, and the command exits 1; before protocol 5 a client got less with exit status 0
// (names left out) or nothing at all (an unreadable directory refused the whole listing).
TEST_F(HostileServer, WhatTheServerCouldNotListIsNamedAndTheRestArrives) {
  using proto::EntryType;
  FakeServer fake(FakeServer::serves_tree({{EntryType::left_out, ".", 2, 0, 0},
                                           {EntryType::unreadable_dir, "locked", 0, 0700, 0},
                                           {EntryType::dir, "sub", 0, 0755, 0},
                                           {EntryType::left_out, "sub", 1, 0, 0},
                                           {EntryType::file, "sub/good", 4, 0644, 0}},
                                          "good"));
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "dest").string(), "-q"}, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  const std::string why =
      " left out by the server (a name with a CR or LF, or whose path would be longer than 4096 bytes, "
      "cannot be sent; ";
  EXPECT_NE(r.err.find("tree: 2 names" + why), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tree/sub: 1 name" + why), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tree/locked: the server cannot read this directory; skipped with all below it\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 3) << r.err;
  EXPECT_EQ(fake.seen_text(), "list tree\nget tree/sub/good\n");
  EXPECT_EQ(read_text_file(ws.local / "dest" / "sub" / "good"), "good");
  EXPECT_FALSE(fs::exists(ws.local / "dest" / "locked")) << "nothing is made for what was not listed";
}

// The new kinds obey the listing's rules: a count names a directory listed before it, once; below
// an unreadable directory nothing may follow. Anything else is a protocol error and nothing is
// fetched.
TEST_F(HostileServer, ListingsThatMisuseTheNewKindsAreRefused) {
  using proto::EntryType;
  const std::vector<std::vector<proto::ListEntry>> cases = {
      {{EntryType::file, "f", 1, 0644, 0}, {EntryType::left_out, "f", 1, 0, 0}},
      {{EntryType::left_out, "nodir", 1, 0, 0}},
      {{EntryType::left_out, ".", 1, 0, 0}, {EntryType::left_out, ".", 1, 0, 0}},
      {{EntryType::dir, "d", 0, 0755, 0},
       {EntryType::left_out, "d", 1, 0, 0},
       {EntryType::left_out, "d", 2, 0, 0}},
      {{EntryType::unreadable_dir, "d", 0, 0700, 0}, {EntryType::file, "d/x", 1, 0644, 0}},
      {{EntryType::left_out, "d", 1, 0, 0}, {EntryType::dir, "d", 0, 0755, 0}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    FakeServer fake(FakeServer::serves_tree(cases[i], "x"));
    auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / ("dest" + std::to_string(i))).string(), "-q"},
                 fake.port());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
    EXPECT_NE(r.err.find("protocol error"), std::string::npos) << r.err;
    EXPECT_EQ(fake.seen_text(), "list tree\n");
  }
}

// A fiftieth re-attack (C50-3): a listing that went back and forth between two deep branches made
// the client open the whole branch again for each entry (33 s of CPU for 6,000 entries that take
// 1.3 s in order). The listing is depth first (PROTOCOL.md 3.7): an entry of a directory whose
// contents already ended is a protocol error, and nothing is fetched or made.
TEST_F(HostileServer, AListingThatReturnsToADirectoryItLeftIsRefused) {
  using proto::EntryType;
  const std::vector<std::vector<proto::ListEntry>> cases = {
      {{EntryType::dir, "a", 0, 0755, 0},
       {EntryType::dir, "b", 0, 0755, 0},
       {EntryType::file, "a/x", 1, 0644, 0}},
      {{EntryType::dir, "a", 0, 0755, 0},
       {EntryType::dir, "a/d", 0, 0755, 0},
       {EntryType::file, "f", 1, 0644, 0},
       {EntryType::file, "a/d/x", 1, 0644, 0}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    FakeServer fake(FakeServer::serves_tree(cases[i], "x"));
    const fs::path dest = ws.local / ("back" + std::to_string(i));
    auto r = run({"recv", "-r", "127.0.0.1:tree", dest.string(), "-q"}, fake.port());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find("after its directory's contents ended)"), std::string::npos) << r.err;
    EXPECT_EQ(fake.seen_text(), "list tree\n");
    EXPECT_FALSE(fs::exists(dest));
  }
  // In order, with a directory's contents closed and a sibling's after them: fetched.
  FakeServer fake(FakeServer::serves_tree({{EntryType::dir, "a", 0, 0755, 0},
                                           {EntryType::dir, "a/d", 0, 0755, 0},
                                           {EntryType::file, "a/d/x", 1, 0644, 0},
                                           {EntryType::file, "a/y", 1, 0644, 0},
                                           {EntryType::dir, "b", 0, 0755, 0},
                                           {EntryType::file, "b/z", 1, 0644, 0},
                                           {EntryType::file, "c", 1, 0644, 0}},
                                          "x"));
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "inorder").string(), "-q"}, fake.port());
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  for (const char* f : {"a/d/x", "a/y", "b/z", "c"})
    EXPECT_EQ(read_text_file(ws.local / "inorder" / f), "x") << f;
}

// ---- A5: every peer string printable ----------------------------------------------------------

TEST(Printable, EscapesC0DelC1AndInvalidUtf8) {
  EXPECT_EQ(net::printable("plain name.txt"), "plain name.txt");
  EXPECT_EQ(net::printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
  EXPECT_EQ(net::printable("a\nb\x1b[2J\x7f\\"), "a\\x0ab\\x1b[2J\\x7f\\x5c");
  EXPECT_EQ(net::printable("\xc2\x9b"
                           "31m"),
            "\\xc2\\x9b31m");  // UTF-8-encoded CSI
  EXPECT_EQ(net::printable("\x9b"
                           "31m"),
            "\\x9b31m");                                // raw C1 CSI
  EXPECT_EQ(net::printable("\xc2\x85"), "\\xc2\\x85");  // NEL
  EXPECT_EQ(net::printable("\xc2\xa1"), "\xc2\xa1");    // U+00A1 is printable
  EXPECT_EQ(net::printable("\xc2\xa0"), "\\xc2\\xa0");  // U+00A0 looks like a space: escaped
  EXPECT_EQ(net::printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(net::printable("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(net::printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // surrogate
  EXPECT_EQ(net::printable("\xe2\x82"), "\\xe2\\x82");           // cut short
}

TEST_F(HostileServer, RefusalTextsReachTheTerminalPrintable) {
  using proto::EntryType;
  const std::string nasty =
      "no \x1b]0;pwned\x07\x1b[2J \xc2\x9b"
      "31m \x9b"
      "0m\r\nforged line";
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::list)
      FakeServer::send_listing(c, "tree",
                               {{EntryType::symlink,
                                 "l\xc2\x9b"
                                 "2J",
                                 0, 0777, 0},
                                {EntryType::file, "f", 1, 0644, 0}});
    else
      c.send_message(response(proto::Status::refused, nasty));
  });
  for (std::vector<std::string> args :
       {std::vector<std::string>{"recv", "127.0.0.1:f", (ws.local / "f").string()},
        {"recv", "-r", "127.0.0.1:tree", (ws.local / "t").string()}}) {
    auto r = run(args, fake.port());
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    for (char bad : {'\x1b', '\x07', '\r', '\x9b'}) EXPECT_EQ(r.err.find(bad), std::string::npos) << int(bad);
    EXPECT_EQ(r.err.find("\xc2\x9b"), std::string::npos);
    // First run: the identity it created, "Permanently added" and the refusal; second: the skip
    // note and the refusal.
    EXPECT_EQ(nonempty_lines(r.err).size(), args[1] != "-r" ? 3u : 2u) << r.err;
    EXPECT_EQ(r.err.find("created identity") != std::string::npos, args[1] != "-r") << r.err;
    EXPECT_EQ(r.err.find("Permanently added") != std::string::npos, args[1] != "-r") << r.err;
  }
}

// A thirty-second re-attack (B-N1): recv --streams reads each part with a get of its own, and a
// file renamed over the source meanwhile arrived as a splice of both versions, "verified" (each
// range's checksum verifies what was read, not that all were read from one file). The server
// names the version each part was read from; parts from two versions fail the file, and nothing
// is kept under its name.
TEST_F(HostileServer, PartsReadFromTwoVersionsOfAFileAreRefused) {
  constexpr uint64_t kSize = uint64_t(64) << 20;
  for (const bool changed : {false, true}) {
    SCOPED_TRACE(changed ? "two versions" : "one version");
    FakeServer fake(
        [&](net::Conn& c, const proto::Message& m) {
          proto::Message ok = response(proto::Status::ok);
          ok.size = kSize;
          ok.mode = 0644;
          ok.mtime = 1000000000;
          if (m.op == proto::Op::stat) return c.send_message(ok);
          if (m.op != proto::Op::get || !(m.flags & proto::kFlagRange))
            return c.send_message(response(proto::Status::refused, "no"));
          ok.text = changed && m.part % 2 ? "version-b" : "version-a";
          c.send_message(ok);
          net::send_stream(c, -1, m.length, nullptr, net::StreamOptions{0, false, true, m.offset});
          c.recv_message("the result");
        },
        true);
    const fs::path out = ws.local / (changed ? "two.bin" : "one.bin");
    auto r = run({"recv", "--streams", "4", "-q", "--retries", "0", "-v", "127.0.0.1:f", out.string()},
                 fake.port());
    ASSERT_NE(r.err.find("4 connections open"), std::string::npos) << "no parallel parts: " << r.describe();
    if (!changed) {
      EXPECT_EQ(r.exit_code, 0) << r.describe();
      EXPECT_EQ(fs::file_size(out), kSize);
      continue;
    }
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find("file changed during the transfer"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_TRUE(temp_debris(ws.local).empty());
  }
}

// A forty-seventh re-attack (C47-3): recv --resume onto a shorter destination copies it into its
// partial file first; a connection lost during that copy's keep-alive, or at the get right after
// it, kept the copy (237 MB of a 300 MB destination's own bytes) as a hidden partial file "kept
// for --resume". It is removed: the destination is as it was.
TEST_F(HostileServer, AConnectionLostAfterTheDestinationsCopyKeepsNoCopy) {
  const fs::path dest = ws.local / "big";
  write_random_file(dest, 48 << 20, 7);
  const std::string before = sha256_file(dest);
  int stats = 0;
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::stat && stats++ == 0) {
      proto::Message ok = response(proto::Status::ok);
      ok.size = (48 << 20) + 1000;
      c.send_message(ok);
      return;
    }
    throw std::runtime_error("cut");  // the keep-alive's stat, or the get: the connection closes
  });
  auto r = run({"recv", "--resume", "--retries", "0", "-q", "127.0.0.1:big", dest.string()}, fake.port());
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(fs::exists(ws.local / ".big.aesxfer-partial")) << r.err;
  EXPECT_EQ(sha256_file(dest), before);
  EXPECT_EQ(r.err.find("kept for --resume"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nothing kept, the destination is as it was"), std::string::npos) << r.err;
}

// A fifty-eighth re-attack (H58-5): a resumed get withdrawn after its data had begun over the
// destination's copy said "(copying the destination into its partial file; ...)", which is where
// it did not fail. The copy is removed, the destination is as it was, and the line says so.
TEST_F(HostileServer, AResumedGetWithdrawnAfterItsDataBeganDoesNotSayItWasCopying) {
  const fs::path dest = ws.local / "big.bin";
  write_random_file(dest, 512 << 10, 8);
  const std::string before = sha256_file(dest);
  constexpr uint64_t kTotal = (1 << 20) + 1000;
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    proto::Message ok = response(proto::Status::ok);
    ok.size = kTotal;
    ok.mode = 0644;
    ok.mtime = 1000000000;
    if (m.op == proto::Op::stat) return c.send_message(ok);
    if (m.op != proto::Op::get) return;
    ok.digest = m.digest;  // the destination's prefix agreed
    ok.offset = m.offset;
    c.send_message(ok);
    std::memset(c.payload_buffer(), 'z', 1000);
    c.send_record(proto::RecordType::data, 0, 1000);
    proto::EndRecord end;
    end.length = m.offset + 1000;  // the stream's, counted from the file's start
    end.withdrawn = proto::Withdrawal::changed;
    c.send_record(proto::RecordType::end, proto::kFlagFinal, proto::encode_end(c.payload_buffer(), end));
  });
  auto r = run({"recv", "--resume", "--retries", "0", "-q", "127.0.0.1:big.bin", dest.string()}, fake.port());
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("the sender withdrew it"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("copying the destination"), std::string::npos) << r.err;
  EXPECT_NE(
      r.err.find("(nothing kept: the copy of the destination it resumed from is removed, the destination "
                 "is as it was)"),
      std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(ws.local / ".big.bin.aesxfer-partial"));
  EXPECT_EQ(sha256_file(dest), before);
}

// A forty-eighth re-attack: a server that agreed to the destination's prefix (echoed its digest)
// and closed before its data left that copy as a partial file "kept for --resume" (C48-2); one
// that answered "from 0" and closed said so of the partial file it had emptied (C48-3). Neither
// keeps anything or says it does; a prefix an earlier partial file held stays.
TEST_F(HostileServer, AConnectionLostBeforeTheDataKeepsNoCopyAndSaysNoneIsKept) {
  const fs::path dest = ws.local / "f";
  const fs::path partial = ws.local / ".f.aesxfer-partial";
  constexpr uint64_t kTotal = (4 << 20) + 1000;
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::stat) {
      proto::Message ok = response(proto::Status::ok);
      ok.size = kTotal;
      c.send_message(ok);
      return;
    }
    proto::Message ok = response(proto::Status::ok);  // the get: agreed (or from 0), then cut
    ok.size = kTotal;
    ok.mode = 0644;
    ok.mtime = 1000000000;
    if (!m.digest.empty() && m.path != "fresh") {
      ok.digest = m.digest;
      ok.offset = m.offset;
    }
    c.send_message(ok);
    throw std::runtime_error("cut");
  });
  struct Case {
    const char* name;
    const char* remote;
    bool destination, earlier_partial, kept;
  };
  for (const Case& tc : {Case{"the destination's copy", "f", true, false, false},
                         Case{"an earlier partial file, from 0", "fresh", false, true, false},
                         Case{"an earlier partial file, agreed", "f", false, true, true}}) {
    SCOPED_TRACE(tc.name);
    fs::remove(dest);
    fs::remove(partial);
    if (tc.destination) write_random_file(dest, 4 << 20, 3);
    if (tc.earlier_partial) {
      write_random_file(partial, 1 << 20, 4);
      fs::permissions(partial, fs::perms(0600));
    }
    auto r = run(
        {"recv", "--resume", "--retries", "0", "-q", std::string("127.0.0.1:") + tc.remote, dest.string()},
        fake.port());
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_EQ(fs::exists(partial), tc.kept) << r.err;
    EXPECT_EQ(r.err.find("kept for --resume") != std::string::npos, tc.kept) << r.err;
    if (tc.kept) {
      EXPECT_EQ(fs::file_size(partial), 1u << 20);
    }
    if (tc.destination) {
      EXPECT_EQ(fs::file_size(dest), 4u << 20);
    }
  }
}

// A forty-ninth re-attack: the destination's copy was still kept "for --resume" when the server
// echoed a digest that was not the client's ("resume point not agreed", B49-3), or announced more
// than the disk holds after the copy (a file that grew: the room refusal, B49-2). Neither keeps it.
TEST_F(HostileServer, ABadEchoOrARoomRefusalKeepsNoCopyOfTheDestination) {
  const fs::path dest = ws.local / "f";
  const fs::path partial = ws.local / ".f.aesxfer-partial";
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    proto::Message ok = response(proto::Status::ok);
    ok.size = (4 << 20) + 1000;
    if (m.op == proto::Op::stat) return c.send_message(ok);
    ok.mode = 0644;
    ok.mtime = 1000000000;
    ok.digest = m.digest;
    ok.offset = m.offset;
    if (m.path == "bad-echo")
      ok.digest[0] ^= 1;
    else if (m.path == "huge")
      ok.size = uint64_t(1) << 50;  // a petabyte: no disk holds it
    c.send_message(ok);
    if (m.path == "withdrawn") {  // the file changed as the server read it: no byte past the prefix
      proto::EndRecord end;
      end.length = m.offset;
      end.withdrawn = proto::Withdrawal::changed;
      c.send_record(proto::RecordType::end, proto::kFlagFinal, proto::encode_end(c.payload_buffer(), end));
    }
    if (!ok.tagged) c.recv_message("the result");
  });
  // A withdrawn stream too (B49-1: an honest server's growing log did it).
  for (const char* remote : {"bad-echo", "huge", "withdrawn"}) {
    SCOPED_TRACE(remote);
    write_random_file(dest, 4 << 20, 5);
    auto r =
        run({"recv", "--resume", "--retries", "0", "-q", std::string("127.0.0.1:") + remote, dest.string()},
            fake.port());
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_FALSE(fs::exists(partial)) << r.err;
    EXPECT_EQ(r.err.find("kept for --resume"), std::string::npos) << r.err;
    EXPECT_EQ(fs::file_size(dest), 4u << 20);
    if (std::string(remote) == "withdrawn") {
      EXPECT_NE(r.err.find("withdrew"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("(0 bytes sent)"), std::string::npos) << r.err;  // the prefix was not sent
    }
  }
}

// A fifty-first re-attack (A51-1): recv --resume offered the destination (the server's size) as the
// prefix, hashed it, and when the server's file had grown copied it into the partial file only
// after the server's answer: a local writer that changed
// the destination in between got a file of its changed start and the server's end, "verified" (the
// checksum was over the bytes first read). A copy of a destination that changed since its scan
// fails, and nothing of it is kept.
TEST_F(HostileServer, ADestinationChangedBetweenItsScanAndItsCopyIsNotResumedFrom) {
  const fs::path dest = ws.local / "f";
  std::string full(3 << 20, 'S');
  for (size_t i = 0; i < full.size(); i += 997) full[i] = char('a' + i % 26);
  write_text_file(dest, full.substr(0, 2 << 20));  // the first 2 MiB, here already
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    proto::Message ok = response(proto::Status::ok);
    ok.size = 2 << 20;  // as the destination: offered whole, hashed, and not copied yet
    if (m.op == proto::Op::stat) return c.send_message(ok);
    ok.size = full.size();  // then it grew: the destination is copied after the answer
    // Between the client's scan and its copy: a local writer changes the destination's start.
    const int w = ::open(dest.c_str(), O_WRONLY);
    ASSERT_GE(w, 0);
    ASSERT_EQ(::pwrite(w, "LOCALLY CHANGED", 15, 0), 15);
    ::close(w);
    ok.mode = 0644;
    ok.mtime = 1000000000;
    ok.digest = m.digest;
    ok.offset = m.offset;
    c.send_message(ok);
    const int fd = ::memfd_create("fake", MFD_CLOEXEC);
    ASSERT_EQ(::write(fd, full.data(), full.size()), ssize_t(full.size()));
    net::send_stream(c, fd, full.size(), nullptr, net::StreamOptions{m.offset, false});
    ::close(fd);
    c.recv_message("the result");
  });
  auto r = run({"recv", "--resume", "--retries", "0", "-q", "127.0.0.1:f", dest.string()}, fake.port());
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("changed while its prefix was read"), std::string::npos) << r.err << fake.seen_text();
  EXPECT_EQ(read_text_file(dest).substr(0, 15), "LOCALLY CHANGED");  // the writer's, as it left it
  EXPECT_EQ(fs::file_size(dest), 2u << 20);
  EXPECT_FALSE(fs::exists(ws.local / ".f.aesxfer-partial"));
}

// A forty-first re-attack (B-F4): recv --resume offered an existing destination of the server's
// size as its prefix, and with --checksum none a server had only to echo the client's own digest
// for the file to be kept "up to date (size and checksum match)" and, with -p, to take the
// server's mode: 0666 on the user's private file, which the server never knew. Without a
// checksum (the end record's, over the whole file, is the proof) the destination is not offered:
// the file comes whole, for one file and for each of a tree. With a checksum it still is.
unsigned mode_of(const fs::path& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 ? st.st_mode & 07777 : 0u;
}

TEST_F(HostileServer, WithoutAChecksumTheDestinationIsNotOfferedAsAResumePrefix) {
  using proto::EntryType;
  const std::string mine = "my private data 123\n", theirs = "the server's bytes!\n";
  ASSERT_EQ(mine.size(), theirs.size());
  FakeServer fake([&](net::Conn& c, const proto::Message& m) {
    if (m.op == proto::Op::stat) {
      proto::Message ok = response(proto::Status::ok);
      ok.size = theirs.size();
      ok.mode = 0666;
      c.send_message(ok);
    } else if (m.op == proto::Op::list) {
      FakeServer::send_listing(c, "tree", {{EntryType::file, "a", theirs.size(), 0666, 0}});
    } else if (m.op == proto::Op::get && !m.digest.empty()) {  // the echo of a server that knows nothing
      proto::Message ok = response(proto::Status::ok);
      ok.size = m.offset;
      ok.mode = 0666;
      ok.mtime = 1000000000;
      ok.digest = m.digest;
      ok.offset = m.offset;
      c.send_message(ok);
      std::string junk(m.offset, 'j');
      const int fd = ::memfd_create("echo", MFD_CLOEXEC);
      ASSERT_EQ(::write(fd, junk.data(), junk.size()), ssize_t(junk.size()));
      net::StreamOptions so;
      so.offset = m.offset;
      net::send_stream(c, fd, m.offset, nullptr, so);
      ::close(fd);
      if (!ok.tagged) c.recv_message("the result");
    } else if (m.op == proto::Op::get) {
      FakeServer::send_file(c, theirs, 0666);
    }
  });
  const fs::path one = ws.local / "priv", tree = ws.local / "dl" / "tree" / "a";
  fs::create_directories(tree.parent_path());
  for (bool checksum : {false, true}) {
    SCOPED_TRACE(checksum ? "xxh128" : "none");
    for (const fs::path& p : {one, tree}) {
      write_text_file(p, mine);
      ::chmod(p.c_str(), 0600);
    }
    const std::vector<std::string> sum =
        checksum ? std::vector<std::string>{} : std::vector<std::string>{"--checksum", "none"};
    std::vector<std::string> a1{"recv", "--resume", "-p", "-q", "127.0.0.1:whatever", one.string()};
    std::vector<std::string> a2{
        "recv", "-r", "--resume", "-p", "-q", "127.0.0.1:tree", (ws.local / "dl").string()};
    a1.insert(a1.end(), sum.begin(), sum.end());
    a2.insert(a2.end(), sum.begin(), sum.end());
    const auto before = fake.seen().size();
    const ProcResult r1 = run(a1, fake.port());
    const ProcResult r2 = run(a2, fake.port());
    const auto seen = fake.seen();
    const std::string asked = [&] {
      std::string t;
      for (size_t i = before; i < seen.size(); ++i) t += seen[i] + "\n";
      return t;
    }();
    if (!checksum) {
      // Not offered: fetched whole, the server's bytes and mode; the private bytes never kept
      // under a mode others may read.
      EXPECT_EQ(r1.exit_code, 0) << r1.describe();
      EXPECT_EQ(r2.exit_code, 0) << r2.describe();
      EXPECT_EQ(asked.find("digest"), std::string::npos) << asked;
      for (const fs::path& p : {one, tree}) {
        EXPECT_EQ(read_text_file(p), theirs) << p;
        EXPECT_EQ(mode_of(p), 0666u) << p;
      }
    } else {
      // Offered; the echo cannot pass the end record's checksum, which the server cannot make
      // without our bytes: an integrity failure, the file left as it was.
      EXPECT_NE(asked.find("get whatever offset=20 digest"), std::string::npos) << asked;
      EXPECT_NE(asked.find("get tree/a offset=20 digest"), std::string::npos) << asked;
      EXPECT_EQ(r1.exit_code, 1) << r1.describe();
      EXPECT_EQ(r2.exit_code, 1) << r2.describe();
      for (const fs::path& p : {one, tree}) {
        EXPECT_EQ(read_text_file(p), mine) << p;
        EXPECT_EQ(mode_of(p), 0600u) << p;
      }
    }
  }
}

}  // namespace
}  // namespace aesxfer::test
