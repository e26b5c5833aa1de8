#include "files/dir_chain.h"

#include <algorithm>

namespace aesxfer::files {

int DirChain::open(const std::string& rel) {
  if (rel.empty()) return top_;
  // Levels shared with the last directory: whole components of both that agree byte for byte.
  // Compared in place, without splitting rel: the walk asks for every directory of a deep tree.
  const size_t agree =
      size_t(std::mismatch(rel.begin(), rel.end(), path_.begin(), path_.end()).first - rel.begin());
  size_t same = 0;
  while (same < ends_.size() && ends_[same] <= agree &&
         (ends_[same] == rel.size() || rel[ends_[same]] == '/'))
    ++same;
  if (same > 0 && same == ends_.size() && ends_.back() == rel.size() && cur_)
    return cur_->get();  // the last one again
  // Levels past the shared part are another branch: let them go (current() holders keep theirs).
  ends_.resize(same);
  fds_.resize(same);
  path_.assign(rel);
  cur_.reset();
  size_t from = same;
  while (from > 0 && !fds_[from - 1]) --from;
  int at = from ? fds_[from - 1]->get() : top_;
  for (size_t j = from, begin = from ? ends_[from - 1] + 1 : 0; begin <= rel.size(); ++j) {
    const size_t end = std::min(rel.find('/', begin), rel.size());
    auto fd = std::make_shared<UniqueFd>(open_(at, rel.substr(begin, end - begin), rel.substr(0, end)));
    at = fd->get();
    if (j == ends_.size()) {
      ends_.push_back(end);
      fds_.push_back(nullptr);
    }
    fds_[j] = std::move(fd);
    // Its grandparent goes now that a child of its parent is open; the parent of the last one
    // stays, so that its siblings, which a walk asks for next, cost one open each (a forty-ninth
    // re-attack, A49-1: a spine of 63 directories with 20,000 leaves under it had every leaf
    // opened from level 7 again, 55 opens and 206 us each, twelve times a flat tree's cost).
    if (j > 1 && !keep(j - 2)) fds_[j - 2].reset();
    begin = end + 1;
  }
  cur_ = fds_.back();  // held: the kept levels, the last one and its parent
  return cur_->get();
}

size_t DirChain::held() const {
  return size_t(std::count_if(fds_.begin(), fds_.end(), [](const auto& f) { return bool(f); }));
}

}  // namespace aesxfer::files
