// aesxfer serve, keygen and authorize: the server and the keys.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "app/cli.h"
#include "crypto/checksum.h"
#include "files/keystore.h"
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
  std::vector<std::string> checksums;
  uint64_t max_record = proto::kMaxRecordSize;
};

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
  if (!a.checksums.empty()) {
    so.policy.checksums = 0;
    for (const auto& name : a.checksums) {
      crypto::ChecksumAlg alg;
      if (!crypto::find_checksum(name, alg)) {
        die_line("serve: unknown checksum '" + name + "' in --checksums (known: " + crypto::checksum_names() +
                 ")");
        return kExitUsage;
      }
      so.policy.checksums |= 1u << uint8_t(alg);
    }
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
               created ? "created" : "identity", p.c_str(), proto::fingerprint(id.pk).c_str(),
               "$AESXFER_HOME/authorized_keys");
  std::printf("%s\n", line.c_str());
  return 0;
}

int cmd_authorize(const std::string& what) {
  std::string line = what;
  std::error_code ec;
  if (fs::is_regular_file(what, ec)) {  // a .pub file: its first key line
    std::ifstream in(what);
    line.clear();
    for (std::string l; std::getline(in, l);)
      if (!l.empty() && l[0] != '#') {
        line = l;
        break;
      }
  }
  const fs::path file = files::aesxfer_home() / "authorized_keys";
  proto::PublicKey pk{};
  try {
    const auto r = files::authorize_key(file, line);
    files::decode_public_key(line, pk);
    std::printf("%s %s in %s\n",
                r == files::Authorize::added ? "added" : "already there:", proto::fingerprint(pk).c_str(),
                file.c_str());
    return 0;
  } catch (const std::runtime_error& e) {
    die_line("authorize: " + net::printable(what.substr(0, 80)) + ": " + e.what());
    return kExitUsage;
  }
}

}  // namespace

CommandRun setup_serve(CLI::App* serve, bool& no_aesni) {
  auto a = std::make_shared<ServeArgs>();
  serve->add_option("--listen", a->listen_addr, "Address to listen on (default: all, IPv6 and IPv4)");
  serve->add_option("-P,--port", a->so.port, "Port (default 7227; 0 picks a free one)")->type_name("PORT");
  serve->add_option("--root", a->root, "Directory that files are read from and written to (default: .)");
  serve->add_option("--port-file", a->port_file, "Write the bound port to FILE once listening");
  serve->add_option("--authorized-keys", a->auth_keys,
                    "Client keys to accept (default $AESXFER_HOME/authorized_keys)");
  serve
      ->add_option("--partial-max-age", a->partial_days,
                   "Days to keep partial files of interrupted --resume sends (default 7; 0 = for ever)")
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--max-sessions", a->so.max_sessions,
                    "Refuse clients beyond this many at once (default 64)");
  serve->add_option("--timeout", a->timeout, "Idle seconds before a session is dropped (default 30)");
  serve->add_option("--handshake-timeout", a->handshake_timeout,
                    "Seconds a client has to complete the whole handshake (default 10)");
  serve
      ->add_option("--ciphers", a->so.ciphers,
                   "Ciphers clients may use, comma-separated (default: all; see --list-ciphers)")
      ->delimiter(',');
  serve
      ->add_option("--macs", a->so.macs,
                   "MACs clients may use with a non-AEAD cipher, comma-separated (default: all)")
      ->delimiter(',');
  serve->add_flag("-q,--quiet", a->quiet, "No log lines");
  serve
      ->add_option("--max-list", a->so.max_list_entries,
                   "Entries one recv -r listing may have (default 200000)")
      ->check(CLI::Range(uint64_t(1), proto::kMaxListEntries));
  serve
      ->add_option("--max-probe-hash", a->so.max_probe_hash,
                   "Bytes one session may have the server hash for send --resume probes and resumed "
                   "gets (default 64G; each file is hashed once per session)")
      ->transform(CLI::AsSizeValue(false).description(""))
      ->type_name("SIZE");
  serve->add_flag("--no-aesni", no_aesni, "Use the portable crypto code");
  serve
      ->add_option("--checksums", a->checksums,
                   "File checksums clients may choose, comma-separated (default: xxh128,sha256,none)")
      ->delimiter(',')
      ->type_name("LIST");
  serve
      ->add_option("--max-record-size", a->max_record,
                   "Largest record payload the server agrees to (default 1M)")
      ->transform(CLI::AsSizeValue(false).description(""))
      ->check(CLI::Range(uint64_t(proto::kMinRecordSize), uint64_t(proto::kMaxRecordSize)).description(""))
      ->type_name("SIZE");
  return [a] { return cmd_serve(*a); };
}

CommandRun setup_keygen(CLI::App*, bool&) { return cmd_keygen; }

CommandRun setup_authorize(CLI::App* authorize, bool&) {
  auto what = std::make_shared<std::string>();
  authorize->add_option("key", *what, "The line aesxfer keygen printed, or a .pub file holding it")
      ->required()
      ->type_name("KEYLINE|FILE");
  return [what] { return cmd_authorize(*what); };
}

}  // namespace aesxfer::app
