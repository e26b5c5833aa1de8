// The hashing a client can make the server do without sending data: a probe (send --resume)
// hashes the server's copy of a file, a get with the resume flag hashes the prefix it offers.
// Each costs the server a read of up to a whole file for about a hundred bytes sent, so a
// session remembers what it hashed, keyed by the file's identity and state (device, inode,
// size, modification and change times) and the length hashed, and has a budget of bytes it may
// hash at all (serve --max-probe-hash); past it a probe answers as if nothing were kept and a
// resumed get starts from 0, which costs the client bandwidth and never correctness
// (docs/SECURITY.md, "The cost of a probe").
#pragma once
#include <sys/stat.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "files/resume.h"
#include "files/version.h"
#include "proto/handshake.h"
#include "server/name_budget.h"

namespace aesxfer::server {

class PrefixDigests {
 public:
  explicit PrefixDigests(uint64_t budget) : left_(budget) {}
  // The keyed digest of the first len bytes of fd (files::prefix_mac) and, with need_sum, the
  // file checksum's state after them (files::scan_prefix; else `sum` is a fresh state), whose
  // fstat is st: from this session's memory when the same file in the same state was hashed to
  // the same length before; nullopt when hashing it would overrun the session's budget (nothing
  // is read then). Throws Failure as prefix_mac does (the file shrank meanwhile).
  std::optional<files::PrefixScan> get(const proto::SessionKeys& keys, int fd, const struct stat& st,
                                       uint64_t len, bool need_sum);
  // What get() hashed for the same file, state and length in this session, without reading:
  // a resumed put after its probe starts its checksum there.
  std::optional<files::PrefixScan> remembered(const struct stat& st, uint64_t len) const;
  // Keeps `scan` of the first len bytes under the file's new state st: the server itself cut the
  // file back to len bytes (a resumed put's partial file), which changed its times but not those
  // bytes (the session holds its lock).
  void remember(const struct stat& st, uint64_t len, const files::PrefixScan& scan);
  // Every session of one client key also draws on the key's allowance (bytes), when given: the
  // session's budget alone bounded nothing, since a new session costs only a handshake (a
  // fiftieth re-attack, A50-1).
  void share_key_allowance(std::shared_ptr<NameBudget> key) { key_ = std::move(key); }
  // True when the last refusal of get() was the key's allowance, not the session's budget.
  bool key_spent() const { return key_spent_; }
  uint64_t bytes_hashed() const { return hashed_; }
  uint64_t hits() const { return hits_; }

 private:
  struct Key {
    files::FileVersion version;
    uint64_t len;
    auto operator<=>(const Key&) const = default;
  };
  static Key key_of(const struct stat& st, uint64_t len);
  // Digests remembered (about 100 bytes each; the oldest key order gives way), and the checksum
  // states of the latest scans (770 bytes each: a resumed get or put uses one right after its
  // scan, so a few suffice, and a client cannot make a session hold megabytes of them).
  static constexpr size_t kMemo = 4096, kSums = 64;
  std::map<Key, std::string> macs_;
  std::map<Key, crypto::FileChecksum> sums_;
  std::deque<Key> mac_order_, sum_order_;  // oldest first: the oldest gives way
  void keep(const Key& k, const files::PrefixScan& scan);
  uint64_t left_;
  uint64_t hashed_ = 0, hits_ = 0;
  std::shared_ptr<NameBudget> key_;
  bool key_spent_ = false;
};

}  // namespace aesxfer::server
