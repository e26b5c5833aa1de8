// aesxfer serve, keygen and authorize: the server and the keys.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/ip/address.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "app/cli.h"
#include "app/cli_checks.h"
#include "crypto/checksum.h"
#include "crypto/suite.h"
#include "files/guarded_path.h"
#include "files/io.h"
#include "files/keystore.h"
#include "files/unique_fd.h"
#include "net/congestion.h"
#include "proto/failure.h"
#include "proto/handshake.h"
#include "server/server.h"

namespace aesxfer::app {

namespace fs = std::filesystem;

namespace {

struct ServeArgs {
  server::ServerOptions so;
  std::string listen_addr, root = ".", port_file, auth_keys;
  double timeout = 30, handshake_timeout = 10, partial_days = 7;
  bool quiet = false;
  std::string max_startups, netblock;
  std::vector<std::string> checksums;
  uint64_t max_record = proto::kMaxRecordSize;
};

// An address that is not one is a usage error; HOST:PORT, as sshd's ListenAddress takes it, is
// told where the port goes (an eighteenth re-attack, N8). "" when `listen` is fine.
std::string listen_problem(const std::string& listen) {
  boost::system::error_code ec;
  if (listen.empty() || (boost::asio::ip::make_address(listen, ec), !ec)) return "";
  const size_t colon = listen.rfind(':');
  const bool port_given = colon != std::string::npos && colon + 1 < listen.size() &&
                          listen.find_first_not_of("0123456789", colon + 1) == std::string::npos;
  std::string addr = listen.substr(0, colon);
  if (addr.size() > 2 && addr.front() == '[' && addr.back() == ']') addr = addr.substr(1, addr.size() - 2);
  return "serve: --listen " + proto::printable(listen) + ": not an IP address" +
         (port_given ? " (the port goes in -P: --listen " + proto::printable(addr) + " -P " +
                           listen.substr(colon + 1) + ")"
                     : std::string());
}

int cmd_serve(ServeArgs& a) {
  server::ServerOptions& so = a.so;
  so.listen = a.listen_addr;
  so.root = a.root;
  so.home = files::aesxfer_home();
  so.port_file = a.port_file;
  so.authorized_keys = a.auth_keys;
  so.timeout = std::chrono::milliseconds(int64_t(a.timeout * 1000));
  so.handshake_timeout = std::chrono::milliseconds(int64_t(a.handshake_timeout * 1000));
  so.partial_max_age = std::chrono::seconds(int64_t(a.partial_days * 86400));
  so.log = a.quiet ? nullptr : &std::cerr;
  so.policy.max_record_size = uint32_t(a.max_record);
  if (!a.max_startups.empty())
    if (std::string why = server::parse_max_startups(a.max_startups, so); !why.empty()) {
      die_line("serve: --max-startups: " + why);
      return kExitUsage;
    }
  if (!a.netblock.empty())
    if (std::string why = server::parse_netblock(a.netblock, so); !why.empty()) {
      die_line("serve: --per-source-netblock: " + why);
      return kExitUsage;
    }
  if (!a.checksums.empty()) {
    so.policy.checksums = 0;
    for (const auto& name : a.checksums) {
      crypto::ChecksumAlg alg;
      if (!crypto::find_checksum(name, alg)) {
        die_line("serve: unknown checksum '" + proto::printable(name) +
                 "' in --checksums (known: " + crypto::checksum_names() + ")");
        return kExitUsage;
      }
      so.policy.checksums |= 1u << uint8_t(alg);
    }
  }
  if (const std::string why = listen_problem(a.listen_addr); !why.empty()) {
    die_line(why);
    return kExitUsage;
  }
  // A root that is not there is a usage error too, named as the option (a twentieth re-attack,
  // N8: "root /x: No such file or directory", exit 1). The server opens it again to serve it.
  if (const files::UniqueFd d(::open(a.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)); !d) {
    die_line("serve: --root " + proto::printable(a.root) + ": " + files::errno_text(errno));
    return kExitUsage;
  }
  // The port file's directory is checked before the server listens, so that a wrong path fails
  // before the log says "listening" (a nineteenth re-attack, N5).
  if (const std::string why = a.port_file.empty() ? "" : unwritable(a.port_file); !why.empty()) {
    die_line("serve: --port-file " + why);
    return kExitUsage;
  }
  // Usage errors as --checksums' (an eighteenth re-attack, N5: the server's constructor threw them,
  // exit 1, without "serve:").
  for (const auto& name : so.ciphers)
    if (!crypto::find_cipher(name)) {
      die_line("serve: unknown cipher '" + proto::printable(name) +
               "' in --ciphers (known: " + crypto::cipher_names() + ")");
      return kExitUsage;
    }
  for (const auto& name : so.macs)
    if (!crypto::find_mac(name)) {
      die_line("serve: unknown MAC '" + proto::printable(name) +
               "' in --macs (known: " + crypto::mac_names() + ")");
      return kExitUsage;
    }
  if (std::string why = net::check_congestion(so.congestion); !why.empty()) {
    die_line("serve: " + why);
    return kExitUsage;
  }
  server::Server server(so);
  server.run();
  return 0;
}

int cmd_keygen() {
  bool created = false;
  fs::path p = files::aesxfer_home() / "id_ed25519";
  auto id = files::load_or_create_identity(p, &created);
  // stdout: exactly the line a server's authorized_keys takes (its .pub file); the rest on stderr.
  std::string line = files::encode_public_key(id.pk) + " " + files::key_comment();
  std::ifstream pub(p.string() + ".pub");
  std::string on_disk;
  proto::PublicKey pk{};
  if (std::getline(pub, on_disk) && files::decode_public_key(on_disk, pk) && pk == id.pk) line = on_disk;
  std::fprintf(stderr, "%s %s (%s)\nAdd this line to the server's authorized_keys (%s there):\n",
               created ? "created" : "identity", proto::printable(p.string()).c_str(),
               proto::fingerprint(id.pk).c_str(), "$AESXFER_HOME/authorized_keys");
  std::printf("%s\n",
              proto::printable(line).c_str());  // a .pub line with control bytes is no key line anyway
  return 0;
}

// The first key line of .pub file `path` into `line`, or why not. Read as every small file aesxfer
// trusts is (files::read_trusted_text: no link of another user's but to what they own, and only a
// file of this user's or root's that no one else may write): the key it adds lets its owner in (a
// thirty-seventh re-attack, A6: another user's key swapped into the .pub of a home they could write to, or
// their link in /tmp, was added without a word).
namespace {
std::string read_key_file(const std::string& path, std::string& line) {
  using P = files::TrustedText::Problem;
  const files::TrustedText t = files::read_trusted_text(path, 64 << 10);
  switch (t.problem) {
    case P::none:
      break;
    case P::missing:
    case P::unreachable:
      return t.detail;
    case P::not_regular:
      return "not a regular file";
    case P::owner:
      return "it belongs to uid " + std::to_string(t.st.st_uid) + "; a key file must be yours (or root's)";
    case P::writable:
      return "writable by group or others: its key is not added";
    case P::too_large:
      return "larger than 64 KiB: not a .pub file";
  }
  std::istringstream in(t.text);
  line.clear();
  for (std::string l; std::getline(in, l);)
    if (!l.empty() && l[0] != '#') {
      line = l;
      break;
    }
  return "";
}
}  // namespace

int cmd_authorize(const std::string& what) {
  if (what.empty()) {
    die_line(
        "authorize: give the line aesxfer keygen printed, or its .pub file (aesxfer authorize KEYLINE|FILE)");
    return kExitUsage;
  }
  std::string line = what;
  std::error_code ec;
  struct stat st {};
  if (!fs::is_regular_file(what, ec) && what.find(' ') == std::string::npos) {
    // No key line (its type and key are apart): a file that is missing or not one (an eighteenth
    // re-attack, N7: "not a key line" for both).
    die_line("authorize: " + net::printable(what) + ": " +
             (::stat(what.c_str(), &st) != 0 ? files::errno_text(errno) : std::string("not a regular file")) +
             " (aesxfer authorize KEYLINE|FILE)");
    return kExitFail;
  }
  if (fs::is_regular_file(what, ec)) {  // a .pub file: its first key line
    if (const std::string why = read_key_file(what, line); !why.empty()) {
      die_line("authorize: " + net::printable(what) + ": " + why);
      return kExitFail;
    }
  }
  const fs::path file = files::aesxfer_home() / "authorized_keys";
  proto::PublicKey pk{};
  try {
    const auto r = files::authorize_key(file, line);
    files::decode_public_key(line, pk);
    std::printf("%s %s in %s\n",
                r == files::Authorize::added ? "added" : "already there:", proto::fingerprint(pk).c_str(),
                proto::printable(file.string()).c_str());
    return 0;
  } catch (const std::runtime_error& e) {
    die_line("authorize: " + net::printable(what.substr(0, 80)) + ": " + e.what());
    return kExitUsage;
  }
}

}  // namespace

// serve's bounds on what clients may take: sessions, unauthenticated connections, time, listings
// and the hashing done for probes.
static void add_serve_limits(CLI::App* serve, ServeArgs& args) {
  ServeArgs* a = &args;
  serve
      ->add_option("--max-sessions", a->so.max_sessions,
                   "Authenticated sessions at once; a client beyond them is told 'server busy' (default 64)")
      ->check(whole_number(1, 1000000))
      ->type_name("N");
  serve
      ->add_option("--max-startups", a->max_startups,
                   "Unauthenticated connections, as sshd's MaxStartups: from START on, drop new ones with "
                   "probability RATE% rising to 100% at FULL (default 10:30:100)")
      ->type_name("START:RATE:FULL");
  serve
      ->add_option("--per-source-max-startups", a->so.per_source_max_startups,
                   "Unauthenticated connections per source address, as sshd's PerSourceMaxStartups "
                   "(default: no limit)")
      ->check(whole_number(0, 1000000))
      ->type_name("N");
  serve
      ->add_option("--per-source-netblock", a->netblock,
                   "What one source is for --per-source-max-startups: the address masked to V4 (IPv4) or "
                   "V6 (IPv6) bits, as sshd's PerSourceNetBlockSize (default 32:64)")
      ->type_name("V4:V6");
  serve->add_option("--timeout", a->timeout, "Idle seconds before a session is dropped (default 30)")
      ->check(timeout_seconds())
      ->type_name("SECONDS");
  serve
      ->add_option("--handshake-timeout", a->handshake_timeout,
                   "Seconds a client has to complete the whole handshake (default 10)")
      ->check(timeout_seconds())
      ->type_name("SECONDS");
  serve
      ->add_option("--max-list", a->so.max_list_entries,
                   "Entries one recv -r listing may have (default 200000)")
      ->check(whole_number(1, int64_t(proto::kMaxListEntries)))
      ->type_name("N");
  serve
      ->add_option("--max-probe-hash", a->so.max_probe_hash,
                   "Bytes one session may have the server hash for send --resume probes and resumed "
                   "gets (default 64G; each file is hashed once per session; a client key's sessions share "
                   "as much again every 10 minutes)")
      ->transform(byte_size(0, uint64_t(1) << 60))
      ->type_name("SIZE");
  serve
      ->add_option("--max-list-memory", a->so.max_list_memory,
                   "Memory every recv -r listing in progress may hold together, until its pages are sent; "
                   "one more is refused as busy, 64K to 1T (default 256M)")
      ->transform(byte_size(uint64_t(64) << 10, uint64_t(1) << 40))
      ->type_name("SIZE");
  serve
      ->add_option("--max-buffer-memory", a->so.max_buffer_memory,
                   "Memory the record batches of every transfer may hold together; past it a transfer "
                   "seals fewer records at once, 16M to 1T (default 512M)")
      ->transform(byte_size(uint64_t(16) << 20, uint64_t(1) << 40))
      ->type_name("SIZE");
}

CommandRun setup_serve(CLI::App* serve, bool& no_aesni) {
  auto a = std::make_shared<ServeArgs>();
  serve->add_option("--listen", a->listen_addr, "Address to listen on (default: all, IPv6 and IPv4)")
      ->type_name("ADDRESS");
  serve->add_option("-P,--port", a->so.port, "Port (default 7227; 0 picks a free one)")
      ->check(whole_number(0, 65535, "a port number"))
      ->type_name("PORT");
  serve->add_option("--root", a->root, "Directory that files are read from and written to (default: .)")
      ->type_name("DIR");
  serve->add_option("--port-file", a->port_file, "Write the bound port to FILE once listening")
      ->type_name("FILE");
  serve
      ->add_option("--authorized-keys", a->auth_keys,
                   "Client keys to accept (default $AESXFER_HOME/authorized_keys)")
      ->type_name("FILE");
  serve
      ->add_option("--partial-max-age", a->partial_days,
                   "Days to keep partial files of interrupted --resume sends (default 7; 0 = for ever)")
      ->check(real_number(0, 36500, "days"))
      ->type_name("DAYS");
  add_serve_limits(serve, *a);
  serve
      ->add_option("--ciphers", a->so.ciphers,
                   "Ciphers clients may use, comma-separated (default: all; see --list-ciphers)")
      ->delimiter(',')
      ->type_name("LIST");
  serve
      ->add_option("--macs", a->so.macs,
                   "MACs clients may use with a non-AEAD cipher, comma-separated (default: all)")
      ->delimiter(',')
      ->type_name("LIST");
  serve->add_flag("-q,--quiet", a->quiet, "No log lines");
  serve->add_flag("--no-aesni", no_aesni, "Use the portable crypto code");
  serve
      ->add_option(
          "--congestion", a->so.congestion,
          "TCP congestion control for the data this side sends: auto (default: bbr where the kernel allows "
          "it, else the host default; -v says which and why), system (the host default) or a name")
      ->type_name("auto|system|NAME");
  serve
      ->add_option("--checksums", a->checksums,
                   "File checksums clients may choose, comma-separated (default: xxh128,sha256,none)")
      ->delimiter(',')
      ->type_name("LIST");
  serve
      ->add_option("--max-record-size", a->max_record,
                   "Largest record payload the server agrees to (default 1M)")
      ->transform(byte_size(proto::kMinRecordSize, proto::kMaxRecordSize))
      ->type_name("SIZE");
  return [a] { return cmd_serve(*a); };
}

CommandRun setup_keygen(CLI::App*, bool&) { return cmd_keygen; }

CommandRun setup_authorize(CLI::App* authorize, bool&) {
  auto what = std::make_shared<std::string>();
  authorize->add_option("key", *what, "The line aesxfer keygen printed, or a .pub file holding it")
      ->type_name("KEYLINE|FILE");  // its absence is said in cmd_authorize
  return [what] { return cmd_authorize(*what); };
}

}  // namespace aesxfer::app
