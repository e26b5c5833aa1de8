// Issue 27, items 5-8: what the command line says. Messages a user can act on instead of CLI11's
// words, named value types in --help, "did you mean" for options; ssh's and scp's habits (-p is not
// the port, HOST:PATH with the port apart); usage errors found before any byte moves; what happened
// said once and in one convention (a new identity, /dev/zero without --size, one line per file,
// one rate per file, the server's log of a failed put and of its own stop).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "proto/failure.h"
#include "tests/harness.h"
#include "tests/server_fixture.h"

namespace aesxfer::test {
namespace {

using Clock = std::chrono::steady_clock;

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// CLI11's own words, which no message may show.
const char* const kRawWords[] = {"is required",    "At least",          "not in range", "unit not recognized",
                                 "Allowed values", "Could not convert", "not expected", "179769",
                                 "required",       "The following"};

void expect_plain_usage_error(const ProcResult& r, const std::string& want, const std::string& what) {
  EXPECT_EQ(r.exit_code, 2) << what << "\n" << r.describe();
  EXPECT_EQ(nonempty_lines(r.err).size(), 1u) << what << "\n" << r.err;
  EXPECT_TRUE(has(r.err, want)) << what << ": wanted '" << want << "' in\n" << r.err;
  EXPECT_LT(r.err.size(), 220u) << what << ": " << r.err;
  for (const char* raw : kRawWords)
    EXPECT_FALSE(has(r.err, raw)) << what << ": CLI11's '" << raw << "'\n" << r.err;
}

// ---- item 5 -------------------------------------------------------------------------------------

TEST(CliWords, UsageErrorsSayWhatToDo) {
  TempDir home;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"send"}, "send: nothing to send (aesxfer send FILE... HOST:DEST)"},
      {{"send", "a"}, "send: 'a' needs a destination after it (aesxfer send FILE... HOST:DEST)"},
      {{"send", "h:x"}, "send: no file to send to h:x (aesxfer send FILE... HOST:DEST)"},
      {{"recv"}, "recv: nothing to fetch (aesxfer recv HOST:SRC... DEST)"},
      {{"recv", "h:x"}, "recv: h:x needs a destination after it"},
      {{"send", "a", "h:x", "--streams", "x"}, "--streams: expected a whole number from 0 to 16, got 'x'"},
      {{"serve", "--partial-max-age", "-1"}, "--partial-max-age: expected a number of days, 0 or more"},
      {{"send", "a", "h:x", "-l", "5mb"},
       "--limit: '5mb' is not a rate: give Kbit/s, or a number with K, M or G"},
      {{"serve", "--max-sessions", "-1"}, "--max-sessions: expected a whole number from 1 to"},
      {{"serve", "--max-sessions", "0"}, "--max-sessions: expected a whole number from 1 to"},
      {{"serve", "--timeout", "-3"}, "--timeout: expected a number of seconds, more than 0"},
      {{"send", "a", "h:x", "-P", "70000"}, "--port: expected a port number from 1 to 65535, got '70000'"},
      {{"send", "a", "h:x", "-P", "x"}, "--port: expected a port number from 1 to 65535, got 'x'"},
      {{"speed", "--multi", "x"}, "--multi: expected a whole number from 1 to"},
      {{"send", "a", "h:x", "--record-size", "1Q"}, "--record-size: '1Q' is not a size"},
      {{"send", "a", "h:x", "--record-size", "2M"}, "--record-size: expected a size from 4K to 1M, got '2M'"},
      {{"send", "a", "h:x", "-c"}, "send: --cipher needs a value (CIPHER)"},
      {{"keygen", "extra"}, "keygen: unexpected argument 'extra'"},
      {{"send", "--resum", "a", "h:x"}, "send: unknown option --resum (did you mean --resume?)"},
      {{"recv", "h:x", "y", "--recursiv"}, "recv: unknown option --recursiv (did you mean --recursive?)"},
      {{"send", "a", "h:x", "-resume"}, "send: unknown option -resume (did you mean --resume?)"},
      {{"send", "-rx", "a", "h:x"}, "send: unknown option -x"},
      {{"serve", "--max-sesions", "4"}, "serve: unknown option --max-sesions (did you mean --max-sessions?)"},
      {{"--list-cipher"}, "unknown option --list-cipher (did you mean --list-ciphers?)"},
      {{"send", "a", "h:x", "--timeout", "5", "--timeout", "6"},
       "send: --timeout is given 2 times: give it once"},
  };
  for (const auto& [args, want] : cases) {
    std::string what;
    for (const auto& a : args) what += a + " ";
    expect_plain_usage_error(run_aesxfer(args, home.path(), 10), want, what);
  }
  // What is valid still parses: option values that look like options, clusters, -P7300, --k=v.
  auto ok = run_aesxfer({"send", "-rp", "-P7300", "--timeout=5", "-o", "Port=7300", "--", "-h", "h:x"},
                        home.path(), 10);
  EXPECT_FALSE(has(ok.err, "unknown option")) << ok.err;
  EXPECT_TRUE(has(ok.err, "-h: no such file")) << ok.err;
}

TEST(CliWords, HelpNamesEveryValueType) {
  TempDir home;
  const std::vector<std::pair<std::string, std::vector<std::string>>> want = {
      {"send",
       {"--streams N", "--timeout SECONDS", "-l,--limit RATE", "--record-size SIZE", "-P,--port PORT"}},
      {"recv", {"--size SIZE", "--streams N"}},
      {"serve",
       {"--listen ADDRESS", "--root DIR", "--port-file FILE", "--authorized-keys FILE",
        "--partial-max-age DAYS", "--max-sessions N", "--timeout SECONDS", "--handshake-timeout SECONDS",
        "--ciphers LIST", "--macs LIST", "--max-list N", "--max-record-size SIZE", "-P,--port PORT"}},
      {"speed", {"--seconds SECONDS", "--multi N", "--plot FILE"}},
      {"bench",
       {"--repeat N", "--timeout SECONDS", "--plot FILE", "--ssh-opts OPTIONS", "--sshd FILE",
        "-P,--port PORT"}},
  };
  for (const auto& [cmd, names] : want) {
    auto r = run_aesxfer({cmd, "--help"}, home.path(), 10);
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    for (const auto& n : names) EXPECT_TRUE(has(r.out, n)) << cmd << ": " << n << "\n" << r.out;
    for (const char* raw : {" TEXT", " INT", " UINT", " FLOAT", "NONNEGATIVE", "POSITIVE", " in ["})
      EXPECT_FALSE(has(r.out, raw)) << cmd << ": CLI11's type '" << raw << "'\n" << r.out;
  }
}

