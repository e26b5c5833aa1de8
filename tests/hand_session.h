// An authenticated session with a test's server, driven by hand with the product's own handshake
// and record layer, so that each request can be shaped at will (and several run at once from
// threads). Every read has the given timeout, so a server that hangs shows as a Failure.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "crypto/suite.h"
#include "files/keystore.h"
#include "net/conn.h"
#include "net/handshake_driver.h"
#include "net/transfer.h"
#include "proto/handshake.h"
#include "proto/listing.h"
#include "proto/messages.h"
#include "tests/harness.h"

namespace aesxfer::test {

inline proto::Message make_request(proto::Op op, const std::string& path, const std::string& text = {},
                                   uint64_t size = 0) {
  proto::Message m;
  m.type = proto::MsgType::request;
  m.op = op;
  m.path = path;
  m.text = text;
  m.size = size;
  m.mode = 0644;
  return m;
}

// The longest Request of kind `op` that a decoder takes: a kMaxPath path and
// name, and of every combination of flags the one that encodes longest (a resumed get with a
// digest, a ranged put, a pipelined request's tag).
inline proto::Message longest_request(proto::Op op) {
  proto::Message best;
  size_t best_len = 0;
  for (unsigned flags = 0; flags <= proto::kRequestFlags; ++flags) {
    if (flags & ~unsigned(proto::kRequestFlags)) continue;
    proto::Message m = make_request(op, std::string(proto::kMaxPath, 'p'), std::string(proto::kMaxPath, 'n'));
    m.flags = uint8_t(flags);
    m.size = (flags & proto::kFlagUnsized) ? 0 : 1000;
    m.offset = (flags & proto::kFlagResume) ? 10 : 0;
    if (op == proto::Op::get && (flags & proto::kFlagResume))
      m.digest = std::string(proto::kPrefixMacLen, 'd');
    if (flags & proto::kFlagRange) {
      m.xfer_id.fill(0xa5);
      m.nparts = 2;
      m.length = 500;
    }
    m.tag = 0x01020304;
    std::vector<uint8_t> b;
    try {
      proto::encode(m, b);
    } catch (const proto::Failure&) {
      continue;
    }
    if (proto::decode(b) && b.size() > best_len) {
      best = m;
      best_len = b.size();
    }
  }
  return best;
}

class HandSession {
 public:
  // Throws proto::Failure when the handshake fails (a refused cipher, say).
  HandSession(uint16_t port, const fs::path& identity, const std::string& cipher = "aes128-gcm",
              const std::string& mac = "none",
              std::chrono::milliseconds timeout = std::chrono::milliseconds(8000)) {
    proto::Identity id = files::load_or_create_identity(identity);
    start(net::connect_tcp("127.0.0.1", port, std::chrono::milliseconds(5000)), id, cipher, mac, timeout);
  }
  // Over a socket the caller connected itself (to choose when its descriptor number was taken);
  // the session owns it from here.
  HandSession(int connected_fd, const proto::Identity& id, const std::string& cipher = "aes128-gcm",
              const std::string& mac = "none",
              std::chrono::milliseconds timeout = std::chrono::milliseconds(8000)) {
    start(connected_fd, id, cipher, mac, timeout);
  }
  bool welcome_ok = false;
  net::Conn& conn() { return *conn_; }
  const proto::SessionKeys& keys() const { return *keys_; }

  proto::Message ask(const proto::Message& req) {
    conn_->send_message(req);
    return conn_->recv_message("the request");
  }
  // A put (plain or resumed, from the offset the server answers): on ok sends data and returns
  // the Result; otherwise the Response.
  proto::Message put(proto::Message req, const std::string& data) {
    req.size = data.size();
    proto::Message resp = ask(req);
    if (resp.status != proto::Status::ok) return resp;
    int fd = memfd(data);
    net::send_stream(*conn_, fd, data.size(), nullptr, net::StreamOptions{resp.size, false});
    ::close(fd);
    return conn_->recv_message("the result");
  }
  // A get: on ok receives the file into *out and answers with an ok Result.
  proto::Message get(const proto::Message& req, std::string* out) {
    proto::Message resp = ask(req);
    if (resp.status != proto::Status::ok) return resp;
    int fd = memfd("");
    net::recv_stream(*conn_, fd, resp.size, nullptr);
    out->assign(resp.size, '\0');
    if (resp.size && ::pread(fd, out->data(), resp.size, 0) != ssize_t(resp.size)) out->clear();
    ::close(fd);
    proto::Message r;
    r.type = proto::MsgType::result;
    conn_->send_message(r);
    return resp;
  }
  // A list: on ok reads every page into *entries.
  proto::Message list(const proto::Message& req, std::vector<proto::ListEntry>* entries) {
    proto::Message resp = ask(req);
    if (resp.status != proto::Status::ok) return resp;
    for (bool last = false; !last;) {
      net::Conn::Incoming in = conn_->recv_record("the listing");
      auto page = proto::decode_list_page(in.payload);
      if (!page) throw proto::Failure("bad listing page");
      entries->insert(entries->end(), page->entries.begin(), page->entries.end());
      last = page->last;
    }
    return resp;
  }
  // A ranged put (one part of a parallel-stream put): on ok streams `length` zero bytes as the
  // range and returns the Result; otherwise the Response.
  proto::Message put_part(const proto::Message& req) {
    proto::Message resp = ask(req);
    if (resp.status != proto::Status::ok) return resp;
    net::send_stream(*conn_, -1, req.length, nullptr, net::StreamOptions{0, false, true, req.offset});
    return conn_->recv_message("the result");
  }
  // The commit of a parallel-stream put this connection carried a part of.
  proto::Message commit(proto::Message req) {
    req.op = proto::Op::commit;
    return ask(req);
  }
  void bye() {
    proto::Message b;
    b.type = proto::MsgType::bye;
    conn_->send_message(b);
  }

 private:
  void start(int fd, const proto::Identity& id, const std::string& cipher, const std::string& mac,
             std::chrono::milliseconds timeout) {
    conn_ = std::make_unique<net::Conn>(fd, timeout, "test");
    proto::ClientHandshake hs(id, *crypto::find_cipher(cipher), *crypto::find_mac(mac));
    proto::Step step = hs.start();
    conn_->write_all(step.send.data(), step.send.size());
    step = net::drive_handshake(*conn_, hs);
    if (step.ec) throw proto::Failure("handshake: " + step.ec.message() + " " + step.detail);
    step = hs.confirm_host();
    conn_->write_all(step.send.data(), step.send.size());
    keys_ = std::make_unique<proto::SessionKeys>(hs.keys());
    conn_->start_records(*keys_, true);
    proto::Message w = conn_->recv_message("the welcome");
    welcome_ok = w.type == proto::MsgType::welcome && w.status == proto::Status::ok;
  }

  static int memfd(const std::string& data) {
    int fd = ::memfd_create("hand-session", MFD_CLOEXEC);
    if (fd < 0 || ::pwrite(fd, data.data(), data.size(), 0) != ssize_t(data.size()))
      throw proto::Failure("memfd failed");
    return fd;
  }
  std::unique_ptr<net::Conn> conn_;
  std::unique_ptr<proto::SessionKeys> keys_;
};

}  // namespace aesxfer::test
