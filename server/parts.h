// Parallel streams (--streams N, docs/PROTOCOL.md "Parallel streams"): one file moved as N byte
// ranges over N connections of the same client.
//
//   put:  every part's request names the transfer (a random 16-byte id) and its range. The first
//         part to arrive creates the transfer's temporary file; the others join it (same client
//         key, same destination, size, part count). Each range is verified by its own end record
//         (SHA-256 and length of the range). The client then sends `commit` on one of the
//         transfer's connections; the file is renamed into place only when every part verified
//         and the ranges cover the file exactly. A transfer whose sessions all end without a
//         commit leaves nothing behind: the temporary file goes with the last reference.
//   get:  `stat` gives size, mode and mtime; each connection then asks for one range, which the
//         server checks against the file's current size (a file that changed fails the part).
#pragma once
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/conn.h"
#include "proto/handshake.h"
#include "proto/messages.h"

namespace aesxfer::net {

struct PartsTransfer;

class PartsRegistry {
 public:
  // Transfers this session took part in, kept alive until its commit or the session's end.
  using Held = std::vector<std::shared_ptr<PartsTransfer>>;

  // Serves req when it belongs to parallel streams (kFlagRange, commit, stat) and returns true;
  // false leaves it to the caller. Throws Failure when the connection cannot continue.
  bool serve(Conn& c, const proto::SessionKeys& keys, const std::filesystem::path& root_real,
             const proto::Message& req, Held& held, const std::function<void(const std::string&)>& log);

 private:
  std::shared_ptr<PartsTransfer> join(const proto::PublicKey& client, const proto::Message& req,
                                      const std::filesystem::path& dest, bool dev_null, proto::Status& st,
                                      std::string& why);
  std::mutex mu_;
  std::map<std::string, std::weak_ptr<PartsTransfer>> live_;  // key: client key || xfer id
};

}  // namespace aesxfer::net
