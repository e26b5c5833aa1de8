// Issue 16: pipelined per-file exchanges (docs/PROTOCOL.md, "Pipelining"). The encoding of the
// pipelined request and its tagged answers; trees of many small files both ways, every byte and
// mode checked; a refusal in the middle of a window that fails that one file alone; a hostile
// client whose refused put still sends its data; a fake server whose answers come out of order.
#include "client/pipeline.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "client/client.h"
#include "crypto/suite.h"
#include "proto/messages.h"
#include "server/requests.h"
#include "tests/fake_server.h"
#include "tests/hand_session.h"
#include "tests/harness.h"
#include "tests/server_fixture.h"
#include "tests/test_util.h"

namespace aesxfer::test {
namespace {

using proto::Message;
using proto::MsgType;
using proto::Op;
using proto::Status;

std::vector<uint8_t> enc(const Message& m) {
  std::vector<uint8_t> b;
  proto::encode(m, b);
  return b;
}

Message ahead_request(Op op, const std::string& path, uint64_t size, uint32_t tag) {
  Message m = make_request(op, path, "", size);
  m.flags = proto::kFlagAhead;
  m.tag = tag;
  m.tagged = true;
  return m;
}

// The lines of a client's stderr that report something wrong (not the first-contact notice).
std::vector<std::string> error_lines(const std::string& err) {
  std::vector<std::string> v;
  for (auto& l : nonempty_lines(err))
    if (l.find("Permanently added") == std::string::npos) v.push_back(l);
  return v;
}

// ---- encoding ---------------------------------------------------------------------------------

TEST(PipelineMessages, RequestCarriesItsTagAfterTheFlags) {
  Message m = ahead_request(Op::put, "f", 3, 0x01020304);
  m.text = "f";
  m.mode = 0644;
  // 02 01 | 0001 66 | size 3 | mode 0644 | mtime 0 | offset 0 | 0001 66 | flags 08 | tag
  auto b = enc(m);
  EXPECT_EQ(to_hex(b.data(), b.size()), std::string("02") + "01" + "000166" + "0000000000000003" +
                                            "000001a4" + "0000000000000000" + "0000000000000000" + "000166" +
                                            "08" + "01020304");
  auto d = proto::decode(enc(m));
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->tagged);
  EXPECT_EQ(d->tag, 0x01020304u);
  EXPECT_EQ(d->flags, proto::kFlagAhead);
  // Without the flag there is no tag (the version 2 layout, byte for byte).
  Message plain = make_request(Op::put, "f", "f", 3);
  EXPECT_EQ(enc(plain).size(), enc(m).size() - 4);
  EXPECT_FALSE(proto::decode(enc(plain))->tagged);
}

TEST(PipelineMessages, AnswersEndWithTheOptionalTag) {
  Message r;
  r.type = MsgType::result;
  r.status = Status::integrity;
  EXPECT_EQ(to_hex(enc(r).data(), enc(r).size()), "04070000");
  r.tagged = true;
  r.tag = 7;
  EXPECT_EQ(to_hex(enc(r).data(), enc(r).size()), "0407000000000007");
  auto d = proto::decode(enc(r));
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->tagged);
  EXPECT_EQ(d->tag, 7u);

  Message resp;
  resp.type = MsgType::response;
  resp.status = Status::bad_path;
  resp.text = "x";
  resp.tagged = true;
  resp.tag = 0xfffffffe;
  auto b = enc(resp);
  EXPECT_EQ(to_hex(b.data(), b.size()), std::string("0305") + "0000000000000000" + "000001a4" +
                                            "0000000000000000" + "000178" + "00" + "fffffffe");
  d = proto::decode(b);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->tag, 0xfffffffeu);
  EXPECT_EQ(d->text, "x");
  // One to three trailing bytes are no tag: refused.
  for (size_t extra = 1; extra < 4; ++extra) {
    auto t = enc(r);
    t.resize(t.size() - 4 + extra);
    EXPECT_FALSE(proto::decode(t)) << extra;
    t = b;
    t.resize(b.size() - 4 + extra);
    EXPECT_FALSE(proto::decode(t)) << extra;
  }
  // Five is one too many.
  auto t = enc(r);
  t.push_back(0);
  EXPECT_FALSE(proto::decode(t));
}

TEST(PipelineMessages, DecoderBoundsThePipelinedRequest) {
  // Only put, get, mkdir, stat and (protocol 4) probe; not with resume or range; a put at most
  // kMaxAheadSize.
  for (Op op : {Op::commit, Op::list}) EXPECT_FALSE(proto::decode(enc(ahead_request(op, "f", 0, 1))));
  for (Op op : {Op::put, Op::get, Op::mkdir, Op::stat, Op::probe})
    EXPECT_TRUE(proto::decode(enc(ahead_request(op, "f", 0, 1))));
  EXPECT_TRUE(proto::decode(enc(ahead_request(Op::put, "f", proto::kMaxAheadSize, 1))));
  EXPECT_FALSE(proto::decode(enc(ahead_request(Op::put, "f", proto::kMaxAheadSize + 1, 1))));
  Message m = ahead_request(Op::put, "f", 0, 1);
  m.flags |= proto::kFlagResume;
  EXPECT_FALSE(proto::decode(enc(m)));
  // A get may be resumed and pipelined (protocol 4): its digest follows the tag.
  m = ahead_request(Op::get, "f", 0, 1);
  m.flags |= proto::kFlagResume;
  m.offset = 5;
  m.digest = std::string(proto::kPrefixMacLen, 'd');
  auto g = proto::decode(enc(m));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->tag, 1u);
  EXPECT_EQ(g->digest, m.digest);
  m = ahead_request(Op::put, "f", 10, 1);
  m.flags |= proto::kFlagRange;
  m.nparts = 2;
  m.length = 5;
  EXPECT_FALSE(proto::decode(enc(m)));
  // A truncated tag.
  auto b = enc(ahead_request(Op::get, "f", 0, 1));
  b.pop_back();
  EXPECT_FALSE(proto::decode(b));
}

// ---- end to end -------------------------------------------------------------------------------

class PipelineE2E : public ServerTest {
 protected:
  // dirs x per_dir files of `size` bytes each (a few of other sizes), in `top`, with varied modes.
  std::map<std::string, std::pair<std::string, mode_t>> make_tree(const fs::path& top, int dirs, int per_dir,
                                                                  uint64_t size) {
    std::map<std::string, std::pair<std::string, mode_t>> files;
    const mode_t modes[] = {0644, 0600, 0755, 0640, 0444};
    for (int d = 0; d < dirs; ++d) {
      fs::path dir = top / ("d" + std::to_string(d));
      fs::create_directories(dir);
      for (int i = 0; i < per_dir; ++i) {
        std::string rel = "d" + std::to_string(d) + "/f" + std::to_string(i);
        uint64_t n = i == 3 ? 0 : i == 5 ? proto::kDefaultPayload + 7 : size + uint64_t(i % 3);
        write_random_file(top / rel, n, uint64_t(d * 1000 + i));
        mode_t mode = modes[(d + i) % 5];
        ::chmod((top / rel).c_str(), mode);
        files[rel] = {sha256_file(top / rel), mode};
      }
    }
    return files;
  }
  void expect_tree(const fs::path& top, const std::map<std::string, std::pair<std::string, mode_t>>& files,
                   bool modes) {
    for (const auto& [rel, want] : files) {
      ASSERT_TRUE(fs::is_regular_file(top / rel)) << rel;
      EXPECT_EQ(sha256_file(top / rel), want.first) << rel;
      struct stat st {};
      ::stat((top / rel).c_str(), &st);
      if (modes) {
        EXPECT_EQ(st.st_mode & 07777, want.second) << rel;
      }
    }
    for (auto it = fs::recursive_directory_iterator(top); it != fs::recursive_directory_iterator(); ++it)
      EXPECT_EQ(it->path().filename().string().find(".aesxfer-"), std::string::npos) << it->path();
  }
};

