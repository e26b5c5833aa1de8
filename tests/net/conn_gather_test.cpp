// net/conn.h, gathering (issue 16 item 3): writes are held and leave in one send, in order, when
// the buffer fills, before the connection waits for the peer, and when gathering ends.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "net/conn.h"

namespace aesxfer::net {
namespace {

using namespace std::chrono_literals;

struct Pair {
  std::unique_ptr<Conn> a, b;
  Pair() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) throw std::runtime_error("socketpair");
    a = std::make_unique<Conn>(sv[0], 5000ms, "b");
    b = std::make_unique<Conn>(sv[1], 5000ms, "a");
  }
  // What b can read without waiting.
  std::vector<uint8_t> available() {
    std::vector<uint8_t> out(1 << 20);
    ssize_t n = ::recv(b->fd(), out.data(), out.size(), MSG_DONTWAIT);
    out.resize(n > 0 ? size_t(n) : 0);
    return out;
  }
};

std::vector<uint8_t> bytes(size_t n, uint8_t first) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = uint8_t(first + i);
  return v;
}

TEST(ConnGather, HeldUntilFlushThenInOrder) {
  Pair p;
  p.a->set_gather(true);
  auto x = bytes(100, 1), y = bytes(3000, 7);
  p.a->write_all(x.data(), x.size());
  iovec iov[1] = {{y.data(), y.size()}};
  p.a->writev_all(iov, 1);
  EXPECT_TRUE(p.available().empty());  // nothing left yet
  p.a->flush();
  auto got = p.available();
  std::vector<uint8_t> want = x;
  want.insert(want.end(), y.begin(), y.end());
  EXPECT_EQ(got, want);
}

// A fifty-fifth re-attack (C55-1): a pipelined put counted its file "sent whole" while its bytes
// were still held here. holding() says whether anything is held, and on_flushed runs once what was
// held has gone out (never while it is still held).
TEST(ConnGather, SaysWhatIsHeldAndWhenItWentOut) {
  Pair p;
  int flushed = 0;
  p.a->on_flushed([&] {
    ++flushed;
    EXPECT_FALSE(p.a->holding());
  });
  p.a->set_gather(true);
  EXPECT_FALSE(p.a->holding());
  auto x = bytes(100, 1);
  p.a->write_all(x.data(), x.size());
  EXPECT_TRUE(p.a->holding());
  EXPECT_EQ(flushed, 0);
  EXPECT_TRUE(p.available().empty());
  p.a->flush();
  EXPECT_EQ(flushed, 1);
  EXPECT_FALSE(p.a->holding());
  EXPECT_EQ(p.available(), x);
  p.a->flush();  // nothing held: nothing went out
  EXPECT_EQ(flushed, 1);
  auto big = bytes(Conn::kGatherBytes, 50);
  std::vector<uint8_t> got(x.size() + big.size());
  std::thread reader([&] { p.b->read_exact(got.data(), got.size()); });
  p.a->write_all(x.data(), x.size());
  iovec iov[1] = {{big.data(), big.size()}};
  p.a->writev_all(iov, 1);  // too large to hold: what was held goes out first, by itself
  reader.join();
  EXPECT_EQ(flushed, 2);
  EXPECT_FALSE(p.a->holding());
  p.a->on_flushed(nullptr);
}

TEST(ConnGather, AWriteLargerThanTheRoomGoesOutAfterWhatIsHeld) {
  Pair p;
  p.a->set_gather(true);
  auto x = bytes(10, 1), big = bytes(Conn::kGatherBytes, 50);
  std::vector<uint8_t> got(x.size() + big.size());
  std::thread reader([&] { p.b->read_exact(got.data(), got.size()); });  // the socket buffer may be smaller
  p.a->write_all(x.data(), x.size());
  iovec iov[1] = {{big.data(), big.size()}};
  p.a->writev_all(iov, 1);  // no flush: it went out by itself, after x
  reader.join();
  std::vector<uint8_t> want = x;
  want.insert(want.end(), big.begin(), big.end());
  EXPECT_EQ(got, want);
}

TEST(ConnGather, AReadThatWouldWaitSendsWhatIsHeldFirst) {
  Pair p;
  p.a->set_gather(true);
  auto q = bytes(5, 9);
  p.a->write_all(q.data(), q.size());
  // b answers only once it has the question: a's read must send it before waiting.
  std::thread peer([&] {
    uint8_t in[5];
    p.b->read_exact(in, sizeof in);
    uint8_t reply = uint8_t(in[0] + in[4]);
    p.b->write_all(&reply, 1);
  });
  uint8_t r = 0;
  p.a->read_exact(&r, 1);
  peer.join();
  EXPECT_EQ(r, uint8_t(9 + 13));
}

TEST(ConnGather, EndingGatheringSendsWhatIsHeld) {
  Pair p;
  p.a->set_gather(true);
  auto x = bytes(42, 3);
  p.a->write_all(x.data(), x.size());
  p.a->set_gather(false);
  EXPECT_EQ(p.available(), x);
  p.a->write_all(x.data(), x.size());  // not gathering: straight out
  EXPECT_EQ(p.available(), x);
}

}  // namespace
}  // namespace aesxfer::net
