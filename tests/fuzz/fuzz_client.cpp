// libFuzzer target: the client's handling of a server's answers. An in-process fake server does
// the real handshake on loopback, sends its Welcome, then plays the fuzz input as its records
// (control, data and end records, sealed under the session's keys, so that mutations get past
// the record layer), closes its side and drains the client's. The client meanwhile runs one of
// recv (a file), recv -r (listing, then pipelined gets), send -r (pipelined puts) or
// send -r --resume (pipelined probes) against it, as the CLI does.
//
// Besides the sanitizers, the client's promises are checked after every run (docs/SECURITY.md):
// nothing is written outside the destination; no temporary file is left behind; a received
// file exists under its name only if the client reported it received and verified.
//
// Input: byte 0 = scenario (mod 4), then the server's records, each as
//   [kind] [flags] [length, 2 bytes little-endian] [payload]
// kind mod 3: 0 control, 1 data, 2 end; with bit 7 of kind the flags byte goes on the wire as
// given, else the flags a well-behaved server sets (kFlagFinal on an end record, 0 otherwise).
//
// FUZZ_CLIENT_SEEDS=DIR writes the seed corpus (answers a real server would give) to DIR and
// exits; FUZZ_CLIENT_VERBOSE=1 prints what each run ended with.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "client/recv_tree.h"
#include "client/send_tree.h"
#include "crypto/checksum.h"
#include "crypto/suite.h"
#include "files/atomic_file.h"
#include "net/conn.h"
#include "proto/end_record.h"
#include "proto/handshake.h"
#include "proto/listing.h"
#include "proto/messages.h"
#include "proto/ops.h"
#include "tests/fake_server.h"

using namespace aesxfer;
namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

namespace {

enum Scenario : uint8_t { kRecv = 0, kRecvTree = 1, kSendTree = 2, kSendTreeResume = 3 };

bool verbose() {
  static const bool v = std::getenv("FUZZ_CLIENT_VERBOSE") != nullptr;
  return v;
}

// ---- The fake server ---------------------------------------------------------------------------

// Plays the script: every record it holds, in order, then closes its side.
void play(net::Conn& c, const uint8_t* s, size_t n) {
  size_t at = 0;
  while (n - at >= 4) {
    const uint8_t kind = s[at], raw_flags = s[at + 1];
    size_t len = size_t(s[at + 2]) | size_t(s[at + 3]) << 8;
    at += 4;
    const proto::RecordType type = kind % 3 == 0   ? proto::RecordType::control
                                   : kind % 3 == 1 ? proto::RecordType::data
                                                   : proto::RecordType::end;
    const size_t cap = type == proto::RecordType::control ? proto::kMaxControl : c.record_size();
    len = std::min({len, n - at, cap});
    const uint8_t flags = (kind & 0x80) ? raw_flags : type == proto::RecordType::end ? proto::kFlagFinal : 0;
    std::memcpy(c.payload_buffer(), s + at, len);
    c.send_record(type, flags, len);
    at += len;
  }
  c.flush();
}

// Reads and drops what the client still sends, until it closes (or 5 s pass).
void drain(int fd) {
  uint8_t buf[65536];
  for (int waited = 0; waited < 5000;) {
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, 100);
    if (r == 0) {
      waited += 100;
      continue;
    }
    if (r < 0 || ::read(fd, buf, sizeof buf) <= 0) return;
  }
}

class Server {
 public:
  Server() {
    lfd_ = test::listen_loopback(port_);
    if (lfd_ < 0) std::abort();
    thread_ = std::thread([this] { loop(); });
    thread_.detach();  // lives as long as the process
  }
  uint16_t port() const { return port_; }

  // The next session plays this script; wait() returns once it is over.
  void expect(const uint8_t* s, size_t n) {
    std::lock_guard<std::mutex> g(mu_);
    script_.assign(s, s + n);
    done_ = false;
  }
  // (A client that never connected leaves no session to wait for: 10 s, then on.)
  void wait() {
    std::unique_lock<std::mutex> g(mu_);
    cv_.wait_for(g, std::chrono::seconds(10), [&] { return done_; });
  }

 private:
  void loop() {
    static const proto::Identity host = proto::Identity::generate();
    for (;;) {
      const int fd = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      const int one = 1;  // as the server's accept loop does: no Nagle delay on small records
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      Bytes script;
      {
        std::lock_guard<std::mutex> g(mu_);
        script = script_;
      }
      try {
        net::Conn c(fd, std::chrono::milliseconds(5000), "client");
        if (test::start_fake_session(c, host)) {
          play(c, script.data(), script.size());
          ::shutdown(c.fd(), SHUT_WR);
          drain(c.fd());
        }
      } catch (const std::exception&) {
      }
      {
        std::lock_guard<std::mutex> g(mu_);
        done_ = true;
      }
      cv_.notify_all();
    }
  }
  int lfd_ = -1;
  uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  Bytes script_;
  bool done_ = true;
};

