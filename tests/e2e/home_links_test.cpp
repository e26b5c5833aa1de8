// A twelfth re-attack (issue 24, G2 and G3): what the commands write into $AESXFER_HOME is never
// written through a symbolic link another user planted there, and a home that exists keeps its
// mode. keygen wrote the public key through a link at its temporary name (the link's target,
// any file root may write, got the key line and mode 0644); the first contact appended to a
// known_hosts link; authorize chmodded the directory a home link named to 0700.
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "files/keystore.h"
#include "proto/handshake.h"
#include "tests/harness.h"

namespace aesxfer::test {
namespace {

constexpr uid_t kOther = 65534;  // the tests run as root: "another local user"

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

// A file of the user's that a planted link points at: it must come out as it went in.
struct Victim {
  fs::path path;
  explicit Victim(const fs::path& p) : path(p) {
    write_text_file(p, "precious\n");
    fs::permissions(p, fs::perms(0600));
  }
  void expect_untouched() const {
    EXPECT_EQ(read_text_file(path), "precious\n");
    EXPECT_EQ(mode_of(path), 0600u);
  }
};

// A link at `at` to `target`, owned by the other user.
void plant(const fs::path& at, const fs::path& target) {
  fs::create_symlink(target, at);
  ASSERT_EQ(::lchown(at.c_str(), kOther, kOther), 0);
}

// A twenty-ninth re-attack (N1): two processes making the identity of a new home at the same
// moment: one read the file the other had created and not yet written, "identity file ... is
// damaged" (about one start in twenty). Written whole, then linked to its name: every one of many
// threads racing on a fresh home loads the one key.
TEST(HomeLinks, ProcessesMakingOneIdentityAtOnceAllLoadIt) {
  for (int round = 0; round < 20; ++round) {
    TempDir home("aesxfer-idrace");
    const fs::path id = home.path() / "new" / "id_ed25519";
    constexpr int kRacers = 8;
    std::vector<std::string> keys(kRacers), errors(kRacers);
    std::vector<std::thread> racers;
    for (int i = 0; i < kRacers; ++i)
      racers.emplace_back([&, i] {
        try {
          const proto::Identity got = files::load_or_create_identity(id);
          keys[i] = proto::fingerprint(got.pk);
        } catch (const std::exception& e) {
          errors[i] = e.what();
        }
      });
    for (auto& r : racers) r.join();
    for (int i = 0; i < kRacers; ++i) {
      EXPECT_EQ(errors[i], "") << "round " << round;
      EXPECT_EQ(keys[i], keys[0]) << "round " << round;
    }
    for (const auto& e : fs::directory_iterator(id.parent_path()))
      EXPECT_TRUE(e.path().filename() == "id_ed25519" || e.path().filename() == "id_ed25519.pub") << e.path();
  }
}

// A thirtieth re-attack (N2): AESXFER_HOME reached through another user's link in a sticky
// directory: keygen wrote the secret key into that user's 0777 directory, and serve made its host
// key there before refusing the home. The home's way is walked by the kernel's rule first.
TEST(HomeLinks, AHomeThroughAnotherUsersLinkGetsNoKey) {
  TempDir base("aesxfer-homelink");
  const StickyShare s(base.path());
  const fs::path theirs = s.shared / "nbdir";
  fs::create_directories(theirs);
  fs::permissions(theirs, fs::perms(0777));
  ASSERT_EQ(::chown(theirs.c_str(), kNobody, kNobody), 0);
  const fs::path home = s.link("vh1", theirs);
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"keygen"}, {"serve", "--listen", "127.0.0.1", "-P", "0", "--root", base.path().string()}}) {
    auto r = run_aesxfer(args, home, 20);
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_NE(r.err.find("vh1: a symbolic link owned by uid 65534 in a sticky directory"), std::string::npos)
        << r.describe();
    EXPECT_TRUE(fs::is_empty(theirs)) << args[0];
  }
}

