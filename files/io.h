// Plain file I/O both ends share: whole writes that say why they failed, errno as a message.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace aesxfer::files {

// Writes all n bytes (pos < 0: at the file position; else pwrite at pos). Throws proto::Failure
// (status no_space when the disk is full, else io_error; origin local).
void write_full(int fd, const uint8_t* p, size_t n, int64_t pos = -1);

// "permission denied", "no such file or directory", ... for messages.
std::string errno_text(int err);

}  // namespace aesxfer::files
