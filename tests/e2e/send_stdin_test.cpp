// send - (issue 14, item 10): standard input streamed as an unsized put (protocol 4,
// docs/PROTOCOL.md 3.2 and 3.3), never spooled: through the binary against a real server, and
// by hand (tests/hand_session.h) as a hostile client whose end record lies about the length.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include "crypto/checksum.h"
#include "proto/end_record.h"
#include "proto/messages.h"
#include "tests/hand_session.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

using Clock = std::chrono::steady_clock;

// What the reference tool (xxh128sum, sha256sum) prints for a file.
std::string reference_hex(const std::string& tool, const fs::path& file) {
  ProcResult r = run_process({"/usr/bin/" + tool, file.string()}, {}, 60);
  if (r.exit_code != 0) return "(" + tool + " failed: " + r.describe() + ")";
  return r.out.substr(0, r.out.find(' '));
}

std::string quoted(const fs::path& p) { return "'" + p.string() + "'"; }

// The server drops a session after 2 s without a record: a producer that pauses longer shows
// that the client keeps the session alive while it waits for input.
class SendStdin : public ServerTest {
 protected:
  std::vector<std::string> server_args() const override { return {"--timeout", "2"}; }

  // `producer | aesxfer send - 127.0.0.1:DEST -P PORT --timeout 20 ARGS`.
  ProcResult send_from(const std::string& producer, const std::string& dest, const std::string& args = "") {
    const std::string cmd = producer + " | " + quoted(AESXFER_BINARY) + " send - 127.0.0.1:" + dest + " -P " +
                            std::to_string(server->port()) + " --timeout 20 " + args;
    return run_process({"/bin/sh", "-c", cmd}, {{"AESXFER_HOME", ws.home.string()}}, 60);
  }
};

// The writer sends its first 300000 bytes, then waits, pipe open, until the server's temporary
// file holds them all (the old client spooled standard input to EOF before it even connected, so
// this never happened), then waits 3 s more (longer than the server's idle timeout) and sends the
// rest. The file, the --json checksum and the server's log agree with the bytes.
TEST_F(SendStdin, APipeStreamsAsItComesWithoutSpooling) {
  const fs::path src = ws.local / "src", marker = ws.local / "go";
  const uint64_t first = 300000, size = 4 * 262144 + 12345;
  write_random_file(src, size, 41);
  const std::string producer = "{ head -c " + std::to_string(first) + " " + quoted(src) + "; while [ ! -e " +
                               quoted(marker) + " ]; do sleep 0.05; done; tail -c +" +
                               std::to_string(first + 1) + " " + quoted(src) + "; }";
  ProcResult r;
  std::thread sender([&] { r = send_from(producer, "piped.bin", "--json"); });
  // Watch the server's temporary file while the writer holds the pipe open.
  uint64_t seen = 0;
  for (auto until = Clock::now() + std::chrono::seconds(20); Clock::now() < until && seen < first;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (const auto& t : temp_debris(ws.root)) {
      std::error_code ec;
      const auto n = fs::file_size(t, ec);
      if (!ec && n > seen) seen = n;
    }
  }
  EXPECT_EQ(seen, first) << "the server had not received the first bytes while the pipe was still open";
  std::this_thread::sleep_for(std::chrono::seconds(3));
  write_text_file(marker, "");
  sender.join();
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(sha256_file(ws.root / "piped.bin"), sha256_file(src));
  auto j = parse_flat_json(r.out);
  ASSERT_TRUE(j) << r.out;
  EXPECT_EQ((*j)["bytes"], std::to_string(size));
  EXPECT_EQ((*j)["file"], "-");
  EXPECT_EQ((*j)["checksum.alg"], "xxh128");
  EXPECT_EQ((*j)["checksum.hex"], reference_hex("xxh128sum", src));
  EXPECT_TRUE(server->wait_for_log("op=put file=\"piped.bin\" bytes=" + std::to_string(size)))
      << server->log();
  EXPECT_TRUE(temp_debris(ws.root).empty());
}

TEST_F(SendStdin, ChecksumsEqualTheReferenceToolsAndEmptyInputIsAnEmptyFile) {
  const fs::path src = ws.local / "src";
  write_random_file(src, 3 * 262144 + 777, 42);
  ProcResult r = send_from("cat " + quoted(src), "sha.bin", "--json --checksum sha256 --record-size 64K");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto j = parse_flat_json(r.out);
  ASSERT_TRUE(j) << r.out;
  EXPECT_EQ((*j)["checksum.alg"], "sha256");
  EXPECT_EQ((*j)["checksum.hex"], reference_hex("sha256sum", src));
  EXPECT_EQ(sha256_file(ws.root / "sha.bin"), sha256_file(src));

  // Empty: from an empty pipe and from /dev/null, a file of 0 bytes with the empty input's checksum.
  const fs::path empty = ws.local / "empty";
  write_text_file(empty, "");
  for (const std::string producer : {"printf ''", "cat /dev/null"}) {
    r = send_from(producer, "empty.bin", "--json");
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    j = parse_flat_json(r.out);
    ASSERT_TRUE(j) << r.out;
    EXPECT_EQ((*j)["bytes"], "0");
    EXPECT_EQ((*j)["checksum.hex"], reference_hex("xxh128sum", empty));
    ASSERT_TRUE(fs::is_regular_file(ws.root / "empty.bin"));
    EXPECT_EQ(fs::file_size(ws.root / "empty.bin"), 0u);
    fs::remove(ws.root / "empty.bin");
  }
  r = run({"send", "-", "127.0.0.1:devnull.bin", "-q"});  // the harness's stdin is /dev/null
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(fs::file_size(ws.root / "devnull.bin"), 0u);
}