// A thirty-second re-attack (A-N5): a home below a directory another user owns (no link on the way)
// got serve's host key before serve refused the home by StrictModes. The way is judged first now:
// nothing is made there.
TEST(HomeLinks, ServeMakesNothingInAHomeItWouldRefuse) {
  TempDir base("aesxfer-homeway");
  const StickyShare s(base.path());
  const fs::path theirs = s.shared / "A";
  fs::create_directories(theirs);
  fs::permissions(theirs, fs::perms(0777));
  ASSERT_EQ(::chown(theirs.c_str(), kNobody, kNobody), 0);
  auto r = run_aesxfer({"serve", "--listen", "127.0.0.1", "-P", "0", "--root", base.path().string()},
                       theirs / "B" / "C", 20);
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("A is owned by uid 65534"), std::string::npos) << r.describe();
  EXPECT_TRUE(fs::is_empty(theirs)) << r.describe();
}

// A thirty-first re-attack (N1): the home's missing directories were made by path after the
// check, so another user's link planted in between took root's new home and key into their
// directory (won in ten tries). Made with mkdirat and opened without following a link now: another
// user swapping a link in and out of the way as fast as it can never gets a home in theirs.
TEST(HomeLinks, AHomeMadeWhileAnotherUserSwapsALinkOnItsWayNeverLandsInTheirs) {
  TempDir base("aesxfer-homerace");
  fs::permissions(base.path(), fs::perms(0711));  // the other user reaches the shared directory
  const StickyShare s(base.path());
  const fs::path theirs = s.shared / "nbdir", way = s.shared / "r";
  fs::create_directories(theirs);
  fs::permissions(theirs, fs::perms(0777));
  ASSERT_EQ(::chown(theirs.c_str(), kNobody, kNobody), 0);
  const std::string target = theirs.string(), link = way.string();
  const pid_t racer = ::fork();
  ASSERT_GE(racer, 0);
  if (racer == 0) {  // the other user: only system calls from here
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kNobody, kNobody, kNobody) != 0 ||
        ::setresuid(kNobody, kNobody, kNobody) != 0)
      ::_exit(1);
    for (;;) {  // the link there about half the time, in and out every few microseconds
      if (::symlink(target.c_str(), link.c_str()) != 0) continue;
      ::usleep(20);
      ::unlink(link.c_str());
      ::usleep(20);
    }
  }
  int seen = 0;  // the racer runs: its link is seen
  for (int i = 0; i < 200000 && seen < 100; ++i) seen += fs::is_symlink(fs::symlink_status(way));
  EXPECT_GT(seen, 0) << "the other user's link never appeared";
  int made = 0;
  for (int i = 0; i < 300; ++i) {
    try {
      files::load_or_create_identity(way / ("h" + std::to_string(i)) / "id_ed25519");
      ++made;
    } catch (const std::exception&) {  // refused: the link was there, or came in between
    }
    std::error_code ec;
    if (!fs::is_symlink(way, ec)) fs::remove_all(way, ec);  // ours: the next try starts without it
  }
  ::kill(racer, SIGKILL);
  ::waitpid(racer, nullptr, 0);
  std::printf("[ raced ] 300 homes made beside a link swapped in and out: %d made here, %d refused\n", made,
              300 - made);
  EXPECT_TRUE(fs::is_empty(theirs)) << "a home landed in the other user's directory";
}

TEST(HomeLinks, KeygenNeverWritesThroughALinkAtItsTemporaryName) {
  TempDir t{"aesxfer-homelinks"};
  const fs::path home = t / "home";
  fs::create_directories(home);
  Victim victim(t / "victim.txt");
  plant(home / "id_ed25519.pub.tmp", victim.path);
  auto r = run_aesxfer({"keygen"}, home);
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  victim.expect_untouched();
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(home / "id_ed25519.pub")));
  EXPECT_EQ(read_text_file(home / "id_ed25519.pub").rfind("aesxfer-ed25519 ", 0), 0u);
  EXPECT_EQ(mode_of(home / "id_ed25519.pub"), 0644u);
  // The temporary name is random now (a thirty-first re-attack's fix writes relative to the home's
  // descriptor): the planted link is neither followed nor used, and stays as it was.
  EXPECT_TRUE(fs::is_symlink(home / "id_ed25519.pub.tmp"));
}

TEST(HomeLinks, TheFirstContactNeverAppendsThroughAKnownHostsLink) {
  Workspace ws;
  write_text_file(ws.local / "f", "f\n");
  Victim victim(ws.tmp / "victim.txt");
  ServerProcess server(ws.home, ws.root);
  plant(ws.home / "known_hosts", victim.path);
  auto r = run_aesxfer(
      {"send", "-q", (ws.local / "f").string(), "127.0.0.1:f", "-P", std::to_string(server.port())}, ws.home);
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find("known_hosts: is a symbolic link"), std::string::npos) << r.err;
  victim.expect_untouched();
  EXPECT_FALSE(fs::exists(ws.root / "f")) << "nothing goes to a host that could not be pinned";
  EXPECT_EQ(server.stop(), 0);
}

