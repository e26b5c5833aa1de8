// aesxfer: encrypted file transfer over TCP with a cipher of the user's choice. This file is the
// command line: the table of commands (kCommands, as ninja's kTools[]), the checks made before
// parsing, and the lab's two commands (speed, bench: app/lab/). What each other command does is
// in app/send_cmd.cpp, app/recv_cmd.cpp and app/server_cmd.cpp; what they share, in app/cli.h.
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <sstream>

#include "app/cli.h"
#include "app/cli_checks.h"
#include "app/host_config.h"
#include "app/lab/bench.h"
#include "app/lab/speed.h"
#include "crypto/suite.h"
#include "files/io.h"
#include "files/keystore.h"
#include "proto/init.h"

using namespace aesxfer;
using app::die_line;
using app::kExitFail;
using app::kExitUsage;

namespace {

std::vector<std::string> split_list(const std::string& list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// `aesxfer speed`: the cipher lab's table (app/lab/speed.h).
// -c of speed and bench: a list that names nothing (",,") is an error, not "all" (a sixteenth
// re-attack, L8); leaving -c out means all.
std::string named_list(const std::string& v) {
  return split_list(v).empty() ? std::string("names no cipher (leave -c out for all)") : std::string();
}

app::CommandRun setup_speed(CLI::App* speed, bool& no_aesni) {
  struct SpeedArgs {
    app::SpeedOptions sp;
    std::string list;
  };
  auto a = std::make_shared<SpeedArgs>();
  speed->add_option("-c,--cipher", a->list, "Comma-separated ciphers, MACs and checksums (default: all)")
      ->type_name("LIST")
      ->check(named_list);
  speed
      ->add_option("--seconds", a->sp.seconds,
                   "Seconds per cell of the table, i.e. per cipher, operation and block size (default 1; "
                   "a whole table takes rows x sizes x this)")
      ->check(app::timeout_seconds())
      ->type_name("SECONDS");
  speed->add_option("--multi", a->sp.multi, "Threads running at once (figures summed)")
      ->check(app::whole_number(1, 1024))
      ->type_name("N");
  speed->add_flag("--elapsed", a->sp.elapsed,
                  "MB/s of wall time, not per CPU-second (openssl speed -elapsed)");
  speed->add_flag("--json", a->sp.json, "JSON output");
  speed->add_flag("--no-aesni", no_aesni, "Use the portable crypto code");
  speed
      ->add_option("--plot", a->sp.plot,
                   "Also write the table as an SVG line chart (MB/s against block size)")
      ->type_name("FILE");
  speed->add_flag("--no-aesni-too", a->sp.no_aesni_too,
                  "Every AES row also with the portable code (in the chart: same colour, dashed)");
  return [a, &no_aesni] {
    a->sp.ciphers = split_list(a->list);
    a->sp.no_aesni = no_aesni;
    return app::run_speed(a->sp, std::cout, std::cerr);
  };
}

// bench HOST reads the config file as send and recv do ($AESXFER_HOME/config): HostName gives the
// address the aesxfer rows connect to, Port the port unless -P was given. The scp rows keep HOST
// as typed, which ssh resolves through its own config.
bool resolve_bench_host(app::BenchOptions& bo, bool port_given) {
  client::HostConfig c;
  try {
    c = app::load_host_config("", files::aesxfer_home(), {}, bo.host);
  } catch (const client::ConfigError& e) {
    die_line(e.what());
    return false;
  }
  bo.address = c.hostname.value_or(bo.host);
  if (c.port && !port_given) bo.port = *c.port;
  return true;
}

// `aesxfer bench`: the cipher lab (app/lab/bench.h).
app::CommandRun setup_bench(CLI::App* bench, bool& no_aesni) {
  struct BenchArgs {
    app::BenchOptions bo;
    std::string list;
  };
  auto a = std::make_shared<BenchArgs>();
  app::BenchOptions& bo = a->bo;
  bench
      ->add_option("host", bo.host,
                   "Server to send to, or an alias of the config file (default: start a local server child "
                   "on 127.0.0.1)")
      ->type_name("HOST");
  bench->add_option("-c,--cipher", a->list, "Comma-separated ciphers (default: all)")
      ->type_name("LIST")
      ->check(named_list);
  bench->add_option("-m,--mac", bo.mac, "MAC for non-AEAD ciphers (default hmac-sha256)")->type_name("MAC");
  bench->add_option("--size", bo.size, "Bytes per transfer, K/M/G suffixes are binary (default 1G)")
      ->transform(app::byte_size(1, uint64_t(1) << 50))
      ->type_name("SIZE");
  bench->add_option("--repeat", bo.repeat, "Transfers per cipher; median, min and max are shown (default 3)")
      ->check(app::whole_number(1, 1000))
      ->type_name("N");
  bench->add_flag("--no-aesni-too", bo.no_aesni_too,
                  "Run every AES cipher with and without AES-NI, show the speed-up");
  auto* bench_json = bench->add_flag("--json", bo.json, "One JSON object with rows");
  bench->add_flag("--csv", bo.csv, "CSV: " + std::string(app::kBenchCsvHeader))->excludes(bench_json);
  bench
      ->add_option(
          "--plot", bo.plot,
          "Also write an SVG chart to FILE: bars per cipher, or with --record-size lines of MB/s against "
          "record size")
      ->type_name("FILE");
  bench
      ->add_option("--record-size", bo.record_sizes,
                   "Sweep: every cipher once per record size, comma-separated (e.g. 4K,16K,64K,256K,1M)")
      ->delimiter(',')
      ->transform(app::byte_size(proto::kMinRecordSize, proto::kMaxRecordSize))
      ->type_name("LIST");
  bench->add_option("-P,--port", bo.port, "Remote server port (default 7227)")
      ->check(app::whole_number(1, 65535, "a port number"))
      ->type_name("PORT");
  bench->add_option("--timeout", bo.timeout, "Seconds to wait on the network before giving up (default 60)")
      ->check(app::timeout_seconds())
      ->type_name("SECONDS");
  bench->add_flag("-q,--quiet", bo.quiet, "No progress lines on stderr");
  bench->add_flag("--no-aesni", no_aesni,
                  "Use the portable crypto code (both sides when the server is local)");
  bench->add_flag(
      "--vs-scp", bo.vs_scp,
      "Also send with scp -c (matching cipher and MAC) and scp's defaults; without HOST to a throwaway "
      "sshd on 127.0.0.1");
  bench
      ->add_option("--ssh-opts", bo.ssh_opts,
                   "Options for scp with --vs-scp, split at spaces (repeatable; write --ssh-opts=\"-o ...\")")
      ->allow_extra_args(false)
      ->type_name("OPTIONS");
  bench->add_option("--sshd", bo.sshd, "The sshd that --vs-scp without HOST starts (default: /usr/sbin/sshd)")
      ->type_name("FILE");
  auto* port = bench->get_option("--port");
  return [a, &no_aesni, port] {
    a->bo.ciphers = split_list(a->list);
    a->bo.no_aesni = no_aesni;
    if (!a->bo.host.empty() && !resolve_bench_host(a->bo, port->count() > 0)) return kExitUsage;
    return app::run_bench(a->bo, std::cout, std::cerr);
  };
}

// One command: its name and line in --help, and the function that declares its options and
// returns what runs it.
struct Command {
  const char* name;
  const char* help;
  app::CommandRun (*setup)(CLI::App* sub, bool& no_aesni);
};

// Every command, in the order --help lists them.
constexpr Command kCommands[] = {
    {"send", "Send files: aesxfer send FILE... HOST:DEST", app::setup_send},
    {"recv", "Fetch files or (-r) a directory: aesxfer recv HOST:SRC... DEST", app::setup_recv},
    {"serve", "Run the server", app::setup_serve},
    {"keygen", "Create this user's identity (and show it)", app::setup_keygen},
    {"authorize", "On the server: let a client key in (appends it to $AESXFER_HOME/authorized_keys)",
     app::setup_authorize},
    {"speed", "Cipher and MAC throughput, like openssl speed -evp", setup_speed},
    {"bench", "Transfer throughput and CPU per cipher, against HOST or a local server", setup_bench},
};

// The first word when it is not an option and not a command: one line naming it, with the
// nearest command when one is close (as git does).
std::string unknown_command(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return "";
  const std::string word = argv[1];
  std::string names;
  std::vector<std::string> candidates;
  for (const Command& c : kCommands) {
    if (word == c.name) return "";
    candidates.push_back(c.name);
    names += names.empty() ? c.name : std::string(", ") + c.name;
  }
  const std::string best = app::nearest(word, candidates);
  return "unknown command '" + net::printable(word) + "'" +
         (best.empty() ? "" : " (did you mean " + best + "?)") + "; commands: " + names + " (see --help)";
}

// "; also: a, b" for a row's comma-separated aliases, or "" (a thirty-first re-attack, B-N2: -c aes
// worked, but only the man page said so).
std::string also(const char* aliases) {
  std::string s(aliases);
  if (s.empty()) return s;
  for (size_t i = s.find(','); i != std::string::npos; i = s.find(',', i + 2)) s.replace(i, 1, ", ");
  return " (also: " + s + ")";
}

void list_ciphers() {
  for (const auto& c : crypto::ciphers())
    std::printf("%-14s %s%s%s\n", c.name,
                c.legacy && c.mode != crypto::CipherMode::none ? "legacy  " : "        ", c.note,
                also(c.aliases).c_str());
  for (const auto& m : crypto::macs())
    std::printf("mac %-10s         %s%s\n", m.name, m.note, also(m.aliases).c_str());
}

// Checks made before CLI11 parses: no arguments, an unknown command, serve -p, an unknown option
// (with the nearest known one). Returns the exit
// status for a usage error, or -1 to go on.
int precheck(const CLI::App& app, int argc, char** argv) {
  if (argc < 2) {  // no arguments: usage on stderr, like a usage error
    std::fputs(app.help().c_str(), stderr);
    return kExitUsage;
  }
  if (std::string u = unknown_command(argc, argv); !u.empty()) {
    die_line(u);
    return kExitUsage;
  }
  // One meaning of -p everywhere (--preserve, as in scp); the port is -P in every command.
  if (std::string(argv[1]) == "serve")
    for (int i = 2; i < argc; ++i)
      if (std::string(argv[i]) == "-p") {
        die_line("serve: the port option is -P (or --port); -p means --preserve in send and recv");
        return kExitUsage;
      }
  if (std::string u = app::unknown_option(app, {argv + 1, argv + argc}); !u.empty()) {
    die_line(u);
    return kExitUsage;
  }
  return -1;
}

}  // namespace

// A command's status, made a failure when what it wrote on standard output (--json objects, a
// listing, ciphers) did not all get there: a full disk or a closed file failed without a word and
// exit 0 (a twenty-fifth re-attack, N2), where coreutils say so and exit 1.
static int output_written(int rc) {
  errno = 0;
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return rc;
  die_line(std::string("standard output: ") + (errno ? std::strerror(errno) : "write error"));
  return rc == 0 ? kExitFail : rc;
}

int main(int argc, char** argv) {
  aesxfer::files::note_inherited_descriptors();  // first: before anything takes descriptor 0, 1 or 2
  CLI::App app{"aesxfer: encrypted file transfer over TCP, with the cipher you pick"};
  app.require_subcommand(0, 1);
  bool list = false, no_aesni = false;
  app.add_flag("--list-ciphers", list, "List ciphers and MACs (legacy ones marked) and exit");
  app.add_flag("--no-aesni", no_aesni, "Use the portable constant-time code instead of AES-NI/PCLMUL/SHA-NI")
      ->envname("AESXFER_NO_AESNI");
  app.set_version_flag("-V,--version", std::string("aesxfer ") + AESXFER_VERSION + " (protocol " +
                                           std::to_string(proto::kVersion) + ")");
  std::vector<std::pair<CLI::App*, app::CommandRun>> commands;
  for (const Command& c : kCommands) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    commands.emplace_back(sub, c.setup(sub, no_aesni));
  }

