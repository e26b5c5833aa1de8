#include "proto/failure.h"

#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdio>

namespace aesxfer::proto {

namespace {

// How the path a peer's refusal names (`head`) stands to the path the user asked for (`asked`).
enum class Named {
  other,  // another path: the peer's text is shown whole
  same,   // the one asked: named once
  below,  // a path under it ("d/f" for a file put into "d/"): the more exact name, shown instead
  above,  // the directory of the file asked for ("d/" of "d/f"), refused to write in: the file is
          // the more exact name, kept
};

// Whether what a peer names below the path asked for reads as the tail of a path: at most
// kPeerWords bytes, of components that are neither empty, "." nor ".." (a trailing '/' aside).
// Anything else is the peer's words, shown cut (a forty-seventh re-attack, C47-1: a refusal
// "x.bin/<8,000 blanks>x.bin: 13 bytes in 0.04 s" passed as a path below "x.bin", uncut, and its
// last row imitated the client's own line; "tree/a/../../../etc/shadow: permission denied" as
// one below "tree").
bool path_tail(std::string_view t) {
  if (!t.empty() && t.back() == '/') t.remove_suffix(1);
  if (t.empty() || t.size() > kPeerWords) return false;
  for (size_t i = 0; i <= t.size();) {
    size_t j = t.find('/', i);
    if (j == std::string_view::npos) j = t.size();
    const std::string_view c = t.substr(i, j - i);
    if (c.empty() || c == "." || c == "..") return false;
    i = j + 1;
  }
  return true;
}

Named relation(const std::string& head, const std::string& asked) {
  if (head == asked) return Named::same;
  // Everything the server names lies below its root, "." (a tree sent to "host:" was refused as
  // "host:.: tdir: exists ...": an eighteenth re-attack, N9).
  if (asked == ".") return path_tail(head) ? Named::below : Named::other;
  if (head.size() > asked.size() && !asked.empty() && head.compare(0, asked.size(), asked) == 0 &&
      (asked.back() == '/' || head[asked.size()] == '/'))
    return path_tail(std::string_view(head).substr(asked.size() + (asked.back() == '/' ? 0 : 1)))
               ? Named::below
               : Named::other;
  if (asked.size() > head.size() && head.back() == '/' && asked.compare(0, head.size(), head) == 0)
    return Named::above;
  return Named::other;
}

}  // namespace

Failure refusal(const Message& m, const std::string& what) {
  std::string text = m.text.empty() ? status_name(m.status) : m.text;
  std::string shown = what;
  // The peer's text usually starts with the path it refuses ("nope.bin: no such file"), and
  // `what` ends with the path the user asked for ("cannot send to host:nope.bin"): name it once,
  // the more exact of the two, never anything that does not start with the path asked for.
  if (const size_t c = text.find(": "); c != std::string::npos && c > 0) {
    const std::string head = text.substr(0, c);
    for (size_t colon = what.find(':'); colon != std::string::npos; colon = what.find(':', colon + 1)) {
      const Named r = relation(head, what.substr(colon + 1));
      if (r == Named::other) continue;
      // Above: the file is the more exact name ("d/f: permission denied"), except where the
      // directory is what is missing ("iso/: not a directory" for a file sent to "iso/", as cp
      // names it; a nineteenth re-attack, N5).
      if (r != Named::above || m.status == Status::not_directory) shown = what.substr(0, colon + 1) + head;
      text = text.substr(c + 2);
      break;
    }
  }
  const Status st = m.status == Status::ok ? Status::internal : m.status;
  return Failure(printable(shown + ": " + cut_words(text)), st, 0, Origin::peer);
}

namespace {

// A code point that reorders, hides or disguises text: Unicode's Default_Ignorable_Code_Point set
// (soft hyphen, combining grapheme joiner, Hangul fillers, Mongolian variation selectors, the
// zero-width and direction marks U+200B..U+200F, word joiner and invisible operators
// U+2060..U+206F, variation selectors, the tag characters U+E0000..), the bidi controls among
// them or beside them (U+061C, the embeddings, overrides and isolates U+202A..U+202E and
// U+2066..U+2069: the "Trojan Source" class, CVE-2021-42574), the line and paragraph separators
// U+2028 and U+2029, the interlinear annotation marks U+FFF9..U+FFFB, the other format characters
// of general category Cf (the Arabic number signs U+0600..U+0605, U+06DD, U+070F, U+0890, U+0891,
// U+08E2, the Kaithi number signs U+110BD and U+110CD, the Egyptian hieroglyph format controls
// U+13430..U+1343F), and every space separator but U+0020 (U+00A0, U+1680, U+2000..U+200A,
// U+202F, U+205F, U+3000: "a b" with a no-break space is another name than "a b"), and the two
// symbols that render as blank, U+2800 BRAILLE PATTERN BLANK, U+1D159 MUSICAL SYMBOL NULL
// NOTEHEAD and U+16FE4 KHITAN SMALL SCRIPT FILLER (a forty-second re-attack); and the look-alikes of a path's
// separators, so that one name cannot show as a path: the slashes U+2044, U+2215, U+2571, U+29F8 and U+FF0F,
// and the dots U+2024, U+2025, U+FE52 and U+FF0E (a thirty-seventh re-attack: "․․∕․․∕etc∕cron.d∕evil", one
// name, showed as a path that leaves the tree); the symbols and punctuation that look the same (a
// thirty-eighth: the combining overlays U+0337 and U+0338, U+0701, U+0702, U+1735, U+2027, U+27CB, U+2AFD,
// U+A60E, U+10A50, U+1D16D, U+1D23A; a thirty-ninth, from a search of the names with SOLIDUS, SLASH or FULL
// STOP: U+0589, U+06D4, U+20EB, U+233F, U+29F6, U+2AFB, U+2E3C, U+2E4A, U+2F03, U+1F67C; a fortieth: the CJK
// strokes U+31C0..U+31E3 (symbols, "㇒" a slash), U+2041, and the backslash look-alikes with which a name
// imitates printable()'s own escapes, "a⧵x0ab": U+2216, U+20E5, U+244A, U+29F5, U+29F9, U+FE68, U+FF3C,
// U+1F67D; a forty-first: U+27CD, U+2572, U+2F02, U+1D20F, U+1D23B). Letters and digits that resemble them
// (katakana NO U+30CE, CJK U+4E3F, the Arabic-Indic zeros, the middle dot of Catalan) pass: they are how
// other scripts write names.
// (The last seven ranges: the modifier letters (Lm) that look like '/', '\', dots or colons, the
// vertical kana repeat mark's halves, written only in vertical text, the Lisu tone letters and
// punctuation (a forty-fifth re-attack, B-F3: "ꓺ〳ꓺ〳etc〳cron.d〳evil" read as
// "../../etc/cron.d/evil"), and a forty-sixth's, B-F8: the acute and grave accents and their low
// forms U+02CA, U+02CB, U+02CE, U+02CF, the triangular colons U+02D0, U+02D1, U+02F8, the
// Devanagari high spacing dot U+0971, and U+A717..U+A71A (dot slash among them). Letters of the
// kind names are spelt with, U+30CE and U+4E3F, and the apostrophe letters such as U+02BB (the
// okina of "Hawaiʻi"), still pass. A forty-seventh's, B47-1: letters (Lo), not modifier letters,
// that draw punctuation: the Canadian Syllabics finals ACUTE U+141F ('/'), GRAVE U+1420 ('\'),
// DOUBLE ACUTE U+1425 and DOUBLE SHORT VERTICAL STROKES U+1426 ('"') and MIDDLE DOT U+1427
// ("ᐧᐧᐟetc" read as "../etc"), and the Coptic old esh U+2CC6, U+2CC7, which confusables.txt maps
// to '/'; and, from a search of the letters' names with ACUTE, GRAVE or DOT and no base letter,
// the Duployan affixes U+1BC80..U+1BC84 and U+1BC90..U+1BC94 (high and low acute, grave and dot)
// and the Arabic baseline round dot U+0887; a forty-eighth's, C48-4: U+18DF (the raised dot beside
// U+1427) and the modifier letter prime U+02B9 (drawn as U+02CA is). The cost: Cree words with the t, k and h
// finals show them escaped, as Lisu tones.)
// And the private-use code points (general category Co: U+E000..U+F8FF, planes 15 and 16) and the
// noncharacters (U+FDD0..U+FDEF, the last two of every plane): they have no meaning but the one a
// font gives them, and the Powerline and Nerd Fonts patched into many terminals draw U+E0B9,
// U+E0BB, U+E0BD and U+E0BF as thin slashes, so that "..<U+E0BB>..<U+E0BB>etc" read as a path (a
// fifty-eighth re-attack, H58-4).
bool invisible_or_bidi(uint32_t cp) {
  if (cp >= 0xfdd0 && ((cp & 0xfffe) == 0xfffe || cp <= 0xfdef)) return true;  // the noncharacters
  static constexpr uint32_t kRanges[][2] = {
      {0x00a0, 0x00a0},   {0x00ad, 0x00ad},   {0x034f, 0x034f},   {0x0600, 0x0605},   {0x061c, 0x061c},
      {0x06dd, 0x06dd},   {0x070f, 0x070f},   {0x0890, 0x0891},   {0x08e2, 0x08e2},   {0x115f, 0x1160},
      {0x1680, 0x1680},   {0x17b4, 0x17b5},   {0x180b, 0x180f},   {0x2000, 0x200f},   {0x2028, 0x202f},
      {0x205f, 0x206f},   {0x2800, 0x2800},   {0x3000, 0x3000},   {0x3164, 0x3164},   {0xfe00, 0xfe0f},
      {0xfeff, 0xfeff},   {0xffa0, 0xffa0},   {0xfff0, 0xfffb},   {0x110bd, 0x110bd}, {0x110cd, 0x110cd},
      {0x13430, 0x1343f}, {0x1bca0, 0x1bca3}, {0x1d159, 0x1d159}, {0x1d173, 0x1d17a}, {0xe0000, 0xe0fff},
      {0x2024, 0x2025},   {0x2044, 0x2044},   {0x2215, 0x2215},   {0x2571, 0x2571},   {0x29f8, 0x29f8},
      {0xfe52, 0xfe52},   {0xff0e, 0xff0f},   {0x0337, 0x0338},   {0x0701, 0x0702},   {0x1735, 0x1735},
      {0x2027, 0x2027},   {0x27cb, 0x27cb},   {0x2afd, 0x2afd},   {0xa60e, 0xa60e},   {0x10a50, 0x10a50},
      {0x1d16d, 0x1d16d}, {0x1d23a, 0x1d23a}, {0x0589, 0x0589},   {0x06d4, 0x06d4},   {0x20eb, 0x20eb},
      {0x233f, 0x233f},   {0x29f6, 0x29f6},   {0x2afb, 0x2afb},   {0x2e3c, 0x2e3c},   {0x2e4a, 0x2e4a},
      {0x2f03, 0x2f03},   {0x1f67c, 0x1f67c}, {0x2041, 0x2041},   {0x31c0, 0x31e3},   {0x2216, 0x2216},
      {0x20e5, 0x20e5},   {0x244a, 0x244a},   {0x29f5, 0x29f5},   {0x29f9, 0x29f9},   {0xfe68, 0xfe68},
      {0xff3c, 0xff3c},   {0x1f67d, 0x1f67d}, {0x27cd, 0x27cd},   {0x2572, 0x2572},   {0x2f02, 0x2f02},
      {0x1d20f, 0x1d20f}, {0x1d23b, 0x1d23b}, {0x16fe4, 0x16fe4}, {0x3033, 0x3035},   {0xa4f8, 0xa4fe},
      {0x02ca, 0x02cb},   {0x02ce, 0x02d1},   {0x0971, 0x0971},   {0xa717, 0xa71a},   {0x02f8, 0x02f8},
      {0x141f, 0x1420},   {0x1425, 0x1427},   {0x2cc6, 0x2cc7},   {0x0887, 0x0887},   {0x1bc80, 0x1bc84},
      {0x1bc90, 0x1bc94}, {0x18df, 0x18df},   {0x02b9, 0x02b9},   {0xe000, 0xf8ff},   {0xf0000, 0x10ffff},
  };
  for (const auto& r : kRanges)
    if (cp >= r[0] && cp <= r[1]) return true;
  return false;
}

}  // namespace

size_t escaped_piece(std::string_view t, size_t i) noexcept {
  if (t[i] == '\\') return i + 1 < t.size() && t[i + 1] == 'x' ? 4 : 2;
  size_t n = 1;
  while (i + n < t.size() && (static_cast<unsigned char>(t[i + n]) & 0xc0) == 0x80) ++n;
  return n;
}

size_t utf8_sequence(std::string_view s, size_t i) noexcept {
  const unsigned char ch = static_cast<unsigned char>(s[i]);
  if (ch < 0x80) return 1;
  const size_t len = ch >= 0xf0 ? 4 : ch >= 0xe0 ? 3 : ch >= 0xc2 ? 2 : 0;
  if (len == 0 || ch > 0xf4 || i + len > s.size()) return 0;
  for (size_t k = 1; k < len; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
  const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
  if ((ch == 0xe0 && c1 < 0xa0) || (ch == 0xed && c1 >= 0xa0) || (ch == 0xf0 && c1 < 0x90) ||
      (ch == 0xf4 && c1 >= 0x90))
    return 0;
  return len;
}

uint32_t utf8_code_point(std::string_view u, size_t len) noexcept {
  const auto b = [&](size_t k) { return uint32_t(static_cast<unsigned char>(u[k])); };
  if (len == 1) return b(0);
  if (len == 2) return (b(0) & 0x1f) << 6 | (b(1) & 0x3f);
  if (len == 3) return (b(0) & 0x0f) << 12 | (b(1) & 0x3f) << 6 | (b(2) & 0x3f);
  return (b(0) & 0x07) << 18 | (b(1) & 0x3f) << 12 | (b(2) & 0x3f) << 6 | (b(3) & 0x3f);
}

bool escaped_code_point(uint32_t cp) noexcept { return (cp >= 0x80 && cp <= 0x9f) || invisible_or_bidi(cp); }

namespace {
std::atomic<bool> g_utf8_output{true};
}  // namespace

void set_utf8_output(bool on) noexcept { g_utf8_output.store(on, std::memory_order_relaxed); }
bool utf8_output() noexcept { return g_utf8_output.load(std::memory_order_relaxed); }

namespace {
#include "proto/quote_safe.inc"

// Whether cp lies in one of the sorted, disjoint ranges.
template <size_t N>
bool in_ranges(const uint32_t (&r)[N][2], uint32_t cp) {
  size_t lo = 0, hi = N;
  while (lo < hi) {
    const size_t mid = (lo + hi) / 2;
    if (cp > r[mid][1])
      lo = mid + 1;
    else if (cp < r[mid][0])
      hi = mid;
    else
      return true;
  }
  return false;
}

// Inside a quote, what could pass for its closing '"' is shown as \xNN, so that a peer's words
// cannot seem to end it (a forty-first re-attack, B-F2: file="pub.txt″ ... result=ok″ read as
// another field). Finding the look-alikes one by one never ended (rounds 41 to 44: confusables of
// '"', CJK and dingbat quotes, primes, modifier letters, spacing twins of marks, combining marks
// on a space), so the rule is the other way round: a code point from U+0080 up stands raw there
// only when the Unicode database calls it a letter (not a modifier letter) or a decimal digit
// (proto/quote_safe.inc, made by scripts/gen-unicode-tables.py), or a mark on one. The one letter that
// confusables.txt maps to '"' is escaped too. Whether cp stands raw; on_base says whether the last
// code point that stood was a letter or digit, which a mark may follow.
constexpr uint32_t kQuoteLikeLetter = 0x05f2;  // HEBREW LIGATURE YIDDISH DOUBLE YOD
bool stands_in_quote(uint32_t cp, bool& on_base) {
  if (in_ranges(kQuoteSafeMark, cp)) return on_base;  // marks stack on the base before them
  on_base = in_ranges(kQuoteSafeBase, cp) && cp != kQuoteLikeLetter;
  return on_base;
}

// An apostrophe, or a letter confusables.txt maps to one (Hebrew yod, the saltillos, Canadian
// West-Cree P, runic short-twig-sol s): two side by side read as '"', so inside a quote a pair is
// escaped (a forty-fifth re-attack, B-F4: `file="pub.txtꞌꞌ bytes=100 result=ok"` read as a quote
// that had closed, then fields of the server's). One alone stands, as in "Don't" or a Hebrew name.
// The Miao signs U+16F51 and U+16F52, spacing marks that confusables.txt maps to an apostrophe,
// and U+0149, an apostrophe before an n, count too (a forty-seventh re-attack, B47-1: two Miao
// signs on a letter stood raw and read as '"').
bool apostrophe_like(uint32_t cp) {
  return cp == 0x27 || cp == 0x0149 || cp == 0x05d9 || cp == 0x144a || cp == 0x16cc || cp == 0xa78b ||
         cp == 0xa78c || cp == 0x16f51 || cp == 0x16f52;
}

// The first code point from s[i] on that is not a mark (kQuoteSafeMark), or 0 (none, a byte that
// starts no well-formed sequence, or bytes from 0x80 up when the output is not UTF-8); U+0027 for
// a mark on the way that looks like an apostrophe.
uint32_t next_base(std::string_view s, size_t i, bool utf8) {
  while (i < s.size() && (utf8 || static_cast<unsigned char>(s[i]) < 0x80)) {
    const size_t len = utf8_sequence(s, i);
    if (len == 0) return 0;
    const uint32_t cp = utf8_code_point(s.substr(i, len), len);
    if (!in_ranges(kQuoteSafeMark, cp)) return cp;
    // The combining commas above (U+0312..U+0315, U+0343 koronis) draw a second apostrophe, and
    // the apostrophe-like marks are one.
    if ((cp >= 0x0312 && cp <= 0x0315) || cp == 0x0343 || apostrophe_like(cp)) return 0x27;
    i += len;
  }
  return 0;
}

// printable(), and inside a quote (quoted()) what is not a letter, digit or mark on one too, and
// a pair of apostrophes or their look-alikes. Outside quotes names in every script, and their
// symbols, read as they are.
std::string escaped(std::string_view s, bool in_quote) {
  const bool utf8 = utf8_output();
  std::string out;
  auto esc = [&](unsigned char ch) {
    char b[8];
    std::snprintf(b, sizeof b, "\\x%02x", ch);
    out += b;
  };
  bool on_base = false;  // inside a quote: stands_in_quote's
  // Inside a quote: the last code point but marks was apostrophe_like, and was escaped as one of a
  // pair (marks between or after the pair go with it: a mark between two saltillos kept them
  // raw, a forty-sixth re-attack, B-F1).
  bool after_apos = false, in_run = false;
  auto in_pair = [&](uint32_t cp, size_t next) {
    in_run = in_quote && apostrophe_like(cp) && (after_apos || apostrophe_like(next_base(s, next, utf8)));
    after_apos = apostrophe_like(cp);
    return in_run;
  };
  for (size_t i = 0; i < s.size();) {
    unsigned char ch = static_cast<unsigned char>(s[i]);
    if (ch < 0x80) {
      if (in_pair(ch, i + 1) || ch < 0x20 || ch == 0x7f || ch == '\\')
        esc(ch);
      else
        out += char(ch);
      on_base = std::isalnum(ch);
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence (no overlong form, no surrogate, at most U+10FFFF) passes as
    // it is, unless it encodes a C1 control (U+0080..U+009F: 0xc2 0x80..0x9f) or another code
    // point escaped_code_point() names (escaped byte by byte); any other byte from 0x80 up is
    // escaped on its own (a raw 0x9b is CSI to an 8-bit terminal), and so is every such byte
    // when the output is not UTF-8.
    const size_t len = utf8 ? utf8_sequence(s, i) : 0;
    if (len == 0) {
      esc(ch);
      on_base = after_apos = in_run = false;
      ++i;
      continue;
    }
    const uint32_t cp = utf8_code_point(s.substr(i, len), len);
    // A mark goes with the pair it follows, unless it is itself one of a pair (the Miao signs).
    const bool pair = in_ranges(kQuoteSafeMark, cp) && !apostrophe_like(cp) ? in_run : in_pair(cp, i + len);
    if (escaped_code_point(cp) || (in_quote && (!stands_in_quote(cp, on_base) || pair))) {
      for (size_t k = 0; k < len; ++k) esc(static_cast<unsigned char>(s[i + k]));
      on_base = false;
      i += len;
      continue;
    }
    out.append(s.substr(i, len));
    i += len;
  }
  return out;
}
}  // namespace

std::string printable(std::string_view s) { return escaped(s, false); }

std::string cut_words(std::string_view text) {
  if (text.size() <= kPeerWords) return std::string(text);
  size_t n = kPeerWords;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xc0) == 0x80) --n;
  return std::string(text.substr(0, n)) + "...";
}

std::string peer_words(std::string_view text) { return quoted(cut_words(text)); }

std::string quoted(std::string_view s) {
  const std::string p = escaped(s, true);
  std::string out = "\"";
  for (char ch : p) {
    if (ch == '$' || ch == '`') {  // sh would expand them inside double quotes, shlex would not
      out += ch == '$' ? "\\x24" : "\\x60";
      continue;
    }
    if (ch == '"') out += '\\';
    out += ch;
  }
  return out + "\"";
}

}  // namespace aesxfer::proto
