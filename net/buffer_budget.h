// The memory of the streams of one process (a server's sessions) for their record batches,
// bounded in all (serve --max-buffer-memory). A stream holds two batches of up to 16 records
// (net/transfer.cpp) from its first byte to its last, and a client that stops reading keeps them
// filled until the idle timeout: with 1 MiB records about 35 MB a get, 1.65 GB for the sessions
// one key may hold (a forty-second re-attack, A-F2). A stream takes the records per batch it
// wants while they fit in the budget, fewer when they do not (its lanes, not its bytes, are what
// it gives up), and never fewer than one: past the budget a process holds at most two records
// per stream more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>

namespace aesxfer::net {

class BufferBudget {
 public:
  explicit BufferBudget(uint64_t max) : max_(max) {}
  BufferBudget(const BufferBudget&) = delete;
  BufferBudget& operator=(const BufferBudget&) = delete;

  uint64_t used() const {
    std::lock_guard<std::mutex> g(mu_);
    return used_;
  }

  // One stream's share: `records()` records per batch, each costing `per_record` bytes (both
  // batches), granted from `want` down to 1. Without a budget (nullptr), `want`.
  class Lease {
   public:
    Lease(BufferBudget* b, uint64_t per_record, size_t want) : b_(b), records_(want) {
      if (!b_) return;
      std::lock_guard<std::mutex> g(b_->mu_);
      while (records_ > 1 && b_->used_ + records_ * per_record > b_->max_) --records_;
      bytes_ = records_ * per_record;
      b_->used_ += bytes_;
    }
    ~Lease() {
      if (!b_) return;
      std::lock_guard<std::mutex> g(b_->mu_);
      b_->used_ -= bytes_;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    size_t records() const { return records_; }

   private:
    BufferBudget* b_;
    size_t records_;
    uint64_t bytes_ = 0;
  };

 private:
  mutable std::mutex mu_;
  uint64_t max_;
  uint64_t used_ = 0;
};

}  // namespace aesxfer::net
