#include "client/transfer.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "crypto/sha256.h"
#include "crypto/util.h"

namespace aesxfer::net {

using proto::RecordType;

std::array<uint8_t, 32> send_stream(Conn& c, int fd, uint64_t size, const ProgressFn& progress) {
  crypto::Sha256 hash;
  uint64_t done = 0;
  while (done < size) {
    size_t n = size_t(std::min<uint64_t>(proto::kDefaultPayload, size - done));
    uint8_t* p = c.payload_buffer();
    if (fd < 0) {
      std::memset(p, 0, n);  // sealing encrypts in place: refill every record
    } else {
      size_t got = 0;
      while (got < n) {
        ssize_t r = ::read(fd, p + got, n - got);
        if (r > 0) {
          got += size_t(r);
        } else if (r == 0) {
          throw Failure("file shrank while being sent (" + std::to_string(done + got) + " of " +
                        std::to_string(size) + " bytes)");
        } else if (errno != EINTR) {
          throw Failure(std::string("read error: ") + std::strerror(errno));
        }
      }
    }
    hash.update(p, n);
    c.send_record(RecordType::data, 0, n);
    done += n;
    if (progress) progress(done);
  }
  std::array<uint8_t, 32> digest;
  hash.final(digest.data());
  uint8_t* p = c.payload_buffer();
  std::memcpy(p, digest.data(), 32);
  crypto::store_be64(p + 32, size);
  c.send_record(RecordType::end, proto::kFlagFinal, 40);
  return digest;
}

std::array<uint8_t, 32> recv_stream(Conn& c, int fd, uint64_t size, const ProgressFn& progress) {
  crypto::Sha256 hash;
  uint64_t done = 0;
  for (;;) {
    Conn::Incoming in = c.recv_record("the transfer");
    if (in.hdr.type == RecordType::data) {
      if (in.payload.size() > size - done)
        throw RecvError("peer sent more data than announced", int(proto::Status::integrity));
      hash.update(in.payload.data(), in.payload.size());
      if (fd >= 0) {
        const uint8_t* p = in.payload.data();
        size_t n = in.payload.size();
        while (n > 0) {
          ssize_t w = ::write(fd, p, n);
          if (w > 0) {
            p += w;
            n -= size_t(w);
          } else if (w < 0 && errno == EINTR) {
            continue;
          } else if (w < 0 && (errno == ENOSPC || errno == EDQUOT)) {
            throw RecvError("no space left on device", int(proto::Status::no_space));
          } else {
            throw RecvError(std::string("write error: ") + std::strerror(errno), int(proto::Status::io_error));
          }
        }
      }
      done += in.payload.size();
      if (progress) progress(done);
    } else if (in.hdr.type == RecordType::end) {
      if (!(in.hdr.flags & proto::kFlagFinal) || in.payload.size() != 40)
        throw RecvError("malformed end record", int(proto::Status::integrity));
      if (crypto::load_be64(in.payload.data() + 32) != size || done != size)
        throw RecvError("transfer ended early: " + std::to_string(done) + " of " + std::to_string(size) + " bytes",
                        int(proto::Status::integrity));
      std::array<uint8_t, 32> digest;
      hash.final(digest.data());
      if (!crypto::ct_equal(digest.data(), in.payload.data(), 32))
        throw RecvError("whole-file SHA-256 mismatch", int(proto::Status::integrity));
      return digest;
    } else {
      throw RecvError("unexpected record during the transfer", int(proto::Status::integrity));
    }
  }
}

}  // namespace aesxfer::net
