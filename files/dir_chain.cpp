#include "files/dir_chain.h"

#include <algorithm>

namespace aesxfer::files {

namespace {

std::vector<std::string> split_path(const std::string& rel) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= rel.size();) {
    const size_t slash = std::min(rel.find('/', start), rel.size());
    out.push_back(rel.substr(start, slash - start));
    start = slash + 1;
  }
  return out;
}

}  // namespace

int DirChain::open(const std::string& rel) {
  if (rel.empty()) return top_;
  const std::vector<std::string> want = split_path(rel);
  size_t same = 0;
  while (same < std::min(want.size(), names_.size()) && want[same] == names_[same]) ++same;
  if (same == want.size() && same == names_.size() && cur_) return cur_->get();
  // Levels past the shared part are another branch: let them go (current() holders keep theirs).
  names_.resize(same);
  fds_.resize(same);
  cur_.reset();
  size_t from = same;
  while (from > 0 && !fds_[from - 1]) --from;
  int at = from ? fds_[from - 1]->get() : top_;
  std::string prefix;
  for (size_t j = 0; j < from; ++j) prefix += (j ? "/" : "") + want[j];
  for (size_t j = from; j < want.size(); ++j) {
    prefix += (j ? "/" : "") + want[j];
    auto fd = std::make_shared<UniqueFd>(open_(at, want[j], prefix));
    at = fd->get();
    if (j == names_.size()) {
      names_.push_back(want[j]);
      fds_.push_back(nullptr);
    }
    fds_[j] = std::move(fd);
    if (j > 0 && !keep(j - 1)) fds_[j - 1].reset();  // its child is open now
  }
  cur_ = fds_.back();  // held: the kept levels and the last one (the loop let the others go)
  return cur_->get();
}

size_t DirChain::held() const {
  return size_t(std::count_if(fds_.begin(), fds_.end(), [](const auto& f) { return bool(f); }));
}

}  // namespace aesxfer::files