// ---- item 6 -------------------------------------------------------------------------------------

// scp's -p (preserve) after which a port number was meant: said, and nothing is sent anywhere.
TEST(CliWords, APortAfterLowerPIsExplainedAndNothingMoves) {
  Workspace ws;
  ServerProcess server(ws.home, ws.root);
  write_text_file(ws.local / "a.txt", "A");
  const std::string port = std::to_string(server.port());
  auto r = run_aesxfer({"send", "-p", port, (ws.local / "a.txt").string(), "127.0.0.1:x"}, ws.home, 30);
  expect_plain_usage_error(
      r, port + ": no such file; the port is -P " + port + " (as in scp); -p preserves times and modes",
      "send -p PORT");
  EXPECT_FALSE(fs::exists(ws.root / "x"));
  EXPECT_FALSE(has(server.log(), "peer=")) << server.log();
  EXPECT_EQ(server.stop(), 0);
}

// A remote file is HOST:PATH, as typed; the port stands apart, never HOST:PORT:PATH.
TEST(CliWords, RemoteFilesAreHostColonPathWithThePortApart) {
  Workspace ws;
  ServerProcess server(ws.home, ws.root);
  const std::string port = std::to_string(server.port());
  auto r = run_aesxfer({"recv", "127.0.0.1:nope.bin", (ws.local / "x").string(), "-P", port}, ws.home, 30);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(has(r.err, "127.0.0.1:nope.bin: no such file or directory (port " + port + ")")) << r.err;
  EXPECT_FALSE(has(r.err, "127.0.0.1:" + port + ":")) << r.err;
  write_text_file(ws.local / "a", "A");
  write_text_file(ws.local / "b", "B");
  write_text_file(ws.root / "file", "F");
  r = run_aesxfer(
      {"send", "-q", (ws.local / "a").string(), (ws.local / "b").string(), "127.0.0.1:file", "-P", port},
      ws.home, 30);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(has(r.err, "127.0.0.1:file: not a directory (port " + port + ")")) << r.err;
  EXPECT_EQ(server.stop(), 0);
}

// The two address habits of ssh users that mean something else here are told the form that works
// (an eighteenth re-attack, N8): an IPv6 address without brackets, and serve --listen HOST:PORT.
TEST(CliWords, AddressHabitsAreToldTheFormThatWorks) {
  Workspace ws;
  write_text_file(ws.local / "f", "f");
  auto r = run_aesxfer({"send", (ws.local / "f").string(), "::1:f6"}, ws.home, 30);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_TRUE(has(r.err, "(got '::1:f6') (an IPv6 address goes in brackets: [::1]:f6)")) << r.err;
  r = run_aesxfer({"recv", "::1:f6", (ws.local / "g").string()}, ws.home, 30);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_TRUE(has(r.err, "(an IPv6 address goes in brackets: [::1]:f6)")) << r.err;
  for (const auto& [listen, hint] : std::vector<std::pair<std::string, std::string>>{
           {"127.0.0.1:7701", " (the port goes in -P: --listen 127.0.0.1 -P 7701)"},
           {"[::1]:7701", " (the port goes in -P: --listen ::1 -P 7701)"},
           {"nohost", ""}}) {
    r = run_aesxfer({"serve", "--root", ws.root.string(), "--listen", listen}, ws.home, 30);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_EQ(r.err, "aesxfer: serve: --listen " + listen + ": not an IP address" + hint + "\n");
  }
  // HOST:PORT:PATH is a path, as for scp: a connection that fails then says where the port goes
  // (a twentieth re-attack, N6). The port asked is one nothing listens on.
  const std::string closed = std::to_string(unused_port());
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"recv", "127.0.0.1:7720:a.txt", (ws.local / "o9").string(), "-P", closed},
        std::vector<std::string>{"send", (ws.local / "f").string(), "127.0.0.1:7720:x.txt", "-P", closed}}) {
    r = run_aesxfer(args, ws.home, 30);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_TRUE(has(r.err, "names the path 7720:")) << r.err;
    EXPECT_TRUE(has(r.err, ": a port goes in -P 7720)")) << r.err;
  }
  // A configuration's HostName with the port in it (a nineteenth re-attack, N5).
  write_text_file(ws.home / "config", "Host srv\n  HostName 127.0.0.1:7701\n");
  ::chmod((ws.home / "config").c_str(), 0600);
  // It is the configuration's error, found before anything is looked up.
  r = run_aesxfer({"send", (ws.local / "f").string(), "srv:f", "--retries", "0"}, ws.home, 30);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_TRUE(
      has(r.err, "config:2: HostName '127.0.0.1:7701': the port goes on a line of its own: Port 7701"))
      << r.err;
  EXPECT_EQ(r.err.find("cannot resolve"), std::string::npos) << r.err;
  r = run_aesxfer({"send", (ws.local / "f").string(), "h:f", "-o", "HostName=127.0.0.1:7701"}, ws.home, 30);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_TRUE(has(r.err, "the port goes on a line of its own: Port 7701")) << r.err;
}

