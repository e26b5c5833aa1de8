#include "proto/listing.h"

#include <algorithm>

#include "proto/messages.h"
#include "proto/wire.h"

namespace aesxfer::proto {

bool valid_list_path(std::string_view p) noexcept {
  if (p.empty() || p.size() > kMaxPath) return false;
  size_t start = 0;
  for (;;) {
    size_t slash = p.find('/', start);
    std::string_view part =
        p.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    for (char ch : part)
      if (ch == '\0' || ch == '\n' || ch == '\r') return false;
    if (slash == std::string_view::npos) return true;
    start = slash + 1;
  }
}

void encode_list_page(const ListPage& page, std::vector<uint8_t>& out) {
  out.clear();
  WireWriter w(out);
  w.u8(kListPageType);
  w.u8(page.last ? kListPageLast : 0);
  const size_t n = std::min<size_t>(page.entries.size(), 0xffff);
  w.u16(uint16_t(n));
  for (size_t i = 0; i < n; ++i) {
    const ListEntry& e = page.entries[i];
    w.u8(uint8_t(e.type));
    w.str16(e.path, kMaxPath);
    w.u64(e.type == EntryType::file || e.type == EntryType::left_out ? e.size : 0);
    w.u32(e.mode & 07777);
    w.u64(uint64_t(e.mtime));
  }
}

namespace {

// One entry; r fails on anything malformed.
ListEntry decode_entry(WireReader& r) {
  ListEntry e;
  const uint8_t t = r.u8();
  if (t < uint8_t(EntryType::file) || t > uint8_t(EntryType::left_out)) r.fail();
  e.type = EntryType(t);
  e.path = r.str16(kMaxPath);
  const bool left_out = e.type == EntryType::left_out;
  if (r.ok() && !valid_list_path(e.path) && !(left_out && e.path == ".")) r.fail();
  e.size = r.u64();
  e.mode = r.u32();
  e.mtime = int64_t(r.u64());
  if (e.mode & ~07777u) r.fail();
  if (left_out ? e.size == 0 : e.type != EntryType::file && e.size != 0) r.fail();
  return e;
}

}  // namespace

std::optional<ListPage> decode_list_page(std::span<const uint8_t> p) {
  if (p.size() > kMaxListPage) return std::nullopt;
  WireReader r(p);
  const uint8_t type = r.u8(), flags = r.u8();
  const size_t count = r.u16();
  if (!r.ok() || type != kListPageType || (flags & ~kListPageLast)) return std::nullopt;
  // Every entry takes at least kListEntryFixed + 1 bytes: refuse a count the payload cannot hold
  // before reserving room for it.
  if (count > r.remaining() / (kListEntryFixed + 1)) return std::nullopt;
  ListPage page;
  page.last = flags & kListPageLast;
  page.entries.reserve(count);
  for (size_t i = 0; i < count && r.ok(); ++i) page.entries.push_back(decode_entry(r));
  if (!r.done()) return std::nullopt;
  return page;
}

}  // namespace aesxfer::proto
