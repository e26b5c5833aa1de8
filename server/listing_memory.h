// The memory every listing (recv -r) of a server holds, bounded in all (serve --max-list-memory).
// Listings charge as they walk; when a charge would pass the bound, the youngest listing still
// walking gives way (it is refused busy and its charge goes back) and the older ones wait for
// the room, so that listings that start together are served in the order they came for as long
// as they fit, rather than each one's next charge failing at once (a forty-first re-attack, A-F2:
// four listings started together were all refused although two fitted). A wait is bounded: a
// listing that finds no room within kMaxWait is refused too.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>

namespace aesxfer::server {

class ListingMemory {
 public:
  static constexpr std::chrono::milliseconds kMaxWait{2000};

  ListingMemory() = default;
  ListingMemory(const ListingMemory&) = delete;
  ListingMemory& operator=(const ListingMemory&) = delete;
  uint64_t used() const;

  // One listing's charge: walking from its construction until walked(), held until it goes.
  class Share {
   public:
    Share(ListingMemory& m, uint64_t cap);
    Share(const Share&) = delete;
    Share& operator=(const Share&) = delete;
    ~Share();
    // Adds n bytes, waiting for older listings' room as the class says, or throws
    // proto::Failure (busy) when this listing is to give way.
    void add(uint64_t n);
    // Gives back n bytes of what add() took (all of it with ~0).
    void release(uint64_t n) noexcept;
    // The walk is over: the listing holds its charge until it goes, and waits for nobody.
    void walked() noexcept;

   private:
    ListingMemory& m_;
    uint64_t cap_;
    uint64_t seq_;
    uint64_t held_ = 0;
    bool walking_ = true;
    unsigned asked_ = 0;     // under m_.mu_: older listings waiting for this one's room
    bool gave_way_ = false;  // under m_.mu_: refused busy; counted in giving_back_ while it holds
  };

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t used_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t giving_back_ = 0;            // listings refused busy that still hold a charge
  std::map<uint64_t, Share*> walking_;  // by arrival
};

}  // namespace aesxfer::server
