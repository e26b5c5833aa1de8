#include "proto/listing.h"

#include <algorithm>

#include "crypto/util.h"
#include "proto/messages.h"

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
  out.push_back(kListPageType);
  out.push_back(page.last ? kListPageLast : 0);
  size_t n = std::min<size_t>(page.entries.size(), 0xffff);
  out.push_back(uint8_t(n >> 8));
  out.push_back(uint8_t(n));
  for (size_t i = 0; i < n; ++i) {
    const ListEntry& e = page.entries[i];
    size_t len = std::min(e.path.size(), kMaxPath);
    uint8_t b[8];
    out.push_back(uint8_t(e.type));
    out.push_back(uint8_t(len >> 8));
    out.push_back(uint8_t(len));
    out.insert(out.end(), e.path.begin(), e.path.begin() + ptrdiff_t(len));
    crypto::store_be64(b, e.type == EntryType::file ? e.size : 0);
    out.insert(out.end(), b, b + 8);
    crypto::store_be32(b, e.mode & 07777);
    out.insert(out.end(), b, b + 4);
    crypto::store_be64(b, uint64_t(e.mtime));
    out.insert(out.end(), b, b + 8);
  }
}

std::optional<ListPage> decode_list_page(std::span<const uint8_t> p) {
  if (p.size() < kListPageHeader || p.size() > kMaxListPage) return std::nullopt;
  if (p[0] != kListPageType || (p[1] & ~kListPageLast)) return std::nullopt;
  ListPage page;
  page.last = p[1] & kListPageLast;
  size_t count = size_t(p[2]) << 8 | p[3];
  // Every entry takes at least kListEntryFixed + 1 bytes: refuse a count the payload cannot hold
  // before reserving room for it.
  if (count > (p.size() - kListPageHeader) / (kListEntryFixed + 1)) return std::nullopt;
  page.entries.reserve(count);
  size_t pos = kListPageHeader;
  for (size_t i = 0; i < count; ++i) {
    if (p.size() - pos < 3) return std::nullopt;
    ListEntry e;
    uint8_t t = p[pos];
    if (t < uint8_t(EntryType::file) || t > uint8_t(EntryType::other)) return std::nullopt;
    e.type = EntryType(t);
    size_t len = size_t(p[pos + 1]) << 8 | p[pos + 2];
    pos += 3;
    if (len > kMaxPath || p.size() - pos < len + 20) return std::nullopt;
    e.path.assign(reinterpret_cast<const char*>(p.data() + pos), len);
    pos += len;
    if (!valid_list_path(e.path)) return std::nullopt;
    e.size = crypto::load_be64(p.data() + pos);
    e.mode = crypto::load_be32(p.data() + pos + 8);
    e.mtime = int64_t(crypto::load_be64(p.data() + pos + 12));
    pos += 20;
    if (e.mode & ~07777u) return std::nullopt;
    if (e.type != EntryType::file && e.size != 0) return std::nullopt;
    page.entries.push_back(std::move(e));
  }
  if (pos != p.size()) return std::nullopt;
  return page;
}

}  // namespace aesxfer::proto
