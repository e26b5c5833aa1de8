// The parts of one parallel-stream file, handed out to its connections (client/parallel.cpp).
#pragma once

#include <atomic>
#include <cstddef>

namespace aesxfer::client {

// Part 0 is connection 0's first part: a put's commit rides behind connection 0's last part, and
// the server accepts it only on a session that joined the transfer (docs/PROTOCOL.md, "Parallel
// streams"), so connection 0 must take a part even when the others ask first (a thread started
// late on a busy machine). Every other part goes, in order, to whichever connection asks first,
// so one that finishes early takes the next instead of idling while a slow one ends a long range.
class PartQueue {
 public:
  explicit PartQueue(size_t n) : n_(n) {}
  // The next part for connection `conn`, false once none is left. Connection 0 is one thread.
  bool next(size_t conn, size_t* i) {
    if (conn == 0 && !first_taken_) {
      first_taken_ = true;
      *i = 0;
      return n_ > 0;
    }
    *i = next_.fetch_add(1);
    return *i < n_;
  }
  // Every part has been handed out (part 0 counts once connection 0 took it).
  bool empty() const { return first_taken_ && next_.load() >= n_; }
  // Parts after part 0 not handed out yet (any thread).
  size_t left() const {
    const size_t nx = next_.load();
    return nx >= n_ ? 0 : n_ - nx;
  }

 private:
  size_t n_;
  bool first_taken_ = false;  // read and written by connection 0's thread only
  std::atomic<size_t> next_{1};
};

}  // namespace aesxfer::client