// A sixteenth re-attack (L7): a known_hosts that another user owns, or that group or others may
// write, was used as is, so in a shared or temporary home another user could pin a key of theirs.
// Held to the identity's and the configuration's rule: not used, and the command says why.
TEST(HomeLinks, AKnownHostsOthersCouldWriteIsNotUsed) {
  Workspace ws;
  write_text_file(ws.local / "f", "f\n");
  ServerProcess server(ws.home, ws.root);
  const std::vector<std::string> send{"send",        "-q", (ws.local / "f").string(),
                                      "127.0.0.1:f", "-P", std::to_string(server.port())};
  ASSERT_EQ(run_aesxfer(send, ws.home).exit_code, 0);  // pins the host
  const fs::path kh = ws.home / "known_hosts";
  fs::permissions(kh, fs::perms(0666));
  auto r = run_aesxfer(send, ws.home);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("known_hosts: not used: writable by group or others (mode 0666)"), std::string::npos)
      << r.err;
  fs::permissions(kh, fs::perms(0644));
  ASSERT_EQ(::chown(kh.c_str(), kOther, kOther), 0);
  r = run_aesxfer(send, ws.home);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("known_hosts: not used: owned by uid 65534"), std::string::npos) << r.err;
  ASSERT_EQ(::chown(kh.c_str(), 0, 0), 0);
  EXPECT_EQ(run_aesxfer(send, ws.home).exit_code, 0);
  EXPECT_EQ(server.stop(), 0);
}

TEST(HomeLinks, AuthorizeLeavesTheModeOfAHomeThatExists) {
  TempDir t{"aesxfer-homelinks"};
  const fs::path shared = t / "shared";
  fs::create_directories(shared);
  fs::permissions(shared, fs::perms(0755));
  fs::create_directories(t / "evil");
  plant(t / "evil" / "h", shared);
  const fs::path keys = t / "keys";
  ASSERT_EQ(run_aesxfer({"keygen"}, keys).exit_code, 0);
  const std::string line = read_text_file(keys / "id_ed25519.pub");
  auto r = run_aesxfer({"authorize", line.substr(0, line.size() - 1)}, t / "evil" / "h");
  EXPECT_NE(r.exit_code, 0) << r.describe();  // a home through another user's link: not trusted
  EXPECT_EQ(mode_of(shared), 0755u);
  EXPECT_FALSE(fs::exists(shared / "authorized_keys"));
}

// A thirteenth re-attack (H4): a home another user made (in a shared directory) holds their key;
// it is never taken as this user's identity, by keygen, a transfer or -i, whatever its mode.
TEST(HomeLinks, AnotherUsersIdentityIsNotTaken) {
  TempDir t{"aesxfer-homelinks"};
  fs::permissions(t.path(), fs::perms(0711));
  const fs::path theirs = t / "home";
  fs::create_directories(theirs);  // theirs, and writable by all (a shared directory's)
  ASSERT_EQ(::chown(theirs.c_str(), kOther, kOther), 0);
  fs::permissions(theirs, fs::perms(0777));
  auto kg = run_process(
      {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", AESXFER_BINARY, "keygen"},
      {{"AESXFER_HOME", theirs.string()}});
  ASSERT_EQ(kg.exit_code, 0) << kg.describe();
  const std::string want = "is owned by uid 65534, not by this user (uid 0)";
  auto r = run_aesxfer({"keygen"}, theirs);
  EXPECT_NE(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.err.find(want), std::string::npos) << r.describe();
  EXPECT_EQ(r.out.find("aesxfer-ed25519 "), std::string::npos) << "their key is not printed as ours";
  TempDir mine{"aesxfer-homelinks"};
  auto i =
      run_aesxfer({"send", "-i", (theirs / "id_ed25519").string(), "/etc/hostname", "127.0.0.1:x", "-P", "1"},
                  mine.path());
  EXPECT_NE(i.exit_code, 0) << i.describe();
  EXPECT_NE(i.err.find(want), std::string::npos) << i.describe();
}

}  // namespace
}  // namespace aesxfer::test