  // What the commands print follows the locale's codeset from the first word on: the errors
  // about the command line quote what was typed (a ninth re-attack: they were made printable
  // before the locale was read, so an 8-bit terminal got the 0x9b of "\xc3\x9b" raw).
  proto::set_utf8_output(
      app::locale_reads_utf8(std::getenv("LC_ALL"), std::getenv("LC_CTYPE"), std::getenv("LANG")));
  if (int rc = precheck(app, argc, argv); rc >= 0) return rc;
  app::note_words_after_lower_p(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::string cmd;
    for (const Command& c : kCommands)
      if (argc > 1 && std::string(argv[1]) == c.name) cmd = c.name;
    die_line(app::parse_error_line(e, cmd));
    return kExitUsage;
  }
  try {
    proto::init(no_aesni);  // libsodium, and the CPU dispatch chosen once (the portable code with --no-aesni)
  } catch (const std::exception& e) {
    die_line(e.what());
    return kExitFail;
  }
  if (list) {
    list_ciphers();
    return 0;
  }
  // The server's log stays UTF-8 where it is kept (the journal's socket, a file), and follows the
  // locale on a terminal, where an 8-bit codeset reads a byte of a UTF-8 name such as 0x9b as a
  // control (CSI; a fifth re-attack, F2), and on a pipe, which an admin reads on one through
  // `serve 2>&1 | grep op=` or `| tee` (a forty-fourth, B-F2).
  struct stat err_st {};
  const bool kept =
      ::fstat(STDERR_FILENO, &err_st) == 0 && !S_ISFIFO(err_st.st_mode) && !::isatty(STDERR_FILENO);
  if (app.got_subcommand("serve") && kept) proto::set_utf8_output(true);
  try {
    for (auto& [sub, run] : commands)
      if (*sub) return output_written(run());
  } catch (const std::exception& e) {  // proto::Failure too: one line, as every error
    die_line(e.what());
    return kExitFail;
  }
  std::cout << app.help();
  return 0;
}
