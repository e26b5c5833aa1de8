// What the command line says when a word on it is wrong: values checked by validators that name
// what was expected (a whole number from 1 to 16, a size such as 256K, a rate such as 80M) rather
// than CLI11's words, options checked before CLI11 parses (an unknown one gets the nearest known
// name, as an unknown command does), and CLI11's remaining errors put in the same plain form.
// Every message is one line without the "aesxfer: " prefix; main prints it and exits 2.
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace aesxfer::app {

// Levenshtein distance, for "did you mean".
size_t edit_distance(const std::string& a, const std::string& b);

// The candidate nearest to word within two edits and fewer edits than the word has letters less
// one (so that "-x" suggests nothing), or "" when none is.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);

// The first option among `words` (the arguments after the command's name) that `cmd` does not
// have: "unknown option --resum (did you mean --resume?)", after "send: " when it follows the
// subcommand send of `cmd`; "" when every option is known. Values
// of options that take one are skipped as CLI11 takes them; nothing after "--" is looked at.
std::string unknown_option(const CLI::App& cmd, const std::vector<std::string>& words);

// Validators whose messages say what was expected. CLI11 prints "--name: " before the message.
// A whole number in [lo, hi]; `what` names it ("a port number"; default "a whole number").
CLI::Validator whole_number(int64_t lo, int64_t hi, const std::string& what = "a whole number");
// A number of `unit` (seconds, days) in [lo, hi] (hi: none when 0), more than lo when open_lo.
CLI::Validator real_number(double lo, double hi, const std::string& unit, bool open_lo = false);
// A size in bytes: digits with an optional K, M, G or T (of 1024; "KB", "KiB" too), in [lo, hi];
// becomes the number of bytes.
CLI::Validator byte_size(uint64_t lo, uint64_t hi);
// -l: Kbit/s, or with a K, M or G suffix for Kbit/s, Mbit/s, Gbit/s (scp's unit); becomes Kbit/s.
// The least -l a transfer takes: the limiter sends whole records, 4 KiB at least, and one must
// reach the server well within its 30 s default idle timeout (below about 1.1 Kbit/s one did not,
// and -l 0.5 paced nothing at all: a twenty-second re-attack, N1).
inline constexpr double kMinLimitKbit = 8;
// A rate in Kbit/s with K, M or G suffixes, at most max_kbit, at least kMinLimitKbit unless 0.
CLI::Validator kbit_rate(double max_kbit);

// A size as the help and the messages write it: 4K, 1M, 256K, or bytes when not a round power.
std::string size_words(uint64_t bytes);

// CLI11's error (a value missing, arguments not expected, a value not converted) as one line that
// says what to do; `cmd` is the command it happened in ("" for none).
// Why a file to be written at `p` could not be (its directory missing, not one, or not
// writable; a directory at `p`), or "": checked before the work that ends in writing it (serve --port-file
// before listening, --plot before a benchmark's minutes: a nineteenth re-attack, N5).
std::string unwritable(const std::filesystem::path& p);

std::string parse_error_line(const CLI::ParseError& e, const std::string& cmd);

}  // namespace aesxfer::app