// A file to be written where it cannot be is refused before the work that ends in writing it
// (a nineteenth re-attack, N5: serve logged "listening" first; speed and bench ran their whole
// measurement, then failed on the path).
TEST(CliWords, AnOutputPathThatCannotBeWrittenIsRefusedFirst) {
  Workspace ws;
  const std::string missing = (ws.tmp.path() / "no-such-dir" / "out").string();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"serve", "--root", ws.root.string(), "--listen", "127.0.0.1", "-P", "0", "--port-file", missing},
           {"speed", "--seconds", "30", "-c", "aes128-gcm", "--plot", missing + ".svg"},
           {"bench", "--size", "64M", "-c", "aes128-gcm", "--plot", missing + ".svg"}}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = run_aesxfer(args, ws.home, 30);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_TRUE(has(r.err, "no-such-dir/out")) << r.err;
    EXPECT_TRUE(has(r.err, "No such file or directory")) << r.err;
    EXPECT_FALSE(has(r.err, "listening")) << r.err;
    EXPECT_LT(secs, 10) << "refused before the work";
  }
  // Another user's link on the way, in a sticky directory: refused first too, and a chart is
  // never written through it (an ofstream followed it into the victim's file).
  const StickyShare s(ws.local);
  write_text_file(s.priv / "out.svg", "keep\n");
  const std::string through = (s.link("kd", s.priv) / "out.svg").string();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"speed", "--seconds", "30", "-c", "aes128-gcm", "--plot", through},
           {"bench", "--size", "64M", "-c", "aes128-gcm", "--plot", through}}) {
    auto r = run_aesxfer(args, ws.home, 30);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_TRUE(has(r.err, "kd: a symbolic link owned by uid 65534 in a sticky directory")) << r.err;
  }
  EXPECT_EQ(read_text_file(s.priv / "out.svg"), "keep\n");
  // A directory at the name (a twenty-seventh re-attack, N10: exit 1 after the start lines).
  auto r = run_aesxfer({"serve", "--root", ws.root.string(), "--listen", "127.0.0.1", "-P", "0",
                        "--port-file", ws.local.string()},
                       ws.home, 30);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_TRUE(has(r.err, "Is a directory")) << r.err;
  EXPECT_FALSE(has(r.err, "listening")) << r.err;
}

// ---- item 7 -------------------------------------------------------------------------------------

TEST(CliWords, EveryArgumentIsCheckedBeforeAnyByteMoves) {
  Workspace ws;
  ServerProcess server(ws.home, ws.root);
  const std::string bin = AESXFER_BINARY, port = std::to_string(server.port());
  fs::create_directories(ws.root / "d");
  auto r = run_process({"/bin/sh", "-c", "echo x | '" + bin + "' send - - 127.0.0.1:d -P " + port},
                       {{"AESXFER_HOME", ws.home.string()}}, 30);
  expect_plain_usage_error(r, "send: - (standard input) given twice", "send - -");
  EXPECT_TRUE(fs::is_empty(ws.root / "d"));
  // recv: a later source that cannot be fetched as written stops the command before the first.
  write_text_file(ws.root / "a", "A");
  fs::create_directories(ws.local / "in");
  r = run_aesxfer({"recv", "127.0.0.1:a", "127.0.0.1:~/b", (ws.local / "in").string(), "-P", port}, ws.home,
                  30);
  expect_plain_usage_error(r, "'~' has no meaning here", "recv a ~/b");
  r = run_aesxfer({"recv", "127.0.0.1:a", "127.0.0.1:/dev/zero", (ws.local / "in").string(), "-P", port},
                  ws.home, 30);
  expect_plain_usage_error(r, "/dev/zero", "recv a /dev/zero");
  EXPECT_TRUE(fs::is_empty(ws.local / "in"));
  EXPECT_FALSE(has(server.log(), "peer=")) << server.log();
  EXPECT_EQ(server.stop(), 0);
}

// ---- item 8 -------------------------------------------------------------------------------------

// The identity a first send makes is announced once, with its path and fingerprint, as keygen does.
TEST(CliWords, TheIdentityAFirstSendMakesIsAnnouncedOnce) {
  Workspace ws;
  ServerProcess server(ws.home, ws.root);
  TempDir client_base("aesxfer-client");
  // A new account: neither the home nor its parent exists yet (~/.config/aesxfer; a twenty-ninth
  // re-attack, N1: the config file's walk failed the first send with exit 2).
  const fs::path home = client_base.path() / "config" / "aesxfer";
  write_text_file(ws.local / "f", "x");
  const std::string port = std::to_string(server.port());
  auto r = run_aesxfer({"send", (ws.local / "f").string(), "127.0.0.1:f", "-P", port}, home, 30);
  EXPECT_EQ(r.exit_code, 1) << "not authorized yet\n" << r.describe();
  const fs::path id = home / "id_ed25519";
  ASSERT_TRUE(fs::exists(id));
  auto k = run_aesxfer({"keygen"}, home, 30);  // the same key, and its fingerprint
  ASSERT_EQ(k.exit_code, 0) << k.describe();
  const std::string fp =
      k.err.substr(k.err.find("(SHA256:") + 1, k.err.find(')') - k.err.find("(SHA256:") - 1);
  EXPECT_TRUE(has(r.err, "aesxfer: created identity " + id.string() + " (" + fp + ")")) << r.err << "\n"
                                                                                        << fp;
  EXPECT_TRUE(has(r.err, id.string() + ".pub")) << r.err;
  ASSERT_EQ(run_aesxfer({"authorize", id.string() + ".pub"}, ws.home, 30).exit_code, 0);
  r = run_aesxfer({"send", (ws.local / "f").string(), "127.0.0.1:f", "-P", port}, home, 30);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(has(r.err, "created identity")) << r.err;
  EXPECT_EQ(server.stop(), 0);
}

TEST(CliWords, DevZeroWithoutSizeIsRefused) {
  TempDir home;
  auto r = run_aesxfer({"recv", "127.0.0.1:/dev/zero", (home / "out").string(), "-P", "1"}, home.path(), 10);
  expect_plain_usage_error(r, "127.0.0.1:/dev/zero is not a regular file: give --size", "recv /dev/zero");
  EXPECT_FALSE(fs::exists(home / "out"));
}

