// What the whole-file checksum costs the transfer, measured rather than extrapolated.
//
// Runs the product's data plane (net::send_stream / net::recv_stream, the same pipelines, record
// layer and batch crypto as `aesxfer send`) between two threads of this process over a real
// 127.0.0.1 TCP connection, from a page-cached file to the /dev/null sink, once with each file
// checksum the handshake can agree on (sha256, xxh128, none). Keys are random; there is no
// handshake, so the figures are the data plane alone. The variants alternate, --runs times each;
// medians (min-max) are printed with the CPU time of the process per GB, and the ratio of each to
// sha256.
//
//   pipeline_floor [--size-mib 2048] [--runs 3] [-c aes128-gcm,aes128-cbc,none] [--record-size BYTES]
//                  [--pipeline auto|threads|inline]
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "crypto/suite.h"
#include "files/unique_fd.h"
#include "net/conn.h"
#include "net/transfer.h"
#include "proto/handshake.h"

namespace {

namespace net = aesxfer::net;
namespace cr = aesxfer::crypto;
namespace proto = aesxfer::proto;
namespace files = aesxfer::files;
using Clock = std::chrono::steady_clock;

double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// A connected 127.0.0.1 TCP pair, tuned like the product's sockets.
std::pair<int, int> tcp_pair() {
  const files::UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));  // closed on return
  const int l = listener.get();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(l, 1) != 0 ||
      ::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::perror("listen");
    std::exit(1);
  }
  int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    std::perror("connect");
    std::exit(1);
  }
  int s = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
  net::tune_socket(c);
  net::tune_socket(s);
  return {c, s};
}

struct Run {
  double mbps, cpu_per_gb;
};

Run one(const std::string& file, uint64_t size, const cr::CipherDesc* cipher, const cr::MacDesc* mac,
        cr::ChecksumAlg sum, uint32_t record_size, net::StreamOptions::Pipeline pipeline) {
  proto::SessionKeys keys;
  keys.cipher = cipher;
  keys.mac = mac;
  keys.checksum = sum;
  keys.record_size = record_size;
  std::random_device rd;
  for (auto* d : {&keys.c2s, &keys.s2c}) {
    for (auto& b : d->enc) b = uint8_t(rd());
    for (auto& b : d->mac) b = uint8_t(rd());
    for (auto& b : d->iv) b = uint8_t(rd());
  }
  auto [cfd, sfd] = tcp_pair();
  net::Conn client(cfd, std::chrono::milliseconds(30000), "client");
  net::Conn server(sfd, std::chrono::milliseconds(30000), "server");
  client.start_records(keys, true);
  server.start_records(keys, false);
  const files::UniqueFd in(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  const int fd = in.get();
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  net::StreamOptions opt;
  opt.pipeline = pipeline;
  const double c0 = cpu_seconds();
  const auto t0 = Clock::now();
  std::thread rx([&] { net::recv_stream(server, -1, size, nullptr, opt); });
  net::send_stream(client, fd, size, nullptr, opt);
  rx.join();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_seconds() - c0;
  return {double(size) / secs / 1e6, cpu / (double(size) / 1e9)};
}

struct Stats {
  double med, lo, hi;
};
Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t size_mib = 2048;
  int runs = 3;
  std::string list = "aes128-cbc,aes128-gcm,none";
  uint32_t record_size = uint32_t(proto::kDefaultPayload);
  auto pipeline = net::StreamOptions::Pipeline::auto_choice;
  std::string pipeline_name = "auto";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--size-mib" && i + 1 < argc)
      size_mib = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--runs" && i + 1 < argc)
      runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "-c" && i + 1 < argc)
      list = argv[++i];
    else if (a == "--record-size" && i + 1 < argc)
      record_size = uint32_t(std::strtoul(argv[++i], nullptr, 10));
    else if (a == "--pipeline" && i + 1 < argc) {
      pipeline_name = argv[++i];
      pipeline = pipeline_name == "threads"  ? net::StreamOptions::Pipeline::threads
                 : pipeline_name == "inline" ? net::StreamOptions::Pipeline::inline_stage
                                             : net::StreamOptions::Pipeline::auto_choice;
    } else {
      std::fprintf(stderr,
                   "usage: pipeline_floor [--size-mib N] [--runs R] [-c CIPHERS] [--record-size BYTES] "
                   "[--pipeline auto|threads|inline]\n");
      return 2;
    }
  }
  const uint64_t size = size_mib << 20;
  char tmpl[] = "/tmp/aesxfer-floor-XXXXXX";
  files::UniqueFd out(::mkstemp(tmpl));
  const int fd = out.get();
  if (fd < 0) {
    std::perror("mkstemp");
    return 1;
  }
  std::vector<uint8_t> chunk(1 << 20);
  std::mt19937_64 rng(42);
  for (auto& b : chunk) b = uint8_t(rng());
  for (uint64_t i = 0; i < size_mib; ++i)
    if (::write(fd, chunk.data(), chunk.size()) != ssize_t(chunk.size())) {
      std::perror("write");
      return 1;
    }
  out.reset();
  std::string file = tmpl;
  {  // into the page cache
    const files::UniqueFd r(::open(tmpl, O_RDONLY));
    while (::read(r.get(), chunk.data(), chunk.size()) > 0) {
    }
  }

  std::printf(
      "data plane only (send_stream -> 127.0.0.1 TCP -> recv_stream to the sink), %llu MiB, %d runs each, "
      "records of %u bytes, pipeline %s, %u CPUs\n",
      (unsigned long long)size_mib, runs, record_size, pipeline_name.c_str(),
      std::thread::hardware_concurrency());
  const cr::ChecksumAlg algs[] = {cr::ChecksumAlg::sha256, cr::ChecksumAlg::xxh128, cr::ChecksumAlg::none};
  std::printf("%-28s %28s %28s %28s %9s %9s\n", "cipher", "checksum sha256 MB/s", "xxh128 MB/s", "none MB/s",
              "xxh/sha", "none/sha");
  std::stringstream names(list);
  for (std::string name; std::getline(names, name, ',');) {
    const cr::CipherDesc* c = cr::find_cipher(name);
    if (!c) {
      std::fprintf(stderr, "unknown cipher %s\n", name.c_str());
      continue;
    }
    const cr::MacDesc* m = cr::find_mac(c->aead || c->mode == cr::CipherMode::none ? "none" : "hmac-sha256");
    std::vector<double> mbps[3], cpu[3];
    for (int r = 0; r < runs; ++r)
      for (int k = 0; k < 3; ++k) {
        Run x = one(file, size, c, m, algs[k], record_size, pipeline);
        mbps[k].push_back(x.mbps);
        cpu[k].push_back(x.cpu_per_gb);
      }
    std::string label = std::string(c->name) + (m->tag_len ? " + " + std::string(m->name) : "");
    char cell[3][64];
    Stats st[3];
    for (int k = 0; k < 3; ++k) {
      st[k] = stats(mbps[k]);
      std::snprintf(cell[k], sizeof cell[k], "%.1f (%.0f-%.0f) %.2fs/GB", st[k].med, st[k].lo, st[k].hi,
                    stats(cpu[k]).med);
    }
    std::printf("%-28s %28s %28s %28s %9.2f %9.2f\n", label.c_str(), cell[0], cell[1], cell[2],
                st[1].med / st[0].med, st[2].med / st[0].med);
    std::fflush(stdout);
  }
  ::unlink(tmpl);
  return 0;
}