TEST_F(PipelineE2E, TreeOfManySmallFilesBothWays) {
  auto files = make_tree(ws.local / "tree", 4, 75, 4096);
  auto r = run({"send", "-r", "-p", (ws.local / "tree").string(), "127.0.0.1:.", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(nonempty_lines(r.out).size(), files.size()) << r.out;
  expect_tree(ws.root / "tree", files, true);
  // Every file was pipelined or sent alone, and each one logged once.
  EXPECT_TRUE(server->wait_for_log("file=\"tree/d3/f74\""));

  r = run({"recv", "-r", "-p", "127.0.0.1:tree", (ws.local / "back").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(nonempty_lines(r.out).size(), files.size()) << r.out;
  expect_tree(ws.local / "back", files, true);
  // Without -p the modes follow the umask, and the bytes are the same.
  r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "back2").string(), "-q"});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  expect_tree(ws.local / "back2", files, false);
}

TEST_F(PipelineE2E, SeveralFilesOnTheCommandLine) {
  std::vector<std::string> args{"send"};
  std::map<std::string, std::string> want;
  for (int i = 0; i < 30; ++i) {
    fs::path p = ws.local / ("s" + std::to_string(i));
    write_random_file(p, 1000 + uint64_t(i), uint64_t(i));
    args.push_back(p.string());
    want[p.filename().string()] = sha256_file(p);
  }
  fs::create_directories(ws.root / "in");
  args.push_back("127.0.0.1:in");
  args.push_back("-q");
  auto r = run(args);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  for (const auto& [name, sum] : want) EXPECT_EQ(sha256_file(ws.root / "in" / name), sum) << name;
}

// recv HOST:a HOST:b ... DIR: one connection, pipelined; a missing source and a directory in the
// middle are reported alone (the directory with "use -r"), a large file among them comes whole,
// and the exit status is 1.
TEST_F(PipelineE2E, SeveralSourcesForRecv) {
  std::vector<std::string> args{"recv"};
  std::map<std::string, std::string> want;
  fs::create_directories(ws.root / "src" / "adir");
  for (int i = 0; i < 30; ++i) {
    std::string name = "r" + std::to_string(i);
    uint64_t size = i == 7 ? (uint64_t(3) << 20) + 5 : 2000 + uint64_t(i);
    write_random_file(ws.root / "src" / name, size, uint64_t(i));
    want[name] = sha256_file(ws.root / "src" / name);
    args.push_back("127.0.0.1:src/" + name);
    if (i == 10) args.push_back("127.0.0.1:src/missing");
    if (i == 20) args.push_back("127.0.0.1:src/adir");
  }
  fs::create_directories(ws.local / "in");
  args.push_back((ws.local / "in").string());
  auto r = run(args);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  auto errs = error_lines(r.err);
  ASSERT_EQ(errs.size(), 2u) << r.err;
  EXPECT_NE(errs[0].find("src/missing"), std::string::npos) << errs[0];
  EXPECT_NE(errs[1].find("src/adir"), std::string::npos) << errs[1];
  EXPECT_NE(errs[1].find("use -r"), std::string::npos) << errs[1];
  for (const auto& [name, sum] : want) EXPECT_EQ(sha256_file(ws.local / "in" / name), sum) << name;
  EXPECT_TRUE(temp_debris(ws.local / "in").empty());
  // One connection for all of them: every log line names the same peer.
  std::set<std::string> peers;
  for (const auto& l : nonempty_lines(server->log())) {
    auto at = l.find(" peer=");
    if (at != std::string::npos) peers.insert(l.substr(at, l.find(' ', at + 1) - at));
  }
  EXPECT_EQ(peers.size(), 1u) << server->log();
}

// One file in the middle of a window is refused by the server (its destination is a symbolic
// link there, which the server never follows): that file alone fails, with one line, the files
// before and after it in the same window arrive and verify, nothing reaches the link's target,
// and the exit status is 1.
TEST_F(PipelineE2E, RefusalInTheMiddleOfAWindowSend) {
  fs::path src = ws.local / "tree";
  fs::create_directories(src);
  std::map<std::string, std::string> want;
  for (int i = 0; i < 40; ++i) {
    std::string name = "f" + std::to_string(i);
    write_random_file(src / name, 4096, uint64_t(i));
    want[name] = sha256_file(src / name);
  }
  TempDir outside{"aesxfer-outside"};
  write_text_file(outside.path() / "target", "untouched");
  fs::create_directories(ws.root / "tree");
  fs::create_symlink(outside.path() / "target", ws.root / "tree" / "f20");
  auto r = run({"send", "-r", src.string(), "127.0.0.1:."});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  auto errs = error_lines(r.err);
  ASSERT_EQ(errs.size(), 1u) << r.err;
  EXPECT_NE(errs[0].find("tree/f20"), std::string::npos) << errs[0];
  EXPECT_EQ(read_text_file(outside.path() / "target"), "untouched");
  EXPECT_TRUE(fs::is_symlink(ws.root / "tree" / "f20"));
  for (const auto& [name, sum] : want) {
    if (name == "f20") continue;
    EXPECT_EQ(sha256_file(ws.root / "tree" / name), sum) << name;
  }
  EXPECT_TRUE(temp_debris(ws.root / "tree").empty());
}

// recv -r: a file whose local destination is a directory fails alone; the others arrive.
TEST_F(PipelineE2E, RefusalInTheMiddleOfAWindowRecv) {
  fs::path t = ws.root / "tree";
  fs::create_directories(t);
  std::map<std::string, std::string> want;
  for (int i = 0; i < 40; ++i) {
    std::string name = "f" + std::to_string(i);
    write_random_file(t / name, 4096, uint64_t(i));
    want[name] = sha256_file(t / name);
  }
  fs::create_directories(ws.local / "dest" / "tree" / "f20" / "keep");
  auto r = run({"recv", "-r", "127.0.0.1:tree", (ws.local / "dest").string()});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  auto errs = error_lines(r.err);
  ASSERT_EQ(errs.size(), 1u) << r.err;
  EXPECT_NE(errs[0].find("f20"), std::string::npos) << errs[0];
  EXPECT_TRUE(fs::is_directory(ws.local / "dest" / "tree" / "f20" / "keep"));
  for (const auto& [name, sum] : want) {
    if (name == "f20") continue;
    EXPECT_EQ(sha256_file(ws.local / "dest" / "tree" / name), sum) << name;
  }
}

// The client API: a get refused by the server inside the window (a symbolic link in the file's
// place, swapped in after the listing) fails alone; the gets on either side verify.
TEST_F(PipelineE2E, ServerRefusesOneGetInTheWindow) {
  fs::create_directories(ws.root / "g");
  for (int i = 0; i < 9; ++i) write_random_file(ws.root / "g" / ("f" + std::to_string(i)), 5000, uint64_t(i));
  fs::remove(ws.root / "g" / "f4");
  fs::create_symlink("f3", ws.root / "g" / "f4");
  client::ClientOptions co;
  co.host = "127.0.0.1";
  co.port = server->port();
  co.cipher = crypto::find_cipher("aes128-gcm");
  co.mac = crypto::find_mac("hmac-sha256");
  co.home = ws.home;
  client::Client client(co);
  client::Pipeline pl(client);
  fs::create_directories(ws.local / "out");
  std::vector<std::string> ok, failed;
  for (int i = 0; i < 9; ++i) {
    std::string name = "f" + std::to_string(i);
    pl.get("g/" + name, ws.local / "out" / name, 5000, AT_FDCWD, nullptr,
           [&, name](const client::FileResult* r, const proto::Failure* f) {
             if (r) ok.push_back(name);
             if (f) failed.push_back(name + ": " + f->what());
           });
  }
  EXPECT_GE(pl.in_flight(), 9u);  // all nine went out before any answer was read
  pl.drain();
  client.bye();
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_EQ(failed[0].rfind("f4: ", 0), 0u) << failed[0];
  EXPECT_EQ(ok.size(), 8u);
  for (const auto& n : ok) EXPECT_EQ(sha256_file(ws.local / "out" / n), sha256_file(ws.root / "g" / n)) << n;
  EXPECT_FALSE(fs::exists(ws.local / "out" / "f4"));
}

// ---- a hostile client -------------------------------------------------------------------------

class PipelineHostileClient : public ServerTest {};

// A pipelined put's data of `n` bytes (at most a record), then its end record withdrawn ("the file
// changed while it was read"): the server reads it to its end and keeps nothing.
void send_withdrawn_data(net::Conn& c, size_t n) {
  std::memset(c.payload_buffer(), 'w', n);
  c.send_record(proto::RecordType::data, 0, n);
  proto::EndRecord end;
  end.length = n;
  end.withdrawn = proto::Withdrawal::changed;
  c.send_record(proto::RecordType::end, proto::kFlagFinal, proto::encode_end(c.payload_buffer(), end));
}

// A refused pipelined put whose data is sent anyway: the server reads that file's records to its
// end and drops them (nothing written anywhere), answers the next requests in order, and the
// session goes on.
// A thirty-fifth re-attack (A-N5's side note): a client that logged in and left without a request
// or Bye was logged as "closed during the session (transfer incomplete)", though nothing was cut
// short. Its line says that it left without Bye.
TEST_F(PipelineHostileClient, AnEmptyLoginIsNotLoggedAsAnIncompleteTransfer) {
  {
    HandSession s(server->port(), ws.home / "id_ed25519");
    ASSERT_TRUE(s.welcome_ok);
  }
  ASSERT_TRUE(server->wait_for_log("closed during the session, without Bye")) << server->log();
  EXPECT_EQ(server->log().find("transfer incomplete"), std::string::npos) << server->log();
}

TEST_F(PipelineHostileClient, RefusedPutsDataIsDroppedAndTheSessionGoesOn) {
  TempDir outside{"aesxfer-outside"};
  fs::create_directories(ws.root / "in");
  fs::create_symlink(outside.path(), ws.root / "in" / "link");
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  const std::string marker(3000, 'M');
  struct P {
    std::string path, data;
  };
  std::vector<P> puts = {{"in/a", "first file"},
                         {"in/link/evil", marker},  // through a symbolic link: refused
                         {"../escape", marker},     // outside the root: refused
                         {"in/b", std::string(70000, 'b')},
                         {"in/c", ""}};
  uint32_t tag = 100;
  for (const auto& p : puts) {
    Message req = ahead_request(Op::put, p.path, p.data.size(), tag++);
    s.conn().send_message(req);
    int fd = ::memfd_create("p", MFD_CLOEXEC);
    ASSERT_EQ(::write(fd, p.data.data(), p.data.size()), ssize_t(p.data.size()));
    ::lseek(fd, 0, SEEK_SET);
    net::send_stream(s.conn(), fd, p.data.size(), nullptr);
    ::close(fd);
  }
  // A pipelined mkdir too, answered in its turn.
  s.conn().send_message(ahead_request(Op::mkdir, "in/newdir", 0, tag++));
  tag = 100;
  for (size_t i = 0; i < puts.size(); ++i) {
    Message resp = s.conn().recv_message("the response");
    ASSERT_EQ(resp.type, MsgType::response);
    ASSERT_TRUE(resp.tagged);
    EXPECT_EQ(resp.tag, tag) << puts[i].path;
    if (i == 1 || i == 2) {
      EXPECT_NE(resp.status, Status::ok) << puts[i].path;
    } else {
      EXPECT_EQ(resp.status, Status::ok) << puts[i].path << " " << resp.text;
      Message res = s.conn().recv_message("the result");
      ASSERT_EQ(res.type, MsgType::result);
      EXPECT_EQ(res.status, Status::ok) << res.text;
      EXPECT_TRUE(res.tagged);
      EXPECT_EQ(res.tag, tag);
    }
    ++tag;
  }
  Message mk = s.conn().recv_message("the mkdir");
  EXPECT_EQ(mk.status, Status::ok);
  EXPECT_EQ(mk.tag, tag);
  // The session is still in step: a plain exchange works.
  std::string got;
  EXPECT_EQ(s.get(make_request(Op::get, "in/b"), &got).status, Status::ok);
  EXPECT_EQ(got, puts[3].data);
  s.bye();
  EXPECT_EQ(read_text_file(ws.root / "in" / "a"), "first file");
  EXPECT_EQ(fs::file_size(ws.root / "in" / "c"), 0u);
  EXPECT_TRUE(fs::is_directory(ws.root / "in" / "newdir"));
  EXPECT_TRUE(fs::is_empty(outside.path()));
  EXPECT_FALSE(fs::exists(ws.root.parent_path() / "escape"));
  EXPECT_TRUE(temp_debris(ws.root / "in").empty());
  // The marker is nowhere under the root.
  for (auto it = fs::recursive_directory_iterator(ws.root); it != fs::recursive_directory_iterator(); ++it)
    if (it->is_regular_file() && !it->is_symlink() && fs::file_size(it->path()) == marker.size()) {
      EXPECT_NE(read_text_file(it->path()), marker) << it->path();
    }
}

// A refused put whose "data" overruns its announced size ends the session; nothing is written.
TEST_F(PipelineHostileClient, RefusedPutOverrunningItsSizeEndsTheSession) {
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  s.conn().send_message(ahead_request(Op::put, "../x", 10, 1));
  // The server ends the session as soon as it reads the overrun, and closing with this client's
  // bytes still unread resets the connection: the reset can reach us before the refusal is read
  // (and then discards it), or while the data is still being written. Either way the session
  // must end, and the server must say why.
  try {
    net::send_stream(s.conn(), -1, 5000, nullptr);  // 5000 bytes where 10 were announced
    Message resp = s.conn().recv_message("the response");
    EXPECT_NE(resp.status, Status::ok);
    for (int i = 0; i < 3; ++i) s.conn().recv_message("more");
    ADD_FAILURE() << "the session went on after the overrun";
  } catch (const proto::Failure&) {
  }
  EXPECT_TRUE(server->wait_for_log("more data than announced"));
}

// Results for pipelined gets: in request order with the request's tag; one for a get that was
// never sent, or out of order, ends the session.
TEST_F(PipelineHostileClient, ResultForTheWrongGetEndsTheSession) {
  write_text_file(ws.root / "a", "aaa");
  write_text_file(ws.root / "b", "bbb");
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  s.conn().send_message(ahead_request(Op::get, "a", 0, 1));
  s.conn().send_message(ahead_request(Op::get, "b", 0, 2));
  for (int i = 0; i < 2; ++i) {
    Message resp = s.conn().recv_message("the response");
    ASSERT_EQ(resp.status, Status::ok);
    net::recv_stream(s.conn(), -1, resp.size, nullptr);
  }
  Message res;
  res.type = MsgType::result;
  res.tagged = true;
  res.tag = 2;  // the first result due is tag 1's
  s.conn().send_message(res);
  EXPECT_THROW(s.conn().recv_message("anything"), proto::Failure);
  EXPECT_TRUE(server->wait_for_log("answers no pipelined get in order"));
}

// A twenty-eighth re-attack (N1): a pipelined get whose Result never came was logged with bytes=0
// after a Bye and not at all when the client just closed (it read whole files that no log line
// named); one the client reported failed said bytes=0 too. Each is logged with the bytes sent.
TEST_F(PipelineHostileClient, GetsWithoutResultsAreLoggedWithTheirBytes) {
  write_random_file(ws.root / "a", 1000, 1);
  write_random_file(ws.root / "b", 2000, 2);
  write_random_file(ws.root / "c", 3000, 3);
  const auto read_both = [](HandSession& s, int n) {
    for (int i = 0; i < n; ++i) {
      Message resp = s.conn().recv_message("the response");
      ASSERT_EQ(resp.status, Status::ok);
      net::recv_stream(s.conn(), -1, resp.size, nullptr);
    }
  };
  {
    HandSession s(server->port(), ws.home / "id_ed25519");
    ASSERT_TRUE(s.welcome_ok);
    s.conn().send_message(ahead_request(Op::get, "a", 0, 1));
    s.conn().send_message(ahead_request(Op::get, "b", 0, 2));
    read_both(s, 2);
    Message res;
    res.type = MsgType::result;
    res.tagged = true;
    res.tag = 1;
    res.status = Status::io_error;
    res.text = "x\x1b\xff";  // escaped once in the log (a twenty-ninth re-attack, N6: twice)
    s.conn().send_message(res);
  }  // closed without b's Result
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  s.conn().send_message(ahead_request(Op::get, "c", 0, 1));
  read_both(s, 1);
  s.bye();
  ASSERT_TRUE(server->wait_for_log("op=get file=\"b\""));
  ASSERT_TRUE(server->wait_for_log("op=get file=\"c\""));
  const std::string log = server->log();
  for (const char* expected :
       {"op=get file=\"a\" bytes=1000 [^\n]*failed: client reported",
        "op=get file=\"b\" bytes=2000 [^\n]*failed: the session ended before its result",
        "op=get file=\"c\" bytes=3000 [^\n]*failed: the client sent no result"})
    EXPECT_TRUE(std::regex_search(log, std::regex(expected))) << expected << "\n" << log;
  EXPECT_NE(log.find("client reported: x\\\\x1b\\\\xff\""), std::string::npos) << log;
}

// A thirty-second re-attack (A-N1): the text of a failed Result was logged up to 512 characters
// after escaping, so 120 bytes of 0xff in every Result made a get of a 1-byte file cost the log 2.8
// times what the client sent. The text keeps what escapes to 64 characters, and says its length.
TEST_F(PipelineHostileClient, AClientsFailureTextCostsTheLogSixtyFourCharactersAtMost) {
  write_random_file(ws.root / "one", 1, 1);
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  s.conn().send_message(ahead_request(Op::get, "one", 0, 1));
  Message resp = s.conn().recv_message("the response");
  ASSERT_EQ(resp.status, Status::ok);
  net::recv_stream(s.conn(), -1, resp.size, nullptr);
  Message res;
  res.type = MsgType::result;
  res.tagged = true;
  res.tag = 1;
  res.status = Status::io_error;
  res.text = std::string(120, '\xff');
  s.conn().send_message(res);
  s.bye();
  ASSERT_TRUE(server->wait_for_log("op=get file=\"one\""));
  std::smatch m;
  const std::string log = server->log();
  ASSERT_TRUE(std::regex_search(log, m, std::regex("client reported: ([^\"\n]*)\\.\\.\\.\\[120 bytes\\]")))
      << log;
  EXPECT_LE(m[1].str().size(), 64u) << m[1];
  EXPECT_GE(m[1].str().size(), 60u) << m[1];
}

// A thirty-second re-attack (A-N6): 4,096 pipelined gets of a file with a path of some 4 KB, left
// without Results, held 32 MB in each session (the whole request, kept for its log line). The
// server keeps only what the line needs, and at most 2 MiB of their paths: past that the session
// ends with a protocol error, every get sent logged.
TEST_F(PipelineHostileClient, UnansweredGetsHoldTwoMebibytesOfPathsAtMost) {
  std::string rel;
  for (int i = 0; i < 15; ++i) rel += (rel.empty() ? "" : "/") + std::string(250, char('a' + i));
  fs::create_directories(ws.root / rel);
  rel += "/f";
  write_random_file(ws.root / rel, 1, 1);
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  const size_t fits = server::kMaxAwaitedBytes / rel.size();
  for (size_t i = 0; i < fits + 20; ++i)
    s.conn().send_message(ahead_request(Op::get, rel, 0, uint32_t(i + 1)));
  size_t answered = 0;
  try {
    for (;;) {
      const Message a = s.conn().recv_message("the answer");
      ASSERT_EQ(a.status, Status::ok) << a.text;
      net::recv_stream(s.conn(), -1, a.size, nullptr);
      ++answered;
    }
  } catch (const proto::Failure&) {  // the server ended the session
  }
  // What the server answered is counted in its log below (ten lines and the sum). The client may
  // read fewer: the server closes with the last requests unread, and the reset that follows can
  // drop answers still on their way (seen once in five runs on a loaded machine: 522 of 556).
  EXPECT_LE(answered, fits);
  EXPECT_GT(answered, 0u);
  ASSERT_TRUE(server->wait_for_log("MiB of paths of pipelined gets without a result"));
  // The first ten in a line each, the rest summed in one (a thirty-fifth re-attack, A-N5).
  ASSERT_TRUE(server->wait_for_log("op=get unanswered=" + std::to_string(fits - 10) +
                                   " bytes=" + std::to_string(fits - 10) + " hashed=0 result=\"failed: "))
      << server->log();
  EXPECT_TRUE(server->wait_for_log("op=get file=", 10, 10));
  EXPECT_FALSE(server->wait_for_log("op=get file=", 0.5, 11)) << server->log();
}

// A thirty-fifth re-attack (A-N5): a session of 4,000 pipelined gets of a 1-byte file that sent no
// Result wrote a ~240-byte line for each, 3.7 log bytes for each byte it sent. Ten lines a session,
// and one that sums the rest: the log stays far below what the client sends. (The client reads
// the answers here, so that the server has sent every one before the session ends.)
TEST_F(PipelineHostileClient, GetsWithoutResultsCostTheLogLessThanTheySend) {
  write_random_file(ws.root / "o", 1, 1);
  const std::string before = server->log();
  uint64_t sent = 0;
  {
    HandSession s(server->port(), ws.home / "id_ed25519");
    ASSERT_TRUE(s.welcome_ok);
    for (uint32_t i = 1; i <= 4000; ++i) {
      const Message m = ahead_request(Op::get, "o", 0, i);
      s.conn().send_message(m);
      sent += 40;  // a record's header, tag and tag-sized fields: at least this much on the wire
    }
    for (int i = 0; i < 4000; ++i) {
      const Message a = s.conn().recv_message("the answer");
      ASSERT_EQ(a.status, Status::ok) << a.text;
      net::recv_stream(s.conn(), -1, a.size, nullptr);
    }
    s.bye();
  }
  ASSERT_TRUE(server->wait_for_log("op=get unanswered=")) << server->log();
  const size_t logged = server->log().size() - before.size();
  std::printf("[ pipeline ] 4000 gets never read: %zu log bytes for at least %llu bytes sent\n", logged,
              (unsigned long long)sent);
  EXPECT_LT(logged, sent / 10) << server->log();
}

// A forty-sixth re-attack (B-F5): a client that read 60 files of 1,000 bytes by pipelined gets and
// said Bye without their Results had ten of them named and 50 only counted. A get that moved more
// bytes than its line takes is always named; the 1-byte ones above are still summed.
TEST_F(PipelineHostileClient, GetsWithoutResultsThatMovedMoreThanTheirLineAreNamed) {
  constexpr int kFiles = 60;
  fs::create_directories(ws.root / "secret");
  for (int i = 0; i < kFiles; ++i)
    write_random_file(ws.root / "secret" / ("s" + std::to_string(i)), 1000, i + 1);
  {
    HandSession s(server->port(), ws.home / "id_ed25519");
    ASSERT_TRUE(s.welcome_ok);
    for (int i = 0; i < kFiles; ++i)
      s.conn().send_message(ahead_request(Op::get, "secret/s" + std::to_string(i), 0, uint32_t(i + 1)));
    for (int i = 0; i < kFiles; ++i) {
      const Message a = s.conn().recv_message("the answer");
      ASSERT_EQ(a.status, Status::ok) << a.text;
      net::recv_stream(s.conn(), -1, a.size, nullptr);
    }
    s.bye();
  }
  ASSERT_TRUE(server->wait_for_log("op=get file=\"secret/s", 10, kFiles)) << server->log();
  EXPECT_EQ(server->log().find("unanswered="), std::string::npos) << server->log();
}

// The server's half of HostileServer.PartsReadFromTwoVersionsOfAFileAreRefused: a ranged get's
// Response names the version of the file it reads, the same for the parts of one file and another
// once a file of the same size was renamed over it (a thirty-second re-attack, B-N1).
TEST_F(PipelineHostileClient, ARangedGetNamesTheVersionOfTheFileItReads) {
  constexpr uint64_t kSize = 4096;
  write_random_file(ws.root / "f", kSize, 1);
  write_random_file(ws.root / "g", kSize, 2);
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  auto part = [&](uint32_t i) {
    Message m = make_request(Op::get, "f", "", kSize);
    m.flags = proto::kFlagRange;
    m.xfer_id.fill(7);
    m.nparts = 2;
    m.part = i;
    m.offset = i * kSize / 2;
    m.length = kSize / 2;
    s.conn().send_message(m);
    const Message a = s.conn().recv_message("the response");
    EXPECT_EQ(a.status, Status::ok) << a.text;
    net::recv_stream(s.conn(), -1, m.length, nullptr, net::StreamOptions{0, false, true, m.offset});
    Message res;
    res.type = MsgType::result;
    s.conn().send_message(res);
    return a.text;
  };
  const std::string first = part(0);
  EXPECT_EQ(first.size(), 32u) << first;
  EXPECT_EQ(part(1), first);
  fs::rename(ws.root / "g", ws.root / "f");
  EXPECT_NE(part(1), first);
  s.bye();
}

// A twenty-eighth re-attack (N6): an authorized client's refused requests wrote a log line each
// (56 MB in 3 s with long names); a twenty-ninth (N2, N5): so did mkdirs of a directory that was
// there (67 MB in 3 s), and a budget per session was renewed by reconnecting. Requests that move
// no data cost ten lines a second per client key, across its sessions; the rest are counted, on
// the next line written and at each session's end.
TEST_F(PipelineHostileClient, RequestsThatMoveNoDataCostTheLogTenLinesASecondPerKey) {
  fs::create_directories(ws.root / "d");
  write_text_file(ws.root / "empty", "");
  constexpr int kEach = 150;
  // Five sessions of one key, one after another: refused gets, mkdirs of a directory that was
  // there, refused gets again, gets of an empty file left without Results (a thirtieth
  // re-attack, N1: a line each, 2.2 bytes of log per byte received), and empty puts to /dev/null (a
  // thirty-second, A-N2: a line each), mkdirs that create (a thirty-seventh, A3: a line each,
  // 2.5 bytes of log per byte sent), and 1-byte puts withdrawn after their byte (a thirty-eighth,
  // A-F4: 2.47 bytes of log per byte sent).
  for (const int kind : {0, 1, 0, 2, 3, 4, 5}) {
    HandSession s(server->port(), ws.home / "id_ed25519");
    ASSERT_TRUE(s.welcome_ok);
    for (int i = 0; i < kEach; ++i) {
      const uint32_t tag = uint32_t(i + 1);
      s.conn().send_message(kind == 0   ? ahead_request(Op::get, "missing-" + std::to_string(i), 0, tag)
                            : kind == 1 ? ahead_request(Op::mkdir, "d", 0, tag)
                            : kind == 2 ? ahead_request(Op::get, "empty", 0, tag)
                            : kind == 3 ? ahead_request(Op::put, "/dev/null", 0, tag)
                            : kind == 4 ? ahead_request(Op::mkdir, "new-" + std::to_string(i), 0, tag)
                                        : ahead_request(Op::put, "w-" + std::to_string(i), 1, tag));
      if (kind == 3) net::send_stream(s.conn(), -1, 0, nullptr);
      if (kind == 5) send_withdrawn_data(s.conn(), 1);
    }
    for (int i = 0; i < kEach * (kind == 3 || kind == 5 ? 2 : 1); ++i) {  // a put's Response, its Result
      const Message a = s.conn().recv_message("the answer");
      ASSERT_TRUE(kind == 0 || kind == 5 || a.status == Status::ok)
          << proto::status_name(a.status) << " " << a.text;
      if (kind == 2 && a.status == Status::ok) net::recv_stream(s.conn(), -1, a.size, nullptr);
    }
    s.bye();
  }
  ASSERT_TRUE(server->wait_for_log("left out of the log", 10, 5));
  // Each session's count is written as it ends, which the last Bye does not wait for.
  std::string log;
  uint64_t lines = 0, counted = 0;
  for (int wait = 0; wait < 50 && lines + counted < uint64_t(7 * kEach); ++wait) {
    if (wait) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log = server->log();
    lines = counted = 0;
    for (const auto& l : nonempty_lines(log)) {
      for (const char* op : {"op=get file=\"missing-", "op=mkdir", "op=get file=\"empty\"",
                             "op=put file=\"/dev/null\"", "op=put file=\"w-"})
        lines += l.find(op) != std::string::npos;
      std::smatch m;
      if (std::regex_search(l, m, std::regex("unlogged_requests=([0-9]+)"))) counted += std::stoull(m[1]);
    }
  }
  EXPECT_GE(lines, 10u) << log;
  EXPECT_LT(lines, 100u) << log;  // ten a second for the key, however many sessions
  EXPECT_EQ(lines + counted, uint64_t(7 * kEach)) << log;
  EXPECT_FALSE(fs::exists(ws.root / "w-0"));  // withdrawn: nothing kept
  EXPECT_TRUE(fs::is_directory(ws.root / ("new-" + std::to_string(kEach - 1))));
}

// A fifty-eighth re-attack (F58-1): a transfer that moved a byte was always logged, so 20,000
// gets of a 1-byte file (or of /dev/zero, size 1) cost the log 1.65 times what the client sent,
// 3.2 times with a name of control bytes. One that moves fewer bytes than its line takes is
// within the key's budget, as an empty one is; one that moves more is still always named.
TEST_F(PipelineHostileClient, TransfersSmallerThanTheirLineShareTheKeysBudget) {
  write_text_file(ws.root / std::string(40, '\x01'), "1");
  write_random_file(ws.root / "big", 4096, 7);
  write_text_file(ws.root / "one", "1");
  fs::create_directories(ws.root / "lone");
  write_text_file(ws.root / "lone" / "f", "1");
  constexpr int kEach = 150, kBig = 20;
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  std::string got;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kEach; ++i) {
    ASSERT_EQ(s.get(make_request(Op::get, std::string(40, '\x01')), &got).status, Status::ok);
    ASSERT_EQ(s.get(make_request(Op::get, "/dev/zero", "", 1), &got).status, Status::ok);
    ASSERT_EQ(s.put(make_request(Op::put, "/dev/null", "n"), "x").status, Status::ok);
    // A fifty-ninth re-attack (J59-1): over a file of 1 byte, a 1-byte put was always logged, as
    // one that emptied or shrank a file is.
    ASSERT_EQ(s.put(make_request(Op::put, "one"), "y").status, Status::ok);
    // A sixtieth (N60-3): a 0-byte put over the 1-byte file this key had just put was always
    // logged, 1.52 times the bytes sent; and a one-entry listing was always logged (N60-6), 2.7
    // times.
    ASSERT_EQ(s.put(make_request(Op::put, "two"), "z").status, Status::ok);
    ASSERT_EQ(s.put(make_request(Op::put, "two"), "").status, Status::ok);
    std::vector<proto::ListEntry> entries;
    ASSERT_EQ(s.list(make_request(Op::list, "lone"), &entries).status, Status::ok);
    ASSERT_EQ(entries.size(), 1u);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (int i = 0; i < kBig; ++i) ASSERT_EQ(s.get(make_request(Op::get, "big"), &got).status, Status::ok);
  s.bye();
  std::string log;
  uint64_t small = 0, listings = 0, big = 0, counted = 0;
  for (int wait = 0; wait < 50 && small + listings + counted < uint64_t(7 * kEach); ++wait) {
    if (wait) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log = server->log();
    small = listings = big = counted = 0;
    for (const auto& l : nonempty_lines(log)) {
      small += l.find("op=get file=\"\\\\x01") != std::string::npos ||
               l.find("op=get file=\"/dev/zero\"") != std::string::npos ||
               l.find("op=put file=\"/dev/null\"") != std::string::npos ||
               l.find("op=put file=\"one\"") != std::string::npos ||
               l.find("op=put file=\"two\"") != std::string::npos;
      listings += l.find("op=list dir=\"lone\"") != std::string::npos;
      big += l.find("op=get file=\"big\"") != std::string::npos;
      std::smatch m;
      if (std::regex_search(l, m, std::regex("unlogged_requests=([0-9]+)"))) counted += std::stoull(m[1]);
    }
  }
  // Within the key's ten quiet lines a second, whatever the machine's load made of the time.
  EXPECT_LE(double(small), 10 * (secs + 1) + 1) << secs << " s\n" << log;
  // A listing is worth the bytes of its pages: about one line in two or three, never each.
  EXPECT_LE(double(listings), kEach / 2 + 10 * (secs + 1)) << secs << " s\n" << log;
  EXPECT_EQ(small + listings + counted, uint64_t(7 * kEach)) << log;
  EXPECT_EQ(big, uint64_t(kBig)) << log;
}

// A fifty-ninth re-attack (J59-4): a get the client failed (its Result not ok, which ends the
// session) was always logged, 1.3 times the bytes the client sent and read. Within the key's
// budget of ten lines a second when it moved less than its line: at most that many lines for the
// time the sessions took, and the rest counted.
TEST_F(PipelineHostileClient, GetsTheClientFailedShareTheKeysBudget) {
  write_text_file(ws.root / "one", "1");
  constexpr int kSessions = 40;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kSessions; ++i) {
    HandSession s(server->port(), ws.home / "id_ed25519");
    ASSERT_TRUE(s.welcome_ok);
    ASSERT_EQ(s.ask(make_request(Op::get, "one")).status, Status::ok);
    net::recv_stream(s.conn(), -1, 1, nullptr);
    proto::Message bad;
    bad.type = proto::MsgType::result;
    bad.status = Status::io_error;
    bad.text = "no";
    s.conn().send_message(bad);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string log;
  uint64_t lines = 0, counted = 0;
  for (int wait = 0; wait < 50 && lines + counted < uint64_t(kSessions); ++wait) {
    if (wait) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log = server->log();
    lines = counted = 0;
    for (const auto& l : nonempty_lines(log)) {
      lines += l.find("op=get file=\"one\"") != std::string::npos;
      std::smatch m;
      if (std::regex_search(l, m, std::regex("unlogged_requests=([0-9]+)"))) counted += std::stoull(m[1]);
    }
  }
  EXPECT_EQ(lines + counted, uint64_t(kSessions)) << log;
  EXPECT_LE(double(lines), 10 * (secs + 1) + 1) << secs << " s\n" << log;
}

// The key's ten quiet lines of this second, spent on stats of names that are not there.
void spend_quiet_lines(HandSession& s) {
  for (int i = 0; i < 10; ++i)
    EXPECT_NE(s.ask(make_request(Op::stat, "nx" + std::to_string(i))).status, Status::ok);
}

// Sums `key=N` over the lines of `log` that contain `with` ("" for every line).
uint64_t sum_of(const std::string& log, const std::string& key, const std::string& with = "") {
  uint64_t sum = 0;
  const std::regex re("[ \"]" + key + "=([0-9]+)");
  for (const auto& l : nonempty_lines(log)) {
    std::smatch m;
    if (l.find(with) != std::string::npos && std::regex_search(l, m, re)) sum += std::stoull(m[1]);
  }
  return sum;
}

// A sixtieth re-attack (N60-1, N60-4): ranged gets of 250 bytes, each fewer bytes than its line,
// read a whole file with no line naming it once refused stats spent the key's quiet lines; the
// count line called them "requests that moved no data". A file's bytes moved without a line now
// add up until they are worth one, and the count says the bytes it left out: every byte read is
// either on a line naming the file or in unlogged_bytes.
TEST_F(PipelineHostileClient, AFileReadInRangesTooSmallForALineIsNamed) {
  constexpr uint64_t kSize = 40000, kChunk = 250;
  write_random_file(ws.root / "db.bin", kSize, 60);
  const std::string data = read_text_file(ws.root / "db.bin");
  std::string got;
  {
    HandSession s(server->port(), ws.home / "id_ed25519");
    ASSERT_TRUE(s.welcome_ok);
    auto second = std::chrono::steady_clock::now() - std::chrono::seconds(2);
    Message req = make_request(Op::get, "db.bin", "", kSize);
    req.flags = proto::kFlagRange;
    req.xfer_id.fill(7);
    req.nparts = 1;
    for (uint64_t off = 0; off < kSize; off += kChunk) {
      if (std::chrono::steady_clock::now() - second >= std::chrono::milliseconds(950)) {
        spend_quiet_lines(s);
        second = std::chrono::steady_clock::now();
      }
      req.offset = off;
      req.length = kChunk;
      ASSERT_EQ(s.ask(req).status, Status::ok);
      const int fd = ::memfd_create("range", MFD_CLOEXEC);
      ASSERT_EQ(::ftruncate(fd, kSize), 0);
      net::recv_stream(s.conn(), fd, kChunk, nullptr, net::StreamOptions{0, false, true, off});
      std::string part(kChunk, '\0');
      ASSERT_EQ(::pread(fd, part.data(), kChunk, off), ssize_t(kChunk));
      ::close(fd);
      got += part;
      Message ok;
      ok.type = MsgType::result;
      s.conn().send_message(ok);
    }
    s.bye();
  }
  ASSERT_EQ(got, data);
  std::string log;
  uint64_t named = 0, accounted = 0;
  for (int wait = 0; wait < 50 && accounted < kSize; ++wait) {
    if (wait) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log = server->log();
    named = 0;
    for (const auto& l : nonempty_lines(log)) named += l.find("op=get file=\"db.bin\"") != std::string::npos;
    accounted = sum_of(log, "bytes", "op=get file=\"db.bin\"") + sum_of(log, "unlogged_bytes");
  }
  EXPECT_EQ(accounted, kSize) << log;
  // Each byte once: not again on a line as the earlier ones' (a sixty-first re-attack, R61-6).
  EXPECT_EQ(sum_of(log, "bytes", "op=get file=\"db.bin\"") + sum_of(log, "[a-z_]*unlogged_bytes"), kSize)
      << log;
  // A line takes about 300 bytes here: one for every two or three ranges, and never one for each.
  EXPECT_GE(named, kSize / kChunk / 4) << log;
  EXPECT_LT(named, kSize / kChunk) << log;
  EXPECT_EQ(log.find("requests that moved no data"), std::string::npos) << log;
}

// A sixty-first re-attack (R61-1): with the ledger full, a 1-byte put to a fresh name after each
// 250-byte piece pushed the file's sum out, and a 200 KB file was read with no line naming it. The
// file with the fewest bytes is forgotten: the pieces still add up to lines.
TEST_F(PipelineHostileClient, AFileReadInPiecesIsNamedWhateverFillsTheLedger) {
  constexpr uint64_t kSize = 10000, kChunk = 250;
  write_random_file(ws.root / "secret.bin", kSize, 63);
  fs::create_directories(ws.root / "j");
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  int fresh = 0;
  const auto junk = [&] { return s.put(make_request(Op::put, "j/" + std::to_string(fresh++)), "x").status; };
  for (int i = 0; i < 4200; ++i) ASSERT_EQ(junk(), Status::ok);
  Message req = make_request(Op::get, "secret.bin", "", kSize);
  req.flags = proto::kFlagRange;
  req.xfer_id.fill(8);
  req.nparts = 1;
  req.length = kChunk;
  for (uint64_t off = 0; off < kSize; off += kChunk) {
    spend_quiet_lines(s);
    req.offset = off;
    ASSERT_EQ(s.ask(req).status, Status::ok);
    net::recv_stream(s.conn(), -1, kChunk, nullptr, net::StreamOptions{0, false, true, off});
    Message ok;
    ok.type = MsgType::result;
    s.conn().send_message(ok);
    ASSERT_EQ(junk(), Status::ok);
  }
  s.bye();
  std::string log;
  uint64_t named = 0;
  for (int wait = 0; wait < 30 && named < kSize / kChunk / 4; ++wait) {
    if (wait) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log = server->log();
    named = 0;
    for (const auto& l : nonempty_lines(log))
      named += l.find("op=get file=\"secret.bin\"") != std::string::npos;
  }
  // A line takes about 300 bytes here: one for every two pieces.
  EXPECT_GE(named, kSize / kChunk / 4) << log.substr(log.size() > 4000 ? log.size() - 4000 : 0);
}

// A sixty-first re-attack (R61-3): a put over another's file of 85 bytes (or the server's), of 86
// bytes, moved more than it replaced and less than its line, and no line named it; reading the
// file first made its bytes count as the key's own. A put that replaced more than this key's puts
// had written there is named.
TEST_F(PipelineHostileClient, APutOverAnothersSmallFileIsNamed) {
  write_text_file(ws.root / "trusted_keys", std::string(84, 'k') + "\n");
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  std::string got;
  spend_quiet_lines(s);
  ASSERT_EQ(s.get(make_request(Op::get, "trusted_keys"), &got).status, Status::ok);
  ASSERT_EQ(s.put(make_request(Op::put, "trusted_keys"), std::string(85, 'm') + "\n").status, Status::ok);
  // A sixty-second (T62-1): a withdrawn put, which left nothing in place, counted as the key's own
  // bytes there, and a 1-byte put then destroyed another's 200-byte file unlogged.
  write_text_file(ws.root / "victim.cfg", std::string(199, 'v') + "\n");
  spend_quiet_lines(s);
  s.conn().send_message(ahead_request(Op::put, "victim.cfg", 250, 77));
  send_withdrawn_data(s.conn(), 250);
  for (int i = 0; i < 2; ++i) s.conn().recv_message("the withdrawn put's answers");
  ASSERT_EQ(s.put(make_request(Op::put, "victim.cfg"), "x").status, Status::ok);
  s.bye();
  EXPECT_TRUE(server->wait_for_log("op=put file=\"trusted_keys\"", 5)) << server->log();
  EXPECT_TRUE(server->wait_for_log("op=put file=\"victim.cfg\" bytes=1 ", 5)) << server->log();
  EXPECT_EQ(read_text_file(ws.root / "victim.cfg"), "x");
}

// A sixty-first re-attack (R61-4): a line written only for what its request had the server hash (a
// probe of a 1 MiB file) was outside every budget: probes with long names wrote 1.72 times what
// the client sent and read. Twenty a second per key, of their own, and the rest counted with the
// bytes hashed.
TEST_F(PipelineHostileClient, LinesPaidForOnlyByHashingHaveABudget) {
  write_random_file(ws.root / "big", 1 << 20, 64);
  constexpr int kSessions = 80;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kSessions; ++i) {
    HandSession s(server->port(), ws.home / "id_ed25519");
    ASSERT_TRUE(s.welcome_ok);
    const Message r = s.ask(make_request(Op::probe, "big", "", 1 << 20));
    ASSERT_EQ(r.status, Status::ok) << r.text;
    ASSERT_FALSE(r.digest.empty());
    s.bye();
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string log;
  uint64_t lines = 0, counted = 0;
  for (int wait = 0; wait < 50 && lines + counted < uint64_t(kSessions); ++wait) {
    if (wait) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log = server->log();
    lines = 0;
    for (const auto& l : nonempty_lines(log)) lines += l.find("op=probe file=\"big\"") != std::string::npos;
    counted = sum_of(log, "unlogged_hashing_requests");
  }
  EXPECT_EQ(lines + counted, uint64_t(kSessions)) << log;
  EXPECT_LE(double(lines), 20 * (secs + 1) + 1) << secs << " s\n" << log;
  EXPECT_EQ(sum_of(log, "unlogged_hashed_bytes"), counted << 20) << log;
}

// A sixtieth re-attack (N60-2): a resumed put of 1 byte that completed a file whose pieces had
// come within the key's budget (resumed puts cut at 65,000 bytes, one session each) moved fewer
// bytes than its line, and no line named the 1 MB file it put in place. A put is worth the file
// it makes.
TEST_F(PipelineHostileClient, APutThatCompletesALargeFileIsNamedWhateverItMoved) {
  write_random_file(ws.root / "source", 3000, 61);
  const std::string data = read_text_file(ws.root / "source");
  write_text_file(ws.root / ".grown.aesxfer-partial", data.substr(0, data.size() - 1));
  ::chmod((ws.root / ".grown.aesxfer-partial").c_str(), 0600);
  {
    HandSession s(server->port(), ws.home / "id_ed25519");
    ASSERT_TRUE(s.welcome_ok);
    spend_quiet_lines(s);
    Message resumed = make_request(Op::put, "grown", "grown");
    resumed.flags = proto::kFlagResume;
    resumed.offset = data.size() - 1;
    ASSERT_EQ(s.put(resumed, data).status, Status::ok);
    s.bye();
  }
  EXPECT_EQ(read_text_file(ws.root / "grown"), data);
  EXPECT_TRUE(server->wait_for_log("op=put file=\"grown\"", 5)) << server->log();
  EXPECT_NE(server->log().find("bytes=1 "), std::string::npos) << server->log();
}

// A sixtieth re-attack (N60-5): a pipelined get's failure text, the client's words, counted in
// its line's cost, so a client that failed its gets with a long text read larger files without a
// line. The cost no longer counts them: a file larger than the line without them is named.
TEST_F(PipelineHostileClient, AClientsLongerWordsDoNotBuyAnUnloggedGet) {
  write_random_file(ws.root / "token", 300, 62);
  {
    HandSession s(server->port(), ws.home / "id_ed25519");
    ASSERT_TRUE(s.welcome_ok);
    spend_quiet_lines(s);
    ASSERT_EQ(s.ask(ahead_request(Op::get, "token", 0, 1)).status, Status::ok);
    net::recv_stream(s.conn(), -1, 300, nullptr);
    Message bad;
    bad.type = MsgType::result;
    bad.tagged = true;
    bad.tag = 1;
    bad.status = Status::io_error;
    bad.text = std::string(8000, '\x01');
    s.conn().send_message(bad);
    s.bye();
  }
  EXPECT_TRUE(server->wait_for_log("op=get file=\"token\"", 5)) << server->log();
}

// ---- a fake server whose answers are out of order -----------------------------------------------

class PipelineFakeServer : public testing::Test {
 protected:
  Workspace ws;
  ProcResult run(std::vector<std::string> a, uint16_t port) {
    a.push_back("-P");
    a.push_back(std::to_string(port));
    a.push_back("--timeout");
    a.push_back("10");
    return run_aesxfer(a, ws.home, 60);
  }
};

TEST_F(PipelineFakeServer, AnswersOutOfOrderOrUntaggedAreRefused) {
  using proto::EntryType;
  for (int variant = 0; variant < 3; ++variant) {
    SCOPED_TRACE(variant);
    std::vector<Message> gets;
    FakeServer fake([&](net::Conn& c, const Message& m) {
      if (m.op == Op::list) {
        FakeServer::send_listing(c, "tree",
                                 {{EntryType::file, "a", 3, 0644, 0},
                                  {EntryType::file, "b", 3, 0644, 0},
                                  {EntryType::file, "c", 3, 0644, 0}});
        return;
      }
      if (m.op != Op::get) return;
      gets.push_back(m);
      if (gets.size() < 2) return;
      if (gets.size() > 2) return;
      // Answer the second get first (variant 0), an answer with no tag (1), or a tag never sent (2).
      Message ok = response(Status::ok);
      ok.size = 3;
      ok.tagged = variant != 1;
      ok.tag = variant == 0 ? gets[1].tag : variant == 2 ? 999 : 0;
      c.send_message(ok);
      net::send_stream(c, -1, 3, nullptr);
    });
    fs::path dest = ws.local / ("dest" + std::to_string(variant));
    auto r = run({"recv", "-r", "127.0.0.1:tree", dest.string(), "-q", "--retries", "0"}, fake.port());
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_NE(r.err.find("protocol error"), std::string::npos) << r.err;
    // Nothing was written under any of the names.
    for (const char* f : {"a", "b", "c"}) EXPECT_FALSE(fs::exists(dest / f)) << f;
    if (fs::exists(dest)) {
      EXPECT_TRUE(temp_debris(dest).empty());
    }
  }
}

// A pipelined get answered with a size far beyond its listing's, for a file refused here (no room
// for 1 TiB): the client closes the connection rather than read and drop it all (a thirty-ninth
// re-attack, B-F2: 25 GiB read in 30 s, silent, --timeout never fired).
TEST_F(PipelineFakeServer, AHugeAnswerForARefusedGetIsNotReadToItsEnd) {
  using proto::EntryType;
  FakeServer fake([&](net::Conn& c, const Message& m) {
    if (m.op == Op::list) {
      FakeServer::send_listing(c, "tree", {{EntryType::file, "a", 10, 0644, 0}});
      return;
    }
    if (m.op != Op::get) return;
    Message ok = response(Status::ok);
    ok.size = uint64_t(1) << 40;
    c.send_message(ok);
    net::send_stream(c, -1, ok.size, nullptr);  // until the client closes
  });
  const fs::path dest = ws.local / "dest";
  const auto t0 = std::chrono::steady_clock::now();
  auto r = run({"recv", "-r", "127.0.0.1:tree", dest.string(), "-q", "--retries", "0"}, fake.port());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("no space left"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the server sends 1048576 MiB for it, more than the 1 MiB of a refused file this "
                       "client reads and drops: the connection is closed"),
            std::string::npos)
      << r.err;
  EXPECT_LT(secs, 30.0) << r.describe();
  EXPECT_FALSE(fs::exists(dest / "a"));
  if (fs::exists(dest)) {
    EXPECT_TRUE(temp_debris(dest).empty());
  }
}

// A put's Result where its Response is due (an answer skipped) is refused too.
TEST_F(PipelineFakeServer, PutAnswersOutOfOrderAreRefused) {
  fs::create_directories(ws.local / "src");
  for (const char* f : {"a", "b"}) write_text_file(ws.local / "src" / f, f);
  std::vector<Message> puts;
  FakeServer fake([&](net::Conn& c, const Message& m) {
    if (m.op == Op::mkdir) {
      Message ok = response(Status::ok, "src");
      ok.tagged = m.flags & proto::kFlagAhead;
      ok.tag = m.tag;
      c.send_message(ok);
      return;
    }
    if (m.op != Op::put) return;
    net::recv_stream(c, -1, m.size, nullptr);
    puts.push_back(m);
    if (puts.size() == 2) {  // the second's answers first
      for (MsgType t : {MsgType::response, MsgType::result}) {
        Message a = response(Status::ok);
        a.type = t;
        a.tagged = true;
        a.tag = puts[1].tag;
        c.send_message(a);
      }
    }
  });
  auto r =
      run({"send", "-r", (ws.local / "src").string(), "127.0.0.1:.", "-q", "--retries", "0"}, fake.port());
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("protocol error"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("out of order"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace aesxfer::test