// The terminal as a user sees it: each '\n'-separated line after carriage returns and "erase to end
// of line" (ESC [ K) did their work, trailing blanks dropped.
std::vector<std::string> screen_lines(const std::string& raw) {
  std::vector<std::string> out;
  std::string line;
  size_t col = 0;
  for (size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c == '\n') {
      while (!line.empty() && line.back() == ' ') line.pop_back();
      if (!line.empty()) out.push_back(line);
      line.clear();
      col = 0;
    } else if (c == '\r') {
      col = 0;
    } else if (c == '\033' && raw.compare(i, 3, "\033[K") == 0) {
      line.resize(col);
      i += 2;
    } else {
      if (col < line.size())
        line[col] = c;
      else
        line.push_back(c);
      ++col;
    }
  }
  if (!line.empty()) out.push_back(line);
  return out;
}

// Runs the aesxfer binary with its stdout and stderr on a pseudo-terminal; returns what it wrote.
std::string run_on_terminal(const std::vector<std::string>& args, const fs::path& home, int& status) {
  int master = -1;
  winsize w{};
  w.ws_col = 100;
  w.ws_row = 30;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, &w);
  if (pid == 0) {
    ::setenv("AESXFER_HOME", home.c_str(), 1);
    std::vector<char*> argv{const_cast<char*>(AESXFER_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(AESXFER_BINARY, argv.data());
    ::_exit(127);
  }
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(master, buf, sizeof buf)) > 0;) out.append(buf, size_t(n));  // EIO at the end
  ::close(master);
  ::waitpid(pid, &status, 0);
  return out;
}

// A seventh re-attack (N2): `send *` without a destination quoted its last argument as it was, a
// name another user planted in the directory (a title change and a screen clear). So did recv's
// first argument. Both are shown printable.
// True when `text` holds a byte sequence a terminal acts on: ESC, BEL, the C1 CSI (as UTF-8) or
// the bidi override U+202E. A printable() text holds none.
bool shows_raw_controls(const std::string& text) {
  for (const char* raw : {"\x1b", "\x07", "\xc2\x9b", "\xe2\x80\xae"})
    if (text.find(raw) != std::string::npos) return true;
  return false;
}

// A command refused over a value that begins "zz\x1b]0;owned" (a title change): a non-zero exit,
// and its error quotes the value escaped, with nothing a terminal acts on.
void expect_refused_printably(const std::vector<std::string>& args, const fs::path& home) {
  ProcResult r = run_aesxfer(args, home, 30);
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_FALSE(shows_raw_controls(r.err)) << proto::printable(r.err);
  EXPECT_NE(r.err.find("zz\\x1b]0;owned"), std::string::npos) << r.err;
}

TEST(CliWords, AMisplacedArgumentIsQuotedPrintable) {
  Workspace ws;
  const std::string planted = "zz\x1b]0;owned\x07\x1b[2J";
  write_text_file(ws.local / "a", "a");
  for (const auto& args : std::vector<std::vector<std::string>>{{"send", (ws.local / "a").string(), planted},
                                                                {"recv", planted, "x"}})
    expect_refused_printably(args, ws.home);
}

// An eighth re-attack (F4): the errors about an option's value quoted it as typed for -i, -o
// IdentityFile=, --congestion, --checksum, serve --checksums and serve --root, and the numeric
// options turned C0 bytes into '?' but passed C1 (U+009B, CSI), bidi controls and raw high bytes.
// Every one is shown printable.
TEST(CliWords, EveryQuotedOptionValueIsPrintable) {
  Workspace ws;
  const std::string v =
      "zz\x1b]0;owned\x07\xc2\x9b"
      "31m\xe2\x80\xae";
  const std::string a = (ws.local / "a").string();
  write_text_file(a, "a");
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"send", a, "127.0.0.1:x", "-i", v},
           {"send", a, "127.0.0.1:x", "-o", "IdentityFile=" + v},
           {"send", a, "127.0.0.1:x", "--congestion", v},
           {"send", a, "127.0.0.1:x", "--checksum", v},
           {"send", a, "127.0.0.1:x", "--streams", v},
           {"recv", "127.0.0.1:x", a, "--timeout", v},
           {"serve", "-P", "0", "--checksums", v},
           {"serve", "-P", "0", "--root", (ws.tmp.path() / v).string()},
           // a ninth re-attack: these too
           {"send", a, "127.0.0.1:x", "-c", v},
           {"send", a, "127.0.0.1:x", "-m", v},
           {"serve", "-P", "0", "--root", ws.root.string(), "--listen", v},
           {"serve", "-P", "0", "--root", ws.root.string(), "--ciphers", v},
           {"speed", "--seconds", "0.01", "-c", v},
           {"speed", "--seconds", "0.01", "-c", "none", "--plot", (ws.tmp.path() / v / "x.svg").string()},
           {"bench", "--size", "1M", "-c", v}}) {
    SCOPED_TRACE(args[args.size() - 2]);
    expect_refused_printably(args, ws.home);
  }
}

// A ninth re-attack: the command line's own errors were made printable before the locale was
// read, so in an 8-bit locale "\xc3\x9b" (a letter; 0x9b is CSI to such a terminal) reached it
// raw from every value checked while parsing, an unknown option and an unknown command.
TEST(CliWords, InAnEightBitLocaleTheCommandLinesErrorsAreAscii) {
  Workspace ws;
  const std::string v =
      "\xc3\x9b"
      "31mRED";
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"recv", "127.0.0.1:x", "y", "--timeout", v},
                                             {"send", "a", "127.0.0.1:x", "--streams", v},
                                             {"send", "a", "127.0.0.1:x", "--record-size", v},
                                             {"recv", "127.0.0.1:x", "y", "-l", v},
                                             {"send", "a", "127.0.0.1:x", "--" + v},
                                             {v, "x"},
                                             {"speed", "--seconds", v}}) {
    std::vector<std::string> argv{AESXFER_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcResult r = run_process(argv, {{"AESXFER_HOME", ws.home.string()}, {"LC_ALL", "C"}}, 30);
    SCOPED_TRACE(proto::printable(r.err));
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    for (unsigned char ch : r.err) EXPECT_LT(ch, 0x80);
    EXPECT_NE(r.err.find("\\xc3\\x9b31mRED"), std::string::npos);
  }
}

