// Issue 24 item C5: a probe (send --resume) makes the server hash its copy of a file, a hundred
// bytes asking for a read of up to a whole file. A session remembers each digest (by device,
// inode, size, times and the length hashed) and has a budget of bytes it may hash at all (serve
// --max-probe-hash): measured here in the server's own read bytes (/proc/PID/io, rchar, which
// counts page-cache reads too) while one session pipelines its probes.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "files/resume.h"
#include "files/unique_fd.h"
#include "proto/end_record.h"
#include "tests/hand_session.h"
#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

using proto::Message;
using proto::Op;
using proto::Status;

constexpr uint64_t kMiB = uint64_t(1) << 20;
constexpr uint64_t kFile = 16 * kMiB;

// Bytes the process has read so far, by any read or pread, from /proc/PID/io.
uint64_t rchar_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/io");
  std::string key;
  uint64_t v = 0;
  while (f >> key >> v)
    if (key == "rchar:") return v;
  ADD_FAILURE() << "no rchar in /proc/" << pid << "/io";
  return 0;
}

// Sends one pipelined probe per path (tags 1, 2, ...) and reads every answer, in order.
std::vector<Message> probe_all(HandSession& s, const std::vector<std::string>& paths) {
  uint32_t tag = 1;
  for (const auto& p : paths) {
    Message m = make_request(Op::probe, p, p, kFile);
    m.flags = proto::kFlagAhead;
    m.tag = tag++;
    m.tagged = true;
    s.conn().send_message(m);
  }
  std::vector<Message> out;
  for (size_t i = 0; i < paths.size(); ++i) out.push_back(s.conn().recv_message("a probe's answer"));
  return out;
}

using ProbeBound = ServerTest;

// Twenty pipelined probes of one 16 MiB file: the server hashes it once (about 16 MiB read, not
// 320), and every answer carries the same digest of the whole file.
TEST_F(ProbeBound, RepeatedProbesOfOneFileHashItOnce) {
  write_random_file(ws.root / "big.bin", kFile, 1);
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  const uint64_t before = rchar_of(server->pid());
  auto answers = probe_all(s, std::vector<std::string>(20, "big.bin"));
  const uint64_t read = rchar_of(server->pid()) - before;
  for (const auto& a : answers) {
    ASSERT_EQ(a.status, Status::ok) << a.text;
    EXPECT_EQ(a.text, proto::kProbeComplete);
    EXPECT_EQ(a.size, kFile);
    ASSERT_EQ(a.digest.size(), proto::kPrefixMacLen);
    EXPECT_EQ(a.digest, answers[0].digest);
  }
  std::printf("[ probes  ] 20 probes of a 16 MiB file: the server read %.1f MiB\n", double(read) / kMiB);
  EXPECT_GE(read, kFile);
  EXPECT_LT(read, kFile + 4 * kMiB) << "the file was hashed more than once";
  s.bye();
}

// recv --resume of a 16 MiB file whose first 15 MiB are here: the server reads the prefix once
// (its digest and the whole-file checksum's state come from one pass), then the last MiB; before,
// the checksum read the prefix a second time (31 MiB for 1 MiB sent).
TEST_F(ProbeBound, ResumedGetReadsItsPrefixOnce) {
  write_random_file(ws.root / "big.bin", kFile, 3);
  const fs::path partial = ws.local / ".big.bin.aesxfer-partial";
  {
    std::ifstream in(ws.root / "big.bin", std::ios::binary);
    std::string prefix(kFile - kMiB, '\0');
    in.read(prefix.data(), std::streamsize(prefix.size()));
    write_text_file(partial, prefix);
    fs::permissions(partial, fs::perms(0600));
  }
  const uint64_t before = rchar_of(server->pid());
  auto r = run({"recv", "--resume", "-q", "127.0.0.1:big.bin", (ws.local / "big.bin").string()});
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const uint64_t read = rchar_of(server->pid()) - before;
  EXPECT_EQ(sha256_file(ws.local / "big.bin"), sha256_file(ws.root / "big.bin"));
  EXPECT_TRUE(server->wait_for_log("resumed_from=")) << server->log();
  std::printf("[ probes  ] recv --resume, 15 of 16 MiB here: the server read %.1f MiB\n",
              double(read) / kMiB);
  EXPECT_GE(read, kFile);
  EXPECT_LT(read, kFile + 4 * kMiB) << "the prefix was read more than once";
}