// --resume cannot apply (the input is read once): refused before connecting, in one line.
// --streams N: standard input goes over one connection, the other files over N.
TEST_F(SendStdin, ResumeIsRefusedStreamsFallBackToOneAndDashMixesWithFiles) {
  ProcResult r = send_from("echo hi", "r.bin", "--resume");
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("cannot be resumed"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(ws.root / "r.bin"));

  r = send_from("echo hi", "s.bin", "--streams 4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  auto j = parse_flat_json(r.out);
  ASSERT_TRUE(j) << r.out;
  EXPECT_EQ((*j)["streams"], "1");
  EXPECT_EQ(read_text_file(ws.root / "s.bin"), "hi\n");

  // A dash among other sources: each file under its name, standard input as "stdin".
  write_random_file(ws.local / "a", 5000, 1);
  write_random_file(ws.local / "b", 600000, 2);
  fs::create_directories(ws.root / "d");
  const std::string cmd = "printf 'from a pipe' | " + quoted(AESXFER_BINARY) + " send " +
                          quoted(ws.local / "a") + " - " + quoted(ws.local / "b") + " 127.0.0.1:d -P " +
                          std::to_string(server->port()) + " --timeout 20 -q";
  r = run_process({"/bin/sh", "-c", cmd}, {{"AESXFER_HOME", ws.home.string()}}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(read_text_file(ws.root / "d" / "stdin"), "from a pipe");
  EXPECT_EQ(sha256_file(ws.root / "d" / "a"), sha256_file(ws.local / "a"));
  EXPECT_EQ(sha256_file(ws.root / "d" / "b"), sha256_file(ws.local / "b"));
}

// `cat big | aesxfer send -` holds no more memory than sending the file itself: the client's peak
// RSS (VmHWM, sampled every 50 ms while it runs) for 128 MiB from a pipe is within 16 MiB of its
// peak for the same bytes from a file (a client that kept the input in memory would be 128 MiB
// over). Relative, so that a sanitizer's own memory counts on both sides.
TEST_F(SendStdin, MemoryStaysBoundedWhateverTheInputSize) {
  const uint64_t size = 128ull << 20;
  const fs::path zeros = ws.local / "zeros";
  {
    ProcResult w = run_process(
        {"/bin/sh", "-c", "head -c " + std::to_string(size) + " /dev/zero > " + quoted(zeros)}, {}, 60);
    ASSERT_EQ(w.exit_code, 0) << w.describe();
  }
  auto peak_kb = [&](const std::string& how) {
    const std::string cmd = how + " & pid=$!; hwm=0; while v=$(awk '/^VmHWM/ {print $2}' /proc/$pid/status " +
                            "2>/dev/null) && [ -n \"$v\" ]; do hwm=$v; sleep 0.05; done; wait $pid; " +
                            "echo \"rc=$? hwm=$hwm\"";
    ProcResult r = run_process({"/bin/sh", "-c", cmd}, {{"AESXFER_HOME", ws.home.string()}}, 300);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    EXPECT_NE(r.out.find("rc=0 "), std::string::npos) << r.describe();
    const size_t at = r.out.find("hwm=");
    return at == std::string::npos ? -1L : std::stol(r.out.substr(at + 4));
  };
  auto send = [&](const std::string& src) {
    return quoted(AESXFER_BINARY) + " send " + src + " 127.0.0.1:/dev/null -q --timeout 60 -P " +
           std::to_string(server->port());
  };
  const long from_file = peak_kb(send(quoted(zeros)));
  const long from_pipe = peak_kb("cat " + quoted(zeros) + " | " + send("-"));
  std::printf("[stdin] client peak RSS: %ld kB from a file, %ld kB from a pipe (%llu MiB)\n", from_file,
              from_pipe, (unsigned long long)(size >> 20));
  ASSERT_GT(from_file, 0);
  ASSERT_GT(from_pipe, 0);
  EXPECT_LT(from_pipe, from_file + 16 * 1024) << "a pipe costs more memory than a file";
}

// ---- a hostile client, by hand ----------------------------------------------------------------

class UnsizedPutHostile : public ServerTest {
 protected:
  fs::path id = ws.home / "id_ed25519";

  static proto::Message unsized_put(const std::string& path) {
    proto::Message m = make_request(proto::Op::put, path, "stdin");
    m.flags = proto::kFlagUnsized;
    return m;
  }
  static void send_data(HandSession& s, const std::string& bytes) {
    std::memcpy(s.conn().payload_buffer(), bytes.data(), bytes.size());
    s.conn().send_record(proto::RecordType::data, 0, bytes.size());
  }
  static void send_end(HandSession& s, uint64_t length, const std::string& digest_of) {
    crypto::FileChecksum h(s.conn().checksum());
    h.update(reinterpret_cast<const uint8_t*>(digest_of.data()), digest_of.size());
    proto::EndRecord end{length, h.final()};
    s.conn().send_record(proto::RecordType::end, proto::kFlagFinal,
                         proto::encode_end(s.conn().payload_buffer(), end));
  }
};

// The end record's length must be the bytes that came: more or fewer is an integrity failure,
// and nothing is left (no file, no temporary file). The true length goes through.
TEST_F(UnsizedPutHostile, EndRecordLengthDisagreeingWithTheDataIsRefusedAndLeavesNothing) {
  const std::string data = "twelve bytes";
  for (uint64_t claimed : {data.size() + 1, data.size() - 1, uint64_t(0)}) {
    HandSession s(server->port(), id);
    ASSERT_TRUE(s.welcome_ok);
    proto::Message resp = s.ask(unsized_put("lie.bin"));
    ASSERT_EQ(resp.status, proto::Status::ok) << resp.text;
    send_data(s, data.substr(0, 5));
    send_data(s, data.substr(5));
    send_end(s, claimed, data);
    proto::Message res = s.conn().recv_message("the result");
    EXPECT_EQ(res.type, proto::MsgType::result);
    EXPECT_EQ(res.status, proto::Status::integrity) << res.text;
    EXPECT_NE(res.text.find("end record says " + std::to_string(claimed) + " bytes, 12 arrived"),
              std::string::npos)
        << res.text;
    EXPECT_FALSE(fs::exists(ws.root / "lie.bin")) << claimed;
    EXPECT_TRUE(temp_debris(ws.root).empty()) << claimed;
  }
  HandSession s(server->port(), id);
  ASSERT_TRUE(s.welcome_ok);
  ASSERT_EQ(s.ask(unsized_put("true.bin")).status, proto::Status::ok);
  send_data(s, data);
  send_end(s, data.size(), data);
  proto::Message res = s.conn().recv_message("the result");
  EXPECT_EQ(res.status, proto::Status::ok) << res.text;
  EXPECT_EQ(read_text_file(ws.root / "true.bin"), data);
  EXPECT_TRUE(server->wait_for_log("op=put file=\"true.bin\" bytes=12 ")) << server->log();
}

// A connection that drops mid-stream leaves nothing that looks complete.
TEST_F(UnsizedPutHostile, ConnectionDroppedMidStreamLeavesNothing) {
  {
    HandSession s(server->port(), id);
    ASSERT_TRUE(s.welcome_ok);
    ASSERT_EQ(s.ask(unsized_put("cut.bin")).status, proto::Status::ok);
    send_data(s, std::string(100000, 'c'));
    for (auto until = Clock::now() + std::chrono::seconds(10);
         Clock::now() < until && temp_debris(ws.root).empty();)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_FALSE(temp_debris(ws.root).empty()) << "the server writes as the data comes";
  }  // closed without an end record
  EXPECT_TRUE(server->wait_for_log("op=put file=\"cut.bin\"")) << server->log();
  EXPECT_FALSE(fs::exists(ws.root / "cut.bin"));
  EXPECT_TRUE(temp_debris(ws.root).empty());
}

// The decoder's bounds, live: an unsized put with a size, or with resume, range or ahead, is a
// malformed request that ends the session; nothing is created.
TEST_F(UnsizedPutHostile, UnsizedWithASizeOrAnotherFlagIsAMalformedRequest) {
  struct Case {
    uint64_t size;
    uint8_t flags;
  } cases[] = {{5, 0}, {0, proto::kFlagResume}, {0, proto::kFlagRange}, {0, proto::kFlagAhead}};
  for (const Case& c : cases) {
    HandSession s(server->port(), id);
    ASSERT_TRUE(s.welcome_ok);
    proto::Message m = unsized_put("bad.bin");
    m.size = c.size;
    m.flags |= c.flags;
    m.nparts = 1;
    s.conn().send_message(m);
    EXPECT_THROW(s.conn().recv_message("the answer"), proto::Failure) << int(c.flags);
    EXPECT_FALSE(fs::exists(ws.root / "bad.bin"));
  }
  EXPECT_TRUE(server->wait_for_log("malformed control message")) << server->log();
  EXPECT_TRUE(temp_debris(ws.root).empty());
}

}  // namespace
}  // namespace aesxfer::test