// A tenth re-attack: paths under $AESXFER_HOME came out raw from keygen, authorize, the
// known_hosts lines ("Permanently added ... (HOME/known_hosts)") and the refused login's hint
// naming the -i file. A home (or -i file) named with ESC, C1 and RLO is shown printable.
TEST(CliWords, PathsUnderTheHomeAndTheIdentityArePrintable) {
  Workspace ws;
  const fs::path home = ws.tmp.path() / "h\x1b[31m\xc2\x9b\xe2\x80\xae";
  fs::create_directory(home);
  fs::permissions(home, fs::perms(0700));
  auto in_home = [&](const std::vector<std::string>& args) {
    std::vector<std::string> argv{AESXFER_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_process(argv, {{"AESXFER_HOME", home.string()}}, 60);
  };
  ProcResult key = in_home({"keygen"});
  ASSERT_EQ(key.exit_code, 0) << key.describe();
  EXPECT_FALSE(shows_raw_controls(key.out + key.err)) << proto::printable(key.err);
  EXPECT_NE(key.err.find("h\\x1b[31m"), std::string::npos) << key.err;
  const std::string line = nonempty_lines(key.out).at(0);
  ProcResult auth = in_home({"authorize", line});  // into this home: the line's own format
  ASSERT_EQ(auth.exit_code, 0) << auth.describe();
  EXPECT_FALSE(shows_raw_controls(auth.out + auth.err)) << proto::printable(auth.out);
  fs::permissions(home / "authorized_keys", fs::perms(0664));  // refused, naming the file
  ProcResult loose = in_home({"authorize", line});
  EXPECT_NE(loose.exit_code, 0) << loose.describe();
  EXPECT_NE(loose.err.find("writable by group or others"), std::string::npos) << loose.err;
  EXPECT_FALSE(shows_raw_controls(loose.err)) << proto::printable(loose.err);
  ServerProcess server(ws.home, ws.root);  // a server that knows no key of this home
  write_text_file(ws.local / "f", "f");
  const std::string port = std::to_string(server.port());
  ProcResult refused = in_home({"send", (ws.local / "f").string(), "127.0.0.1:f", "-P", port, "--timeout",
                                "20", "-i", (home / "id_ed25519").string()});
  EXPECT_NE(refused.exit_code, 0) << refused.describe();
  EXPECT_NE(refused.err.find("refused the login"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("Permanently added"), std::string::npos) << refused.err;
  EXPECT_FALSE(shows_raw_controls(refused.err)) << proto::printable(refused.err);
}

class CliWordsServer : public ServerTest {};

TEST_F(CliWordsServer, EachFileEndsAsOneLineInOneConvention) {
  write_random_file(ws.local / "f.bin", 3000000, 5);
  write_random_file(ws.root / "g.bin", 3000000, 6);
  const std::string port = std::to_string(server->port());
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"send", (ws.local / "f.bin").string(), "127.0.0.1:f.bin", "-P", port},
           {"recv", "127.0.0.1:g.bin", (ws.local / "g.bin").string(), "-P", port}}) {
    int status = -1;
    const std::string raw = run_on_terminal(args, ws.home, status);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << raw;
    const std::string name = args[0] == "send" ? "f.bin" : "g.bin";
    std::vector<std::string> file_lines;
    for (const auto& l : screen_lines(raw))
      if (has(l, name)) file_lines.push_back(l);
    ASSERT_EQ(file_lines.size(), 1u) << "one line per file at the end:\n" << raw;
    EXPECT_TRUE(
        std::regex_search(file_lines[0], std::regex(name + ": 3000000 bytes in [0-9.]+ s, [0-9.]+ MB/s")))
        << file_lines[0];
  }
}

