// The one failure type of the product: a line for the user plus what code decides on.
//
// Code never decides from the text (it holds paths and the peer's words) nor from errno read after
// the fact: what it needs travels in the fields, set where the failure happens.
//   status  the protocol status that describes it: what a receiver tells its peer in a Result, and
//           what a peer's refusal carried
//   err     the errno behind it (0 when none)
//   origin  local: this end decided (a file it cannot write, a bad end record, a shrunk file);
//                  the connection still carries messages, so the peer can be told why
//           peer:  the peer refused or reported it (its Response or Result said so)
//           link:  the connection failed (closed, timed out, a record that did not authenticate);
//                  nothing more can be read from it
//   size    the file's size when it was known before the failure (a get refused for room):
//           --json-progress's "total_bytes" on the file's failed line; kNoSize otherwise
//   from_start  a retry starts this file from its first byte: its partial file was passed over
//           (taken by a directory, another user's), so nothing of this attempt is kept to resume
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "proto/messages.h"

namespace aesxfer::proto {

enum class Origin : uint8_t { local, peer, link };

struct Failure : std::runtime_error {
  explicit Failure(const std::string& what, Status st = Status::internal, int err_no = 0,
                   Origin from = Origin::local)
      : std::runtime_error(what), status(st), err(err_no), origin(from) {}

  // A failure of the connection itself.
  static Failure link(const std::string& what, Status st = Status::io_error, int err_no = 0) {
    return Failure(what, st, err_no, Origin::link);
  }

  static constexpr uint64_t kNoSize = UINT64_MAX;

  // The same failure said in other words (a hint or a note added): every field kept.
  Failure reworded(const std::string& what) const {
    Failure g(what, status, err, origin);
    g.size = size;
    g.from_start = from_start;
    g.maybe_placed = maybe_placed;
    g.end_acknowledged = end_acknowledged;
    return g;
  }

  Status status;
  int err;
  Origin origin;
  uint64_t size = kNoSize;
  bool from_start = false;
  // A put sent whole whose answer was lost with the connection: the server may have put the file
  // in place (client::Pipeline::lose_puts), and the command's last word on it says so.
  bool maybe_placed = false;
  // With maybe_placed: the peer's TCP acknowledged the put's end (net::Conn::acknowledged), so it
  // was sent whole; else it was only written whole to the connection (a sixtieth re-attack, O60-2:
  // a retry that finds such a file in place cannot tell whose bytes put it there).
  bool end_acknowledged = false;
};

// A peer's non-ok Response or Result as one line for the user: "what: the peer's reason", the
// peer's text made printable and the path named once (its text usually starts with the path that
// `what` ends with). Origin peer, the peer's status.
Failure refusal(const Message& m, const std::string& what);

// A peer-supplied string made safe for one terminal or log line: C0 controls, DEL, backslash,
// C1 controls (as raw bytes and UTF-8-encoded, U+0080..U+009F) and every byte that is not part
// of well-formed UTF-8 become \xNN, so a name can neither forge a second line nor send an
// escape sequence to a terminal. The bidi controls (U+202A..U+202E, U+2066..U+2069) and the
// invisible format characters (U+200B..U+200F, U+2028, U+2029, U+FEFF) are escaped byte by byte
// too (\xe2\x80\xae for U+202E), so "invoice<U+202E>fdp.exe" cannot show as "invoiceexe.pdf".
// Well-formed UTF-8 otherwise passes unchanged, unless set_utf8_output(false) said that the
// reader is not known to read UTF-8: then every byte from 0x80 up becomes \xNN too (an 8-bit
// terminal takes the 0x9b of "\xc3\x9b", a well-formed letter, for CSI).
std::string printable(std::string_view s);
// Whether printable() may pass well-formed UTF-8 (true, the default). The client commands set it
// from the locale (app/main.cpp), as OpenSSH's clients do; JSON output then writes every code
// point from U+0080 up as \uXXXX (app/json.h: the same values, in ASCII).
void set_utf8_output(bool on) noexcept;
bool utf8_output() noexcept;
// True for a code point that printable() escapes although it is well-formed UTF-8: the C1
// controls U+0080..U+009F and the invisible, format, bidi and space look-alike code points (see
// proto/failure.cpp). JSON output writes these as \uXXXX (app/json.cpp).
bool escaped_code_point(uint32_t cp) noexcept;
// Length of the well-formed UTF-8 sequence at s[i] (1 for ASCII, up to 4), or 0 when none starts
// there (a continuation byte, an overlong form, a surrogate, past U+10FFFF, cut short).
size_t utf8_sequence(std::string_view s, size_t i) noexcept;
// The code point of the well-formed sequence of `len` bytes (utf8_sequence) at the start of u.
uint32_t utf8_code_point(std::string_view u, size_t len) noexcept;

// printable(s) as one logfmt value: in double quotes, with '"' escaped as \" and '$' and '`' as
// \x24 and \x60 (which sh would expand in double quotes). A shell-style splitter (POSIX sh
// quoting, Python's shlex.split) reads it back as one word whatever s holds (spaces, '=', quotes,
// newlines): printable(s) with those two characters escaped.
std::string quoted(std::string_view s);
// The length of the piece of printable()'s or quoted()'s text that starts at t[i]: an escape
// (\xNN: 4 bytes, \": 2), one UTF-8 character or one byte. Such text writes a backslash only to
// start an escape, so a cut at a piece's boundary never splits one.
size_t escaped_piece(std::string_view t, size_t i) noexcept;

// A peer's words for one line of the terminal: at most kPeerWords bytes of them, cut at a
// character with "..." after (cut_words), and that quoted (peer_words). A server's text of 8,192
// bytes of blanks scrolled the client's own head off the screen, and what stayed was a summary
// line of the server's making (a forty-sixth re-attack, B-F4).
constexpr size_t kPeerWords = 200;
std::string cut_words(std::string_view text);
std::string peer_words(std::string_view text);

}  // namespace aesxfer::proto