// A fifty-fourth re-attack (B54-1): a probe that hashed a whole file wrote no log line, and a
// resumed get whose digest did not match hashed its prefix and said only "resumed_from=0". Each
// line says what was hashed for it: the first probe the whole file, the get its prefix.
TEST_F(ProbeBound, ProbesAndResumedGetsLogWhatTheyHashed) {
  write_random_file(ws.root / "big.bin", kFile, 5);
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  // Fifteen stats first spend the key's ten quiet lines of this second: a probe that hashes a MiB
  // or more is logged all the same (a fifty-fifth re-attack, A55-1: hidden behind cheap stats).
  for (int i = 0; i < 15; ++i) ASSERT_EQ(s.ask(make_request(Op::stat, "big.bin")).status, Status::ok);
  auto answers = probe_all(s, {"big.bin", "big.bin"});
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_EQ(answers[1].text, proto::kProbeComplete);
  Message get = make_request(Op::get, "big.bin");
  get.flags = proto::kFlagResume;
  get.offset = kFile - kMiB;
  get.digest = std::string(proto::kPrefixMacLen, 'x');  // not the server's: sent from 0
  std::string data;
  ASSERT_EQ(s.get(get, &data).status, Status::ok);
  EXPECT_EQ(data.size(), kFile);
  s.bye();
  const std::string probe = "op=probe file=\"big.bin\" size=" + std::to_string(kFile);
  EXPECT_TRUE(server->wait_for_log(probe + " hashed=" + std::to_string(kFile) + " result=\"complete\""))
      << server->log();
  EXPECT_TRUE(server->wait_for_log("resumed_from=0 hashed=" + std::to_string(kFile - kMiB))) << server->log();
}

// A fifty-fifth re-attack (B55-3): pipelined resumed gets left without their Results were logged
// ten by name and the rest summed in one line that said nothing of what they hashed. Those that
// hashed a MiB or more are named each; the sum says what the others hashed.
TEST_F(ProbeBound, UnansweredResumedGetsSayWhatTheyHashed) {
  const uint64_t big = 2 * kMiB + 1, small = kMiB / 2 + 1;
  std::vector<std::string> names;
  for (int i = 0; i < 12; ++i) {
    names.push_back("b" + std::to_string(i));
    write_random_file(ws.root / names.back(), big, 40 + i);
  }
  for (int i = 0; i < 12; ++i) {
    names.push_back("s" + std::to_string(i));
    write_random_file(ws.root / names.back(), small, 60 + i);
  }
  {
    HandSession s(server->port(), ws.home / "id_ed25519");
    ASSERT_TRUE(s.welcome_ok);
    uint32_t tag = 1;
    for (const auto& n : names) {
      const uint64_t size = n[0] == 'b' ? big : small;
      files::UniqueFd fd(::open((ws.root / n).c_str(), O_RDONLY | O_CLOEXEC));
      ASSERT_TRUE(fd);
      Message m = make_request(Op::get, n);
      m.flags = proto::kFlagResume | proto::kFlagAhead;
      m.tag = tag++;
      m.tagged = true;
      m.offset = size - 1;  // the right digest: one byte moves
      m.digest = files::prefix_mac(s.keys(), fd.get(), size - 1);
      s.conn().send_message(m);
    }
    s.conn().flush();
    ::shutdown(s.conn().fd(), SHUT_WR);  // no Result: the server reads every request, then the end
    ASSERT_TRUE(server->wait_for_log("unanswered=", 10)) << server->log();
  }
  const std::string log = server->log();
  for (int i = 0; i < 12; ++i)
    EXPECT_NE(log.find("op=get file=\"b" + std::to_string(i) + "\" bytes=1 "), std::string::npos) << i << log;
  EXPECT_NE(log.find("unanswered=2 bytes=2 hashed=" + std::to_string(2 * (small - 1)) + " "),
            std::string::npos)
      << log;
}