// ---- The client's side -------------------------------------------------------------------------

struct World {
  fs::path root, home, src, dest;
  Server server;
  World() {
    char tmpl[] = "/tmp/aesxfer-fuzz-client-XXXXXX";
    if (!::mkdtemp(tmpl)) std::abort();
    root = tmpl;
    home = root / "home";
    src = root / "src";
    dest = root / "dest";
    fs::create_directories(home);
    fs::permissions(home, fs::perms::owner_all);
    fs::create_directories(src / "sub");
    fs::create_directories(dest);
    std::ofstream(src / "a.txt") << "alpha\n";
    std::ofstream(src / "sub" / "b.bin") << std::string(5000, 'b');
    std::ofstream(src / "sub" / "c");
  }
};

World& world() {
  static World* w = new World;  // never destroyed: the server thread outlives every run
  return *w;
}

client::ClientOptions options(bool resume) {
  client::ClientOptions o;
  o.host = "127.0.0.1";
  o.port = world().server.port();
  o.cipher = crypto::find_cipher("aes128-gcm");
  o.mac = crypto::find_mac("hmac-sha256");
  o.home = world().home;
  o.timeout = std::chrono::milliseconds(3000);
  o.streams = 1;
  o.resume = resume;
  o.congestion = "system";
  return o;
}

// What the client said it received and verified (local paths).
using Verified = std::set<fs::path>;

void run_recv(client::Client& c, Verified& ok) {
  const fs::path to = world().dest / "out";
  const client::FileResult r = c.get("f", to, 0, nullptr, nullptr);
  if (r.verified) ok.insert(to);
}

void run_recv_tree(client::Client& c, Verified& ok) {
  const fs::path to = world().dest / "tree";
  auto fetch_one = [&](const std::string& from, const fs::path& local, uint64_t size, int dirfd) {
    const client::FileResult r = c.fetch(from, local, 0, nullptr, nullptr, size, dirfd);
    if (r.verified) ok.insert(local);
  };
  auto note = [](const std::string& line) {
    if (verbose()) std::fprintf(stderr, "note: %s\n", line.c_str());
  };
  auto pipelined = [&](const std::string&, const fs::path& local, const client::FileResult* r,
                       const proto::Failure* f) {
    if (r && r->verified) ok.insert(local);
    if (f && verbose()) std::fprintf(stderr, "file failed: %s\n", f->what());
  };
  client::recv_tree(c, "t", to, false, fetch_one, note, pipelined);
}

void run_send_tree(client::Client& c) {
  client::TreeSender::Hooks h;
  h.send_one = [&](const fs::path& local, int fd, const std::string& to) {
    try {
      c.put(local, to, nullptr, nullptr, "", fd);
      return true;
    } catch (const proto::Failure&) {
      return false;
    }
  };
  h.verdict = [](const std::string&, const client::FileResult*, const proto::Failure*) {};
  h.up_to_date = [](const client::FileResult&) {};
  h.failed = [](const proto::Failure&) {};
  h.note = [](const std::string&) {};
  client::TreeSender s(c, h, false);
  if (s.send_tree(world().src, "dest")) s.finish();
}

// Every regular file under dir, relative paths.
void files_under(const fs::path& dir, std::vector<fs::path>& out) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec))
    if (!it->is_directory(ec)) out.push_back(it->path());
}

// The promises, checked after every run; then the destination is emptied for the next.
void check_and_clean(const Verified& ok) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(world().root, ec)) {
    const std::string name = e.path().filename().string();
    if (name != "home" && name != "src" && name != "dest") __builtin_trap();  // written outside dest
  }
  std::vector<fs::path> files;
  files_under(world().dest, files);
  for (const fs::path& f : files) {
    if (files::is_temp_name(f.filename().string())) __builtin_trap();  // temporary debris
    if (!ok.count(f) && !files::is_partial_name(f.filename().string()))
      __builtin_trap();  // a file that looks complete but was never verified
  }
  fs::remove_all(world().dest, ec);
  fs::create_directories(world().dest);
}

}  // namespace

// ---- Seeds: answers a well-behaved server gives -----------------------------------------------