// A twenty-seventh re-attack (N1, N2): with --json, sources refused before the connection, and
// every source of a command whose connection failed, had no object (only one-source recv had).
TEST_F(CliWordsServer, EverySourceNamedGetsAJsonObject) {
  write_text_file(ws.local / "ok.txt", "ok\n");
  fs::create_directories(ws.local / "tree");
  fs::create_directories(ws.root / "in");
  const auto objects = [](const std::string& out) {
    std::map<std::string, nlohmann::json> by_file;
    for (const auto& l : nonempty_lines(out)) {
      auto j = nlohmann::json::parse(l);
      by_file[j["file"].get<std::string>()] = j;
    }
    return by_file;
  };
  const std::string missing = (ws.local / "missing").string(), tree = (ws.local / "tree").string(),
                    ok = (ws.local / "ok.txt").string();
  auto r = run({"send", "--json", missing, tree, ok, "127.0.0.1:in/"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  auto got = objects(r.out);
  ASSERT_EQ(got.size(), 3u) << r.out;
  EXPECT_TRUE(has(got[missing]["error"].get<std::string>(), "no such file or directory")) << r.out;
  EXPECT_TRUE(has(got[tree]["error"].get<std::string>(), "is a directory (use -r)")) << r.out;
  EXPECT_EQ(got[ok]["verified"], true) << r.out;

  // A port where nothing listens (bound, never listening: connections are refused).
  const int hold = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(hold, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(hold, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const uint16_t closed = ntohs(a.sin_port);
  for (const auto& c : std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>{
           {{"send", "--json", "--retries", "0", ok, missing, "127.0.0.1:in/"}, {ok, missing}},
           {{"send", "--json", "--retries", "0", ok, "127.0.0.1:in/"}, {ok}},
           {{"recv", "--json", "--retries", "0", "127.0.0.1:x", "127.0.0.1:y", ws.local.string()},
            {"x", "y"}},
           {{"recv", "-r", "--json", "--retries", "0", "127.0.0.1:t", (ws.local / "t").string()}, {"t"}}}) {
    r = run(c.first, closed);
    SCOPED_TRACE(r.describe());
    EXPECT_EQ(r.exit_code, 1);
    got = objects(r.out);
    EXPECT_EQ(got.size(), c.second.size());
    for (const auto& f : c.second) {
      ASSERT_TRUE(got.count(f)) << f;
      EXPECT_EQ(got[f]["verified"], false);
      EXPECT_FALSE(got[f]["error"].get<std::string>().empty());
    }
  }
  // One by one (--resume, -l): a host that cannot be reached is not asked again for each later
  // source; those are named, with the reason (a twenty-eighth re-attack, N3: one bare "cannot
  // connect" line per source, and --retries 0 went on connecting).
  r = run({"recv", "--json", "--resume", "--retries", "0", "127.0.0.1:x", "127.0.0.1:y", "127.0.0.1:z",
           ws.local.string()},
          closed);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  got = objects(r.out);
  EXPECT_EQ(got.size(), 3u) << r.out;
  EXPECT_TRUE(has(r.err, "y: not fetched: cannot connect")) << r.err;
  EXPECT_TRUE(has(r.err, "z: not fetched: cannot connect")) << r.err;
  ::close(hold);
}

// Words a newcomer gets for a source or path that cannot work (a twenty-seventh re-attack, N5 and
// N6): a send source of the shape HOST:PATH is said to be local; a CR or LF in a remote path is
// refused before the connection with its reason (it was "invalid path" from the server).
TEST_F(CliWordsServer, RemoteShapedSourcesAndUnsendablePathsAreExplained) {
  fs::create_directories(ws.root / "in");
  auto r = run({"send", "127.0.0.1:f.txt", "127.0.0.1:in/"});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_TRUE(has(r.err,
                  "127.0.0.1:f.txt: no such file or directory (send's sources are local files; to "
                  "fetch from a server, aesxfer recv 127.0.0.1:f.txt DEST)"))
      << r.err;
  for (const auto& args :
       std::vector<std::vector<std::string>>{{"recv", "127.0.0.1:nl\nname", (ws.local / "x").string()},
                                             {"send", (ws.local / "x").string(), "127.0.0.1:x\ry"}}) {
    write_text_file(ws.local / "x", "x\n");
    r = run(args);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_TRUE(has(r.err, "a CR or LF in a path cannot be sent")) << r.err;
    EXPECT_EQ(server->log().find("peer="), std::string::npos) << server->log();
  }
}

// The final --json-progress line and --json state one rate for a file, a tiny pipelined one too.
TEST_F(CliWordsServer, JsonProgressAndJsonAgreeOnTheRate) {
  for (uint64_t size : {uint64_t(10), uint64_t(5000), uint64_t(200000)}) {
    const std::string name = "t" + std::to_string(size);
    write_random_file(ws.local / name, size, size);
    auto r = run({"send", "--json", "--json-progress", (ws.local / name).string(), "127.0.0.1:" + name});
    ASSERT_EQ(r.exit_code, 0) << r.describe();
    nlohmann::json progress, summary;
    for (const auto& l : nonempty_lines(r.out)) {
      auto j = nlohmann::json::parse(l);
      if (j.contains("verified"))
        summary = j;
      else if (j.value("done", false))
        progress = j;
    }
    ASSERT_FALSE(progress.is_null()) << r.out;
    ASSERT_FALSE(summary.is_null()) << r.out;
    EXPECT_DOUBLE_EQ(progress["mb_per_s"].get<double>(), summary["mb_per_s"].get<double>()) << r.out;
    EXPECT_NEAR(progress["seconds"].get<double>(), summary["seconds"].get<double>(), 0.0006) << r.out;
  }
}

// A twenty-eighth re-attack's note: with --json-progress a file that failed got no final line, so
// a script waiting for its last line waited on. Every file named ends with exactly one final
// line: "done":true when it moved, else "done":false with "error" (a refusal, a missing source).
TEST_F(CliWordsServer, EveryFileNamedEndsWithOneFinalJsonProgressLine) {
  write_text_file(ws.root / "here.txt", "here\n");
  write_text_file(ws.local / "up.txt", "up\n");
  fs::create_directories(ws.local / "into");
  write_text_file(ws.local / "up2.txt", "up2\n");
  const std::string up = (ws.local / "up.txt").string(), missing = (ws.local / "missing.txt").string(),
                    up2 = (ws.local / "up2.txt").string();
  const std::vector<std::pair<std::vector<std::string>, std::map<std::string, bool>>> cases{
      {{"recv", "127.0.0.1:here.txt", "127.0.0.1:gone.txt", (ws.local / "into").string()},
       {{"here.txt", true}, {"gone.txt", false}}},
      {{"recv", "127.0.0.1:gone.txt", (ws.local / "into" / "x").string()}, {{"gone.txt", false}}},
      {{"send", up, missing, "127.0.0.1:"}, {{up, true}, {missing, false}}},
      {{"send", up, "127.0.0.1:nodir/up.txt"}, {{up, false}}},
      // Several sources into a DEST that is no directory, on either end (a thirty-third
      // re-attack, B-N1 and B-N2: no line at all).
      {{"send", up, up2, "127.0.0.1:nodir/"}, {{up, false}, {up2, false}}},
      {{"recv", "127.0.0.1:here.txt", "127.0.0.1:gone.txt", (ws.local / "missing").string() + "/"},
       {{"here.txt", false}, {"gone.txt", false}}},
  };
  for (const auto& [args, want] : cases) {
    std::vector<std::string> a = args;
    a.push_back("--json-progress");
    auto r = run(a);
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    std::map<std::string, std::vector<nlohmann::json>> lines;
    for (const auto& l : nonempty_lines(r.out)) {
      auto j = nlohmann::json::parse(l);
      lines[j.value("file", "")].push_back(j);
    }
    ASSERT_EQ(lines.size(), want.size()) << r.out;
    for (const auto& [file, moved] : want) {
      ASSERT_TRUE(lines.count(file)) << file << " has no line:\n" << r.out;
      int finals = 0;
      for (const auto& j : lines[file]) finals += j.value("done", false) || j.contains("error");
      EXPECT_EQ(finals, 1) << file << ":\n" << r.out;
      const auto& last = lines[file].back();
      EXPECT_EQ(last.value("done", !moved), moved) << last;
      EXPECT_EQ(last.contains("error"), !moved) << last;
      if (!moved) {
        EXPECT_FALSE(last.at("error").get<std::string>().empty()) << last;
        EXPECT_EQ(last.at("bytes").get<uint64_t>(), 0u) << last;
      }
    }
  }
}

// A thirty-second re-attack (B-e): `recv 'host:tr/*' .` said only "no such file or directory".
// A wildcard that reached the server as a name is explained.
TEST_F(CliWordsServer, AWildcardTheShellLeftAloneIsExplained) {
  fs::create_directories(ws.root / "tr");
  write_text_file(ws.root / "tr" / "a", "a\n");
  for (const char* pattern : {"tr/*", "tr/?", "tr/[ab]"}) {
    auto r = run({"recv", "-q", std::string("127.0.0.1:") + pattern, ws.local.string()});
    EXPECT_EQ(r.exit_code, 1) << r.describe();
    EXPECT_NE(r.err.find("no such file or directory (wildcards are not expanded: the server runs no shell"),
              std::string::npos)
        << r.err;
  }
  auto r = run({"recv", "-q", "127.0.0.1:tr/b", ws.local.string()});
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_EQ(r.err.find("wildcards"), std::string::npos) << r.err;
}

// The bytes= of the put line whose file is `name` in a server log, or -1.
long long logged_bytes(const std::string& log, const std::string& name) {
  std::smatch m;
  const std::regex re("op=put file=\"" + name + "\" bytes=([0-9]+)[^\n]*result=\"([^\"\n]*)\"");
  return std::regex_search(log, m, re) ? std::stoll(m[1]) : -1;
}

// Waits until the server's temporary file for a put in `dir` holds at least `bytes`.
bool wait_for_temp(const fs::path& dir, uintmax_t bytes, double timeout_s) {
  const auto until = Clock::now() + std::chrono::duration<double>(timeout_s);
  while (Clock::now() < until) {
    for (const auto& p : temp_debris(dir)) {
      std::error_code ec;
      if (fs::file_size(p, ec) >= bytes && !ec) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

// `aesxfer send` of `file` to 127.0.0.1:`to` in the background of a shell that writes the client's
// PID to `pid_file` and waits for it.
ProcResult background_send(const Workspace& ws, const fs::path& file, const std::string& to, uint16_t port,
                           const fs::path& pid_file, const std::string& extra = "") {
  const std::string bin = AESXFER_BINARY;
  return run_process({"/bin/sh", "-c",
                      "'" + bin + "' send -q -l 40M " + extra + "'" + file.string() + "' 127.0.0.1:" + to +
                          " -P " + std::to_string(port) + " --timeout 20 --retries 0 & echo $! > '" +
                          pid_file.string() + "'; wait $!"},
                     {{"AESXFER_HOME", ws.home.string()}}, 120);
}

// A put that fails after MBs arrived says how many; a put cut by the server's own SIGTERM is logged
// as stopped by it, not as a connection closed during the transfer.
TEST(CliWordsServerLog, FailedPutBytesAndTheServersOwnStop) {
  Workspace ws;
  write_random_file(ws.local / "big", 80u << 20, 7);
  ServerProcess server(ws.home, ws.root);
  {
    ProcResult r;
    std::thread client(
        [&] { r = background_send(ws, ws.local / "big", "big", server.port(), ws.local / "pid"); });
    const bool moving = wait_for_temp(ws.root, 4u << 20, 60);
    const pid_t pid = pid_t(std::stol("0" + read_text_file(ws.local / "pid")));
    if (pid > 0) ::kill(pid, SIGKILL);  // the client dies mid-file
    client.join();
    ASSERT_TRUE(moving) << r.describe();
    ASSERT_TRUE(server.wait_for_log("op=put file=\"big\" ", 20)) << server.log();
    const long long bytes = logged_bytes(server.log(), "big");
    EXPECT_GE(bytes, 4ll << 20) << server.log();
    EXPECT_LT(bytes, 80ll << 20) << server.log();
  }
  ProcResult r;
  std::thread client(
      [&] { r = background_send(ws, ws.local / "big", "big2", server.port(), ws.local / "pid2"); });
  const bool moving = wait_for_temp(ws.root, 4u << 20, 60);
  EXPECT_EQ(server.stop(), 0);
  client.join();
  ASSERT_TRUE(moving) << r.describe();
  const std::string log = server.log();
  EXPECT_TRUE(has(log, "stopping on SIGTERM")) << log;
  EXPECT_TRUE(std::regex_search(
      log, std::regex("op=put file=\"big2\" bytes=[1-9][0-9]* [^\n]*result=\"failed: the server "
                      "was stopped \\(SIGTERM\\)\"")))
      << log;
  EXPECT_FALSE(has(log.substr(log.find("stopping on SIGTERM")), "closed during")) << log;
  EXPECT_EQ(r.exit_code, 1) << r.describe();
}

// A failed resumed put's log line says what its partial file holds: it said one batch of records
// less, those the receiver kept from the batch it was reading when the link broke (a
// twenty-second re-attack, N4).
TEST(CliWordsServerLog, AFailedResumedPutLogsWhatItsPartialFileHolds) {
  Workspace ws;
  write_random_file(ws.local / "big", 80u << 20, 9);
  ServerProcess server(ws.home, ws.root);
  ProcResult r;
  std::thread client([&] {
    // CBC: several records per batch (multi-buffer), where the kept batch's records went uncounted.
    r = background_send(ws, ws.local / "big", "big", server.port(), ws.local / "pid",
                        "--resume -c aes128-cbc ");
  });
  const bool moving = wait_for_temp(ws.root, 4u << 20, 60);
  // Killed in the middle of the receiver's next batch (16 records of 256 KiB, 0.8 s at 40 Mbit/s).
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const pid_t pid = pid_t(std::stol("0" + read_text_file(ws.local / "pid")));
  if (pid > 0) ::kill(pid, SIGKILL);
  client.join();
  ASSERT_TRUE(moving) << r.describe();
  ASSERT_TRUE(server.wait_for_log("op=put file=\"big\" ", 20)) << server.log();
  const fs::path partial = ws.root / ".big.aesxfer-partial";
  ASSERT_TRUE(fs::exists(partial)) << server.log();
  EXPECT_EQ(logged_bytes(server.log(), "big"), (long long)fs::file_size(partial)) << server.log();
}

// A thirteenth re-attack (H5): a get cut after MBs had left is logged with the bytes that left, as
// a failed put logs those that arrived (it said bytes=0).
TEST(CliWordsServerLog, FailedGetBytes) {
  Workspace ws;
  write_random_file(ws.root / "big", 80u << 20, 8);
  ServerProcess server(ws.home, ws.root);
  ProcResult r;
  const fs::path pid_file = ws.local / "pid";
  std::thread client([&] {
    r = run_process({"/bin/sh", "-c",
                     "'" + std::string(AESXFER_BINARY) + "' recv -q -l 40M 127.0.0.1:big '" +
                         (ws.local / "big").string() + "' -P " + std::to_string(server.port()) +
                         " --timeout 20 --retries 0 & echo $! > '" + pid_file.string() + "'; wait $!"},
                    {{"AESXFER_HOME", ws.home.string()}}, 120);
  });
  const bool moving = wait_for_temp(ws.local, 4u << 20, 60);
  const pid_t pid = pid_t(std::stol("0" + read_text_file(pid_file)));
  if (pid > 0) ::kill(pid, SIGKILL);  // the client dies mid-file
  client.join();
  ASSERT_TRUE(moving) << r.describe();
  ASSERT_TRUE(server.wait_for_log("op=get file=\"big\" ", 20)) << server.log();
  std::smatch m;
  const std::string log = server.log();
  ASSERT_TRUE(
      std::regex_search(log, m, std::regex("op=get file=\"big\" bytes=([0-9]+)[^\n]*result=\"failed")))
      << log;
  EXPECT_GE(std::stoll(m[1]), 4ll << 20) << log;
  EXPECT_LT(std::stoll(m[1]), 80ll << 20) << log;
}

// A fifth re-attack (F2): `serve` run by hand in an 8-bit locale printed a client's UTF-8 name as
// it came, and such a terminal reads its 0x9b byte as CSI (the name turned the log red). On a
// terminal the log follows the locale, as the client commands do (the journal keeps UTF-8).
TEST(CliWordsServerLog, OnAnEightBitTerminalHighBytesAreEscaped) {
  Workspace ws;
  const fs::path port_file = ws.tmp.path() / "port";
  int master = -1;
  const pid_t pid = ::forkpty(&master, nullptr, nullptr, nullptr);
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("AESXFER_HOME", ws.home.c_str(), 1);
    ::setenv("LC_ALL", "C", 1);
    ::execl(AESXFER_BINARY, AESXFER_BINARY, "serve", "--listen", "127.0.0.1", "-P", "0", "--root",
            ws.root.c_str(), "--port-file", port_file.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  std::string port;
  for (int i = 0; i < 1000 && port.empty(); ++i) {
    std::error_code ec;
    if (fs::exists(port_file, ec)) port = read_text_file(port_file);
    while (!port.empty() && !std::isdigit(static_cast<unsigned char>(port.back()))) port.pop_back();
    if (port.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::string out;
  const auto drain = [&] {  // the terminal's output so far (the server must not block writing it)
    char buf[4096];
    for (pollfd p{master, POLLIN, 0}; ::poll(&p, 1, 100) > 0;) {
      const ssize_t n = ::read(master, buf, sizeof buf);
      if (n <= 0) break;
      out.append(buf, size_t(n));
    }
  };
  const std::string name =
      "x\xc3\x9b"
      "31mRED\xc3\x9b"
      "0m";
  if (!port.empty()) {
    write_text_file(ws.local / "f", "data");
    ProcResult r =
        run_aesxfer({"send", (ws.local / "f").string(), "127.0.0.1:" + name, "-P", port, "-q"}, ws.home, 30);
    EXPECT_EQ(r.exit_code, 0) << r.describe();
    for (int i = 0; i < 100 && out.find("31mRED") == std::string::npos; ++i) drain();
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  drain();
  ::close(master);
  ASSERT_FALSE(port.empty()) << out;
  EXPECT_TRUE(fs::exists(ws.root / name));
  EXPECT_NE(out.find("31mRED"), std::string::npos) << out;
  EXPECT_EQ(out.find('\x9b'), std::string::npos) << proto::printable(out);
}

// recv --size of a file was ignored without a word, the whole file fetched, exit 0 (a
// twenty-second re-attack, N7): a usage error unless a source is HOST:/dev/zero.
TEST(CliWords, RecvSizeIsOnlyForDevZero) {
  Workspace ws;
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"recv", "--size", "10", "127.0.0.1:t/normal.txt", (ws.local / "x").string()},
        std::vector<std::string>{"recv", "--size", "0", "127.0.0.1:a", "127.0.0.1:b", ws.local.string()}}) {
    const ProcResult r = run_aesxfer(args, ws.home, 30);
    EXPECT_EQ(r.exit_code, 2) << r.describe();
    EXPECT_EQ(
        r.err,
        "aesxfer: recv: --size applies only to the source HOST:/dev/zero (a file is always fetched whole)\n");
  }
  EXPECT_TRUE(fs::is_empty(ws.local));
}

// The harness starts the tool with descriptors 0, 1 and 2 only, as a shell does: the tool's own
// handling of inherited descriptors (files::note_inherited_descriptors) must not be tested beside a
// stray one. `ls` holds one more while it reads the directory: its own, descriptor 3.
TEST(Harness, ChildrenGetOnlyTheStandardDescriptors) {
  ProcResult r = run_process({"/bin/ls", "/proc/self/fd"}, {}, 30);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_EQ(r.out, "0\n1\n2\n3\n") << r.describe();
}

}  // namespace
}  // namespace aesxfer::test