// A fifty-fifth re-attack (A55-3): a get of another user's sparse file (`truncate -s 1T`) read its
// holes, and the kernel zeroes a page-cache page for each: 2.5 to 4.2 s of server CPU a GiB against
// 0.3 s for a client that never decrypts. The holes are sent as zeros made in memory: the server
// reads the data alone, and the file arrives the same.
TEST_F(ProbeBound, AGetOfASparseFileReadsOnlyItsData) {
  const fs::path sparse = ws.root / "sparse.bin";
  {
    files::UniqueFd fd(::open(sparse.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    ASSERT_TRUE(fd);
    ASSERT_EQ(::ftruncate(fd.get(), off_t(256 * kMiB)), 0);
    const std::string data(kMiB, 'd');
    ASSERT_EQ(::pwrite(fd.get(), data.data(), data.size(), off_t(100 * kMiB + 5)), ssize_t(data.size()));
  }
  for (const char* streams : {"1", "4"}) {
    SCOPED_TRACE(streams);
    const uint64_t before = rchar_of(server->pid());
    auto r =
        run({"recv", "-q", "--streams", streams, "127.0.0.1:sparse.bin", (ws.local / "back.bin").string()});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    const uint64_t read = rchar_of(server->pid()) - before;
    std::printf("[ sparse  ] a get of 256 MiB (1 MiB of data), %s stream(s): the server read %.1f MiB\n",
                streams, double(read) / kMiB);
    EXPECT_LT(read, 16 * kMiB) << "the holes were read";
    EXPECT_EQ(sha256_file(ws.local / "back.bin"), sha256_file(sparse));
    fs::remove(ws.local / "back.bin");
  }
}

class ProbeBudget : public ServerTest {
  std::vector<std::string> server_args() const override { return {"--max-probe-hash", "40M"}; }
};

// With a 40 MiB budget, probes of four different 16 MiB files hash two of them; the other two are
// answered as if nothing were kept (no digest: the client sends the file whole), and a probe of
// a file already hashed still gets its digest from memory.
TEST_F(ProbeBudget, ProbesOfManyFilesStopAtTheSessionsBudget) {
  std::vector<std::string> names;
  for (int i = 0; i < 4; ++i) {
    names.push_back("f" + std::to_string(i) + ".bin");
    write_random_file(ws.root / names.back(), kFile, uint64_t(10 + i));
  }
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  const uint64_t before = rchar_of(server->pid());
  auto first = probe_all(s, names);
  auto again = probe_all(s, {names[0]});
  const uint64_t read = rchar_of(server->pid()) - before;
  int hashed = 0;
  for (const auto& a : first) {
    ASSERT_EQ(a.status, Status::ok) << a.text;
    if (a.digest.size() == proto::kPrefixMacLen) {
      ++hashed;
    } else {
      EXPECT_TRUE(a.digest.empty());
      EXPECT_EQ(a.size, 0u);
      EXPECT_TRUE(a.text.empty());
    }
  }
  EXPECT_EQ(hashed, 2);
  ASSERT_EQ(again[0].digest.size(), proto::kPrefixMacLen);
  EXPECT_EQ(again[0].digest, first[0].digest);
  std::printf("[ probes  ] 4 files of 16 MiB, budget 40 MiB: the server read %.1f MiB\n",
              double(read) / kMiB);
  EXPECT_LT(read, 40 * kMiB) << "hashed beyond the session's budget";
  EXPECT_TRUE(server->wait_for_log("probe hashing budget")) << server->log();
  s.bye();
}

// A third re-attack (N9): a resumed put without this session's probe state (no probe at all, or
// its state gave way) read the kept prefix again outside the budget: four resumed puts of 16 MiB
// prefixes read 64 MiB under a 40 MiB budget. Now that read is charged: two are read, the other
// two refused (busy, naming the budget), and the server reads under the budget.
TEST_F(ProbeBudget, ResumedPutsWithoutAProbeAreChargedToo) {
  std::vector<std::string> data;
  for (int i = 0; i < 4; ++i) {
    const std::string name = "p" + std::to_string(i) + ".bin";
    write_random_file(ws.local / name, kFile + kMiB, uint64_t(20 + i));
    data.push_back(read_text_file(ws.local / name));
    const fs::path partial = ws.root / ("." + name + ".aesxfer-partial");
    std::ofstream(partial, std::ios::binary).write(data.back().data(), std::streamsize(kFile));
    fs::permissions(partial, fs::perms(0600));
  }
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  const uint64_t before = rchar_of(server->pid());
  int done = 0, refused = 0;
  for (int i = 0; i < 4; ++i) {
    const std::string name = "p" + std::to_string(i) + ".bin";
    Message m = make_request(Op::put, name, name);
    m.flags = proto::kFlagResume;
    m.offset = kFile;
    const Message r = s.put(m, data[size_t(i)]);
    if (r.status == Status::ok) {
      ++done;
      EXPECT_EQ(read_text_file(ws.root / name), data[size_t(i)]) << name;
    } else {
      ++refused;
      EXPECT_EQ(r.status, Status::busy) << r.text;
      EXPECT_NE(
          r.text.find("hashing budget (40 MiB, serve --max-probe-hash) is spent; send it again in a new "
                      "session"),
          std::string::npos)
          << r.text;
    }
  }
  const uint64_t read = rchar_of(server->pid()) - before;
  std::printf(
      "[ probes  ] 4 resumed puts of 16 MiB prefixes, no probe, budget 40 MiB: the server read %.1f MiB\n",
      double(read) / kMiB);
  EXPECT_EQ(done, 2);
  EXPECT_EQ(refused, 2);
  EXPECT_LT(read, 40 * kMiB + 4 * kMiB) << "read beyond the session's budget (the puts' data is 2 MiB)";
  s.bye();
}

// A fiftieth re-attack (A50-1): a resumed put withdrawn at once, repeated, had the server hash its
// kept partial file again each time (each cut back to the offset changed the file's change time,
// the state its digest was remembered under): 40 requests of 99 bytes read 10 GiB. The prefix's
// scan now follows the server's own cuts, and a cut to the length the file has changes nothing.
TEST_F(ProbeBudget, ResumedPutsWithdrawnAtOnceHashThePrefixOnce) {
  write_random_file(ws.local / "w.bin", kFile + kMiB, 41);
  const std::string data = read_text_file(ws.local / "w.bin");
  const fs::path partial = ws.root / ".w.bin.aesxfer-partial";
  std::ofstream(partial, std::ios::binary).write(data.data(), std::streamsize(kFile));
  fs::permissions(partial, fs::perms(0600));
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  const uint64_t before = rchar_of(server->pid());
  for (int i = 0; i < 5; ++i) {
    SCOPED_TRACE(i);
    Message m = make_request(Op::put, "w.bin", "w.bin", data.size());
    m.flags = proto::kFlagResume;
    m.offset = kFile - kMiB;  // below the partial file's length: the first one cuts it back
    const Message resp = s.ask(m);
    ASSERT_EQ(resp.status, Status::ok) << resp.text;
    proto::EndRecord end;
    end.length = m.offset;
    end.withdrawn = proto::Withdrawal::changed;
    s.conn().send_record(proto::RecordType::end, proto::kFlagFinal,
                         proto::encode_end(s.conn().payload_buffer(), end));
    const Message result = s.conn().recv_message("the result");
    EXPECT_NE(result.status, Status::ok);
  }
  const uint64_t read = rchar_of(server->pid()) - before;
  std::printf("[ probes  ] 5 resumed puts at 15 MiB, each withdrawn at once: the server read %.1f MiB\n",
              double(read) / kMiB);
  EXPECT_LT(read, kFile + 4 * kMiB) << "the prefix was hashed more than once";
  EXPECT_EQ(fs::file_size(partial), kFile - kMiB);
  s.bye();
}

// A fiftieth re-attack (A50-1): the budget was a session's, and a new session costs only a
// handshake. Every session of a key draws on the key's allowance too: one session's budget at
// once, then as much every 10 minutes.
TEST_F(ProbeBudget, ANewSessionDoesNotRenewTheKeysAllowance) {
  std::vector<std::string> names;
  for (int i = 0; i < 4; ++i) {
    names.push_back("k" + std::to_string(i) + ".bin");
    write_random_file(ws.root / names.back(), kFile, uint64_t(60 + i));
  }
  auto hashed_of = [](const std::vector<Message>& answers) {
    int n = 0;
    for (const auto& a : answers) n += a.digest.size() == proto::kPrefixMacLen;
    return n;
  };
  {
    HandSession s(server->port(), ws.home / "id_ed25519");
    ASSERT_TRUE(s.welcome_ok);
    EXPECT_EQ(hashed_of(probe_all(s, {names[0], names[1]})), 2);
    s.bye();
  }
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  const uint64_t before = rchar_of(server->pid());
  EXPECT_EQ(hashed_of(probe_all(s, {names[2], names[3]})), 0) << "a new session hashed 32 MiB more";
  EXPECT_LT(rchar_of(server->pid()) - before, 4 * kMiB);
  EXPECT_TRUE(server->wait_for_log("the client key's probe hashing allowance (40 MiB at once"))
      << server->log();
  s.bye();
}

class ProbeBudgetSmall : public ServerTest {
  std::vector<std::string> server_args() const override { return {"--max-probe-hash", "1M"}; }
};

// A prefix larger than the whole budget is said to be so, in the log and the refusal, and is not
// sent to another session that would refuse it the same way (an eighteenth re-attack, N10: "the
// budget is spent" when nothing had been hashed).
TEST_F(ProbeBudgetSmall, APrefixOverTheWholeBudgetIsSaidToBe) {
  write_random_file(ws.local / "big.bin", 8 * kMiB, 31);
  const std::string data = read_text_file(ws.local / "big.bin");
  const fs::path partial = ws.root / ".big.bin.aesxfer-partial";
  std::ofstream(partial, std::ios::binary).write(data.data(), std::streamsize(7 * kMiB));
  fs::permissions(partial, fs::perms(0600));
  HandSession s(server->port(), ws.home / "id_ed25519");
  ASSERT_TRUE(s.welcome_ok);
  Message m = make_request(Op::put, "big.bin", "big.bin");
  m.flags = proto::kFlagResume;
  m.offset = 7 * kMiB;
  const Message r = s.put(m, data);
  EXPECT_EQ(r.status, Status::busy) << r.text;
  EXPECT_NE(r.text.find("its 7 MiB prefix is more than the session's probe hashing budget (1 MiB"),
            std::string::npos)
      << r.text;
  EXPECT_EQ(r.text.find("new session"), std::string::npos) << r.text;
  EXPECT_TRUE(server->wait_for_log("not hashed: its 7 MiB prefix is more than")) << server->log();
  s.bye();
}

}  // namespace
}  // namespace aesxfer::test