namespace {

struct ScriptWriter {
  Bytes out;
  void record(uint8_t kind, const Bytes& payload) {
    out.push_back(kind);
    out.push_back(0);
    out.push_back(uint8_t(payload.size()));
    out.push_back(uint8_t(payload.size() >> 8));
    out.insert(out.end(), payload.begin(), payload.end());
  }
  void message(const proto::Message& m) {
    Bytes b;
    proto::encode(m, b);
    record(0, b);
  }
  // Response ok for a file of `content`, its data and its end record.
  void file(const std::string& content, bool tagged = false, uint32_t tag = 0) {
    proto::Message ok = test::response(proto::Status::ok);
    ok.size = content.size();
    ok.mode = 0644;
    ok.mtime = 1000000000;
    ok.tagged = tagged;
    ok.tag = tag;
    message(ok);
    if (!content.empty()) record(1, Bytes(content.begin(), content.end()));
    crypto::FileChecksum sum;
    sum.update(content.data(), content.size());
    proto::EndRecord e{content.size(), sum.final()};
    Bytes end(proto::kMaxEndPayload);
    end.resize(proto::encode_end(end.data(), e));
    record(2, end);
  }
  void answer(proto::Status st, const std::string& text = "", bool tagged = false, uint32_t tag = 0,
              uint64_t size = 0) {
    proto::Message m = test::response(st, text);
    m.tagged = tagged;
    m.tag = tag;
    m.size = size;
    message(m);
  }
  void result(proto::Status st, bool tagged, uint32_t tag) {
    proto::Message m;
    m.type = proto::MsgType::result;
    m.status = st;
    m.tagged = tagged;
    m.tag = tag;
    message(m);
  }
};

void write_seed(const fs::path& dir, const std::string& name, uint8_t scenario, const Bytes& script) {
  std::ofstream f(dir / name, std::ios::binary);
  f.put(char(scenario));
  f.write(reinterpret_cast<const char*>(script.data()), std::streamsize(script.size()));
}

void make_seeds(const fs::path& dir) {
  fs::create_directories(dir);
  {  // recv: a file, an empty file, a refusal
    ScriptWriter w;
    w.file("hello, world\n");
    write_seed(dir, "recv-file", kRecv, w.out);
    ScriptWriter e;
    e.file("");
    write_seed(dir, "recv-empty", kRecv, e.out);
    ScriptWriter r;
    r.answer(proto::Status::not_found, "no such file");
    write_seed(dir, "recv-refused", kRecv, r.out);
  }
  {  // recv -r: a listing (a file, a directory, a file in it, a symlink), then two pipelined gets
    ScriptWriter w;
    proto::Message ok = test::response(proto::Status::ok, "t");
    ok.size = 4;
    ok.mode = 0755;
    ok.mtime = 1000000000;
    w.message(ok);
    proto::ListPage p;
    p.last = true;
    p.entries = {{proto::EntryType::file, "a", 3, 0644, 1000000000},
                 {proto::EntryType::dir, "d", 0, 0755, 1000000000},
                 {proto::EntryType::file, "d/b", 4, 0600, 1000000000},
                 {proto::EntryType::symlink, "l", 0, 0777, 1000000000}};
    Bytes page;
    proto::encode_list_page(p, page);
    w.record(0, page);
    w.file("abc", true, 0);
    w.file("bcde", true, 1);
    write_seed(dir, "recv-tree", kRecvTree, w.out);
  }
  {  // send -r: the top's mkdir answered with where the tree goes, then the pipelined answers in the
     // order of the local tree (a.txt, sub, sub/b.bin, sub/c): a put's Response and Result, a mkdir's
     // Response
    ScriptWriter w;
    w.answer(proto::Status::ok, "dest/src");
    for (uint32_t tag = 0; tag < 4; ++tag) {
      w.answer(proto::Status::ok, "", true, tag);
      if (tag != 1) w.result(proto::Status::ok, true, tag);
    }
    write_seed(dir, "send-tree", kSendTree, w.out);
    write_seed(dir, "send-tree-resume", kSendTreeResume, w.out);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* dir = std::getenv("FUZZ_CLIENT_SEEDS")) {
    make_seeds(dir);
    std::exit(0);
  }
  ::setenv("AESXFER_HOME", world().home.c_str(), 1);
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(world().root, ec);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t scenario = data[0] % 4;
  World& w = world();
  w.server.expect(data + 1, size - 1);
  Verified ok;
  try {
    client::Client c(options(scenario == kSendTreeResume));
    switch (scenario) {
      case kRecv:
        run_recv(c, ok);
        break;
      case kRecvTree:
        run_recv_tree(c, ok);
        break;
      default:
        run_send_tree(c);
        break;
    }
    c.bye();
    if (verbose()) std::fprintf(stderr, "scenario %d: completed\n", scenario);
  } catch (const std::exception& e) {
    if (verbose()) std::fprintf(stderr, "scenario %d: %s\n", scenario, e.what());
  }
  w.server.wait();
  check_and_clean(ok);
  return 0;
}
