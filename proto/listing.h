// The answer to a `list` request (`recv -r`): the entries under a directory on the
// server, sent as one or more listing pages, each one control record. Pure encoding, no I/O.
// See docs/PROTOCOL.md, "Listing (recv -r)".
//
//   page  : 06 | u8 flags (bit 0: last page) | u16 count | count x entry
//   entry : u8 type (1 file, 2 directory, 3 symlink, 4 other, 5 unreadable directory, 6 names
//           left out) | u16 path_len | path | u64 size | u32 mode | i64 mtime
//
// Symbolic links and special files (3, 4) are listed so the receiver can say what it skips; they
// are never followed or transferred. Protocol 5 adds two kinds that let the receiver name what it
// did not get instead of getting less in silence: a directory the server cannot read (5: listed,
// its contents not), and a count of names left out of a directory (6: names with CR or LF, which
// no path on the wire may hold); its path is that directory's, or "." for the listed one, and its
// size the count.
//
// Pages are not proto::Message values (decode() refuses type 6): they only follow a Response to
// a list request, and the receiver reads them with decode_list_page().
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace aesxfer::proto {

constexpr uint8_t kListPageType = 6;    // first byte of a listing page
constexpr uint8_t kListPageLast = 1;    // page flags: the last page of the listing
constexpr size_t kMaxListPage = 16384;  // bytes of one encoded page, header included
constexpr size_t kListPageHeader = 4;   // type, flags, u16 count
constexpr size_t kListEntryFixed = 23;  // entry bytes besides the path
// Protocol bounds on one listing (both ends refuse more): entries, and the sum of their path
// lengths. A server may be configured lower (serve --max-list).
constexpr uint64_t kMaxListEntries = 1000000;
constexpr uint64_t kMaxListBytes = uint64_t(64) << 20;

enum class EntryType : uint8_t {
  file = 1,
  dir = 2,
  symlink = 3,
  other = 4,
  unreadable_dir = 5,  // protocol 5: a directory the server could not read; nothing below it listed
  left_out = 6,        // protocol 5: `size` names of directory `path` ("." the listed one) left out
};

struct ListEntry {
  EntryType type = EntryType::file;
  std::string path;   // relative to the listed directory, '/'-separated (valid_list_path)
  uint64_t size = 0;  // files: bytes; left_out: how many names (at least 1); anything else: 0
  uint32_t mode = 0;  // permission bits (& 07777)
  int64_t mtime = 0;  // seconds since the epoch
};

struct ListPage {
  bool last = false;
  std::vector<ListEntry> entries;
};

// A relative path a receiver may create under its destination: 1..kMaxPath bytes, no NUL, CR or
// LF, not starting or ending with '/', no empty, "." or ".." component.
bool valid_list_path(std::string_view p) noexcept;

// Bytes an entry takes in a page.
inline size_t list_entry_size(const ListEntry& e) { return kListEntryFixed + e.path.size(); }

// Encodes into out (cleared first). The caller keeps the page within kMaxListPage (the server
// fills pages entry by entry with list_entry_size()).
void encode_list_page(const ListPage& page, std::vector<uint8_t>& out);
// nullopt when malformed: longer than kMaxListPage, unknown type or flag bit, a count larger than
// the payload can hold (checked before anything is allocated), an invalid path ("." allowed for
// left_out only), a size on anything but a file or left_out, a left_out of no name, mode bits
// outside 07777, a truncated entry or a trailing byte.
std::optional<ListPage> decode_list_page(std::span<const uint8_t> payload);

}  // namespace aesxfer::proto
