// Requests added by issue 7, kept out of the main session loop (server.cpp): mkdir (-r), probe
// and put with the resume flag (--resume), list (recv -r) and get with the resume flag
// (recv --resume). See docs/PROTOCOL.md, "Directories", "Resume" and "Listing".
#pragma once
#include <filesystem>
#include <functional>
#include <string>

#include "net/conn.h"
#include "net/transfer.h"
#include "proto/handshake.h"
#include "proto/listing.h"
#include "proto/messages.h"

namespace aesxfer::net {

// A Response with status and text (shared by the request handlers here and in server/parts.cpp).
proto::Message response(proto::Status st, const std::string& text = {});
// p relative to the server's root, "." for the root itself (for logs and replies).
std::string rel(const std::filesystem::path& root_real, const std::filesystem::path& p);

// A get's data: sends `size` bytes of fd (fd < 0: zeros) as a record stream, then reads the
// client's Result. Throws Failure with the reason, the client's own when it said why it stopped
// (a receiver that gives up sends a Result and closes, so our writes fail before we read it).
void send_file_await_result(Conn& c, int fd, uint64_t size, const StreamOptions& opt);

struct ExtendedLimits {
  uint64_t max_list_entries = 200000;  // list: entries per listing (serve --max-list), <= kMaxListEntries
};

// Serves req when it is one of those requests and returns true; false leaves it to the caller.
// Throws Failure when the connection cannot continue (as the session loop does).
bool serve_extended(Conn& c, const proto::SessionKeys& keys, const std::filesystem::path& root_real,
                    const proto::Message& req, const std::function<void(const std::string&)>& log,
                    const ExtendedLimits& limits = {});

}  // namespace aesxfer::net
