// Tests for `aesxfer bench` (app/lab/bench.cpp), the SVG writer (app/lab/svg.cpp) and `aesxfer speed
// --plot`: the real binary runs a small bench against its own local server child; its JSON and
// CSV parse with the documented columns; the SVG files are well-formed XML with one bar per row
// (bench) and one polyline per row (speed).
#include "app/lab/bench.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "app/lab/bench_proc.h"
#include "app/lab/bench_scp.h"
#include "app/lab/svg.h"
#include "crypto/suite.h"
#include "tests/harness.h"
#include "tests/test_util.h"

namespace aesxfer::test {
namespace {

// ---------------------------------------------------------------------------------------------
// A minimal XML well-formedness check: one root element, balanced and properly nested tags,
// every attribute name="value" or name='value' with no raw '<' inside, no duplicate attributes,
// text with no raw '<' and '&' only as a known entity or a character reference. Comments,
// <?...?> and a leading prolog are skipped. Returns "" when well-formed, else what is wrong.

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':' || c == '.';
}

std::string check_entities(const std::string& t) {
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '<') return "raw '<' in text or attribute";
    if (t[i] != '&') continue;
    const size_t semi = t.find(';', i);
    if (semi == std::string::npos) return "unterminated entity";
    const std::string ent = t.substr(i + 1, semi - i - 1);
    static const std::set<std::string> known = {"amp", "lt", "gt", "quot", "apos"};
    bool ok = known.count(ent) > 0;
    if (!ok && ent.size() > 1 && ent[0] == '#') {
      ok = true;
      const bool hex = ent[1] == 'x';
      for (size_t k = hex ? 2 : 1; k < ent.size(); ++k)
        ok = ok && (hex ? std::isxdigit(static_cast<unsigned char>(ent[k]))
                        : std::isdigit(static_cast<unsigned char>(ent[k])));
    }
    if (!ok) return "unknown entity &" + ent + ";";
    i = semi;
  }
  return "";
}

std::string xml_problem(const std::string& doc) {
  std::vector<std::string> stack;
  size_t roots = 0, i = 0;
  while (i < doc.size()) {
    if (doc[i] != '<') {
      const size_t next = doc.find('<', i);
      const std::string t = doc.substr(i, next == std::string::npos ? std::string::npos : next - i);
      if (stack.empty() && t.find_first_not_of(" \t\r\n") != std::string::npos)
        return "text outside the root";
      if (auto p = check_entities(t); !p.empty()) return p;
      if (next == std::string::npos) break;
      i = next;
      continue;
    }
    if (doc.compare(i, 4, "<!--") == 0) {
      const size_t e = doc.find("-->", i + 4);
      if (e == std::string::npos) return "unterminated comment";
      i = e + 3;
      continue;
    }
    if (doc.compare(i, 2, "<?") == 0) {
      const size_t e = doc.find("?>", i + 2);
      if (e == std::string::npos) return "unterminated processing instruction";
      i = e + 2;
      continue;
    }
    if (doc.compare(i, 2, "</") == 0) {
      size_t k = i + 2;
      while (k < doc.size() && is_name_char(doc[k])) ++k;
      const std::string name = doc.substr(i + 2, k - i - 2);
      while (k < doc.size() && std::isspace(static_cast<unsigned char>(doc[k]))) ++k;
      if (k >= doc.size() || doc[k] != '>') return "bad end tag </" + name;
      if (stack.empty() || stack.back() != name)
        return "end tag </" + name + "> does not match <" +
               (stack.empty() ? std::string("(none)") : stack.back()) + ">";
      stack.pop_back();
      i = k + 1;
      continue;
    }
    // Start tag.
    size_t k = i + 1;
    while (k < doc.size() && is_name_char(doc[k])) ++k;
    const std::string name = doc.substr(i + 1, k - i - 1);
    if (name.empty()) return "empty tag name at offset " + std::to_string(i);
    std::set<std::string> attrs;
    bool self_closing = false;
    for (;;) {
      const size_t before = k;
      while (k < doc.size() && std::isspace(static_cast<unsigned char>(doc[k]))) ++k;
      if (k >= doc.size()) return "unterminated tag <" + name;
      if (doc[k] == '>') {
        ++k;
        break;
      }
      if (doc.compare(k, 2, "/>") == 0) {
        self_closing = true;
        k += 2;
        break;
      }
      if (k == before) return "attributes of <" + name + "> not separated by space";
      size_t a = k;
      while (k < doc.size() && is_name_char(doc[k])) ++k;
      const std::string an = doc.substr(a, k - a);
      if (an.empty()) return "bad attribute in <" + name + ">";
      if (!attrs.insert(an).second) return "duplicate attribute " + an + " in <" + name + ">";
      if (k >= doc.size() || doc[k] != '=') return "attribute " + an + " in <" + name + "> has no value";
      ++k;
      if (k >= doc.size() || (doc[k] != '"' && doc[k] != '\''))
        return "attribute " + an + " in <" + name + "> is not quoted";
      const char q = doc[k++];
      const size_t e = doc.find(q, k);
      if (e == std::string::npos) return "unterminated attribute " + an;
      if (auto p = check_entities(doc.substr(k, e - k)); !p.empty()) return p + " (attribute " + an + ")";
      k = e + 1;
    }
    if (stack.empty()) ++roots;
    if (roots > 1) return "more than one root element";
    if (!self_closing) stack.push_back(name);
    i = k;
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  if (roots != 1) return "no root element";
  return "";
}

size_t count_of(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> v;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      v.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  v.push_back(cur);
  return v;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) v.push_back(l);
  return v;
}

bool is_number(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return *end == '\0';
}

// The tests also run with AESXFER_NO_AESNI=1 in the environment (scripts/test.sh), which bench
// honours like --no-aesni: every row is then a portable one.
bool env_no_aesni() {
  const char* e = std::getenv("AESXFER_NO_AESNI");
  return e && *e && std::string(e) != "0";
}
std::string aesni_tag() { return env_no_aesni() ? " (no AES-NI)" : ""; }

const std::set<std::string> kVerdicts = {"sender cipher CPU", "receiver CPU", "sender and receiver CPU",
                                         "network", "CPU contention (other processes)"};

bool known_verdict(std::string v) {
  const std::string suffix = " (CPU contended)";
  if (v.size() > suffix.size() && v.compare(v.size() - suffix.size(), suffix.size(), suffix) == 0)
    v.resize(v.size() - suffix.size());
  return kVerdicts.count(v) > 0;
}

// ---------------------------------------------------------------------------------------------
// Unit tests

TEST(BenchUnit, VerdictThresholds) {
  using L = app::BenchLoad;
  EXPECT_EQ(app::bench_verdict(L{99, 0, 40, 0}), "sender cipher CPU");
  EXPECT_EQ(app::bench_verdict(L{40, 0, 97, 1}), "receiver CPU");
  EXPECT_EQ(app::bench_verdict(L{90, 2, 90, 2}), "sender and receiver CPU");
  EXPECT_EQ(app::bench_verdict(L{50, 0, 60, 0}), "network");
  EXPECT_EQ(app::bench_verdict(L{app::kBenchBusyPct, 0, 0, 0}), "sender cipher CPU");
  EXPECT_EQ(app::bench_verdict(L{app::kBenchBusyPct - 0.1, 0, 0, 0}), "network");
  EXPECT_EQ(app::bench_verdict(L{50, 0, -1, -1}), "network or receiver (server CPU not measured)");
  EXPECT_EQ(app::bench_verdict(L{95, 0, -1, -1}), "sender cipher CPU");
  // Waiting for a core counts towards busy, and is called out.
  EXPECT_EQ(app::bench_verdict(L{45, 50, 30, 5}), "sender cipher CPU (CPU contended)");
  EXPECT_EQ(app::bench_verdict(L{30, 5, 40, 50}), "receiver CPU (CPU contended)");
  EXPECT_EQ(app::bench_verdict(L{30, 20, 30, 20}), "CPU contention (other processes)");
  EXPECT_EQ(app::bench_verdict(L{30, 10, 30, 10}), "network");
}

TEST(BenchSvg, EscapesTextAndStaysWellFormed) {
  EXPECT_EQ(app::svg::escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
  EXPECT_EQ(app::svg::escape("min\u2013max \xff\xfe ok\x01"), "min\u2013max ?? ok")
      << "invalid UTF-8 and controls";
  app::svg::BarChart c;
  c.title = "t <&> \"quoted\" 'x'";
  c.subtitle = "CPU & co";
  c.y_label = "MB/s";
  c.whisker_legend = "min-max";
  auto bar = [](const char* label, const char* family, double v, const char* note, const char* group_note,
                const char* absent) {
    app::svg::Bar b;
    b.label = label;
    b.family = family;
    b.value = v;
    b.lo = v > 0 ? v * 0.8 : 0;
    b.hi = v > 0 ? v * 1.2 : 0;
    b.note = note;
    b.group_note = group_note;
    b.absent = absent;
    return b;
  };
  c.bars = {bar("a<1>", "s&1", 10, "impl\"", "x2 & more", ""), bar("a<1>", "s2", 5, "", "second <line>", ""),
            bar("b", "s&1", 0, "", "", ""), bar("b", "s2", 0, "", "", "gone & <away>")};
  const std::string doc = app::svg::bar_chart(c);
  EXPECT_EQ(xml_problem(doc), "") << doc;
  EXPECT_EQ(count_of(doc, "<rect class=\"bar\""), 3u) << "no bar for the absent one";
  EXPECT_EQ(count_of(doc, "<text class=\"absent\""), 1u);
  EXPECT_NE(doc.find(">gone &amp; &lt;away&gt;<"), std::string::npos);
  EXPECT_NE(doc.find(">x2 &amp; more<"), std::string::npos) << "each group note on its own line";
  EXPECT_NE(doc.find(">second &lt;line&gt;<"), std::string::npos);

  app::svg::LineChart l;
  l.title = "<lines>";
  l.series.resize(2);
  l.series[0].label = "one & two";
  l.series[0].points = {{16, 1}, {64, 100}, {1024, 1000}};
  l.series[1].label = "<three>";
  l.series[1].points = {{16, 5}, {1024, 50}};
  for (bool logy : {false, true}) {
    l.log10_y = logy;
    const std::string ld = app::svg::line_chart(l);
    EXPECT_EQ(xml_problem(ld), "") << ld;
    EXPECT_EQ(count_of(ld, "<polyline"), 2u);
  }
  // The checker itself rejects what it should.
  EXPECT_NE(xml_problem("<a><b></a></b>"), "");
  EXPECT_NE(xml_problem("<a x=1></a>"), "");
  EXPECT_NE(xml_problem("<a>1 < 2</a>"), "");
  EXPECT_NE(xml_problem("<a>R&D</a>"), "");
  EXPECT_NE(xml_problem("<a></a><b/>"), "");
  EXPECT_EQ(xml_problem("<?xml version=\"1.0\"?>\n<a k='v'><b/>x &amp; y &#60;</a>\n"), "");
}

TEST(BenchSvg, BytesLabels) {
  EXPECT_EQ(app::svg::bytes_label(16), "16");
  EXPECT_EQ(app::svg::bytes_label(8192), "8K");
  EXPECT_EQ(app::svg::bytes_label(1 << 20), "1M");
  EXPECT_EQ(app::svg::bytes_label(1000), "1000");
}

// ---------------------------------------------------------------------------------------------
// The real binary

TEST(BenchCli, JsonRunWithPlot) {
  Workspace ws;
  const fs::path svg = ws.local / "bench.svg";
  auto r = run_aesxfer(
      {"bench", "--size", "8M", "--repeat", "1", "-c", "aes128-gcm,none", "--json", "--plot", svg.string()},
      ws.home, 120);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  Json j;
  ASSERT_TRUE(JsonParser(r.out).parse(j)) << r.out;
  ASSERT_EQ(j.kind, Json::Obj);
  EXPECT_EQ(j.obj["bytes"].num, 8.0 * 1024 * 1024);
  EXPECT_EQ(j.obj["repeat"].num, 1.0);
  EXPECT_TRUE(j.obj["local_server"].b);
  EXPECT_FALSE(j.obj["cpu"].str.empty());
  ASSERT_EQ(j.obj["rows"].kind, Json::Arr);
  ASSERT_EQ(j.obj["rows"].arr.size(), 2u);
  EXPECT_EQ(json_scheme_problems(r.out), std::vector<std::string>{});
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << "one line of JSON";
  const char* names[] = {"aes128-gcm", "none"};
  for (size_t i = 0; i < 2; ++i) {
    auto& row = j.obj["rows"].arr[i].obj;
    for (const char* k :
         {"tool", "cipher", "mac", "impl", "no_aesni", "mb_per_s_median", "mb_per_s_min", "mb_per_s_max",
          "mb_per_s_runs", "client_cpu_pct", "server_cpu_pct", "client_wait_pct", "server_wait_pct",
          "cpu_seconds_per_gb", "speedup", "vs_scp", "record_size", "verdict"})
      EXPECT_TRUE(row.count(k)) << "row " << i << " lacks " << k;
    EXPECT_EQ(row["cipher"].str, names[i]);
    EXPECT_GT(row["mb_per_s_median"].num, 0);
    EXPECT_LE(row["mb_per_s_min"].num, row["mb_per_s_median"].num);
    EXPECT_GE(row["mb_per_s_max"].num, row["mb_per_s_median"].num);
    EXPECT_EQ(row["server_cpu_pct"].kind, Json::Num) << "the local server's CPU is measured";
    EXPECT_GT(row["client_cpu_pct"].num, 0);
    EXPECT_TRUE(known_verdict(row["verdict"].str)) << row["verdict"].str;
    EXPECT_EQ(row["no_aesni"].b, env_no_aesni());
  }
  EXPECT_EQ(j.obj["rows"].arr[0].obj["mac"].str, "aead");
  EXPECT_EQ(j.obj["rows"].arr[1].obj["mac"].str, "hmac-sha256");

  const std::string doc = read_text_file(svg);
  EXPECT_EQ(xml_problem(doc), "");
  EXPECT_EQ(count_of(doc, "<rect class=\"bar\""), 2u) << "one bar per cipher";
  EXPECT_NE(doc.find("MB/s"), std::string::npos) << "the y axis is labelled";
  EXPECT_NE(doc.find(">aes128-gcm<"), std::string::npos);
  EXPECT_NE(doc.find(">none<"), std::string::npos);
}

// A twenty-eighth re-attack (N5): a bench ended by SIGHUP (its terminal closed) or SIGPIPE
// (`aesxfer bench | head`) left its data file (up to 1 GiB of RAM in /dev/shm) and its scratch
// directory with the run's keys. Both go, as on ^C.
TEST(BenchCli, AClosedTerminalOrPipeLeavesNoDataFileOrKeys) {
  for (const int sig : {SIGHUP, SIGPIPE}) {
    SCOPED_TRACE(sig);
    Workspace ws;
    const fs::path tmp = ws.tmp / "tmpdir", pid_file = ws.tmp / "pid";
    fs::create_directories(tmp);
    ProcResult r;
    std::thread bench([&] {
      r = run_process({"/bin/sh", "-c",
                       "'" + std::string(AESXFER_BINARY) +
                           "' bench --size 768M --repeat 3 -c aes128-gcm,none & echo $! > '" +
                           pid_file.string() + "'; wait $!"},
                      {{"AESXFER_HOME", ws.home.string()}, {"TMPDIR", tmp.string()}}, 120);
    });
    // The data file, found among the bench's open files while it writes it.
    fs::path data;
    for (int i = 0; i < 600 && data.empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const pid_t pid =
          pid_t(std::atol(("0" + (fs::exists(pid_file) ? read_text_file(pid_file) : std::string())).c_str()));
      if (pid <= 0) continue;
      std::error_code ec;
      for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
        const fs::path target = fs::read_symlink(e.path(), ec);
        if (!ec && target.filename().string().rfind("aesxfer-bench-data-", 0) == 0) data = target;
      }
      if (!data.empty()) ::kill(pid, sig);
    }
    bench.join();
    ASSERT_FALSE(data.empty()) << r.describe();
    EXPECT_NE(r.exit_code, 0) << r.describe();
    EXPECT_FALSE(fs::exists(data)) << data;
    EXPECT_TRUE(fs::is_empty(tmp)) << "the scratch directory (keys) is left";
  }
}

TEST(BenchCli, CsvColumns) {
  Workspace ws;
  auto r = run_aesxfer({"bench", "--size", "4M", "--repeat", "2", "-c", "aes128-cbc,rc4", "--csv", "-q"},
                       ws.home, 120);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  EXPECT_EQ(lines[0],
            "cipher,mac,impl,no_aesni,mb_per_s_median,mb_per_s_min,mb_per_s_max,client_cpu_pct,server_cpu_"
            "pct,verdict,tool,"
            "ssh_cipher,vs_scp,record_size,contended,setup_dominates");
  EXPECT_EQ(lines[0], app::kBenchCsvHeader);
  const std::vector<std::string> header = split(lines[0], ',');
  const char* names[] = {"aes128-cbc", "arcfour"};
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto f = split(lines[i], ',');
    ASSERT_EQ(f.size(), header.size()) << lines[i];
    std::map<std::string, std::string> row;
    for (size_t k = 0; k < f.size(); ++k) row[header[k]] = f[k];
    EXPECT_EQ(row["cipher"], names[i - 1]);
    EXPECT_EQ(row["mac"], "hmac-sha256");
    EXPECT_FALSE(row["impl"].empty());
    EXPECT_EQ(row["no_aesni"], env_no_aesni() ? "true" : "false");
    for (const char* k :
         {"mb_per_s_median", "mb_per_s_min", "mb_per_s_max", "client_cpu_pct", "server_cpu_pct"})
      EXPECT_TRUE(is_number(row[k])) << k << "=" << row[k];
    EXPECT_GT(std::strtod(row["mb_per_s_median"].c_str(), nullptr), 0);
    EXPECT_LE(std::strtod(row["mb_per_s_min"].c_str(), nullptr),
              std::strtod(row["mb_per_s_max"].c_str(), nullptr));
    EXPECT_TRUE(known_verdict(row["verdict"])) << row["verdict"];
    EXPECT_EQ(row["tool"], "aesxfer");
    EXPECT_EQ(row["ssh_cipher"], "");
    EXPECT_EQ(row["vs_scp"], "n/a") << "no --vs-scp";
    EXPECT_EQ(row["record_size"], "262144") << "the default record size";
  }
  EXPECT_EQ(r.err, "") << "-q: no progress lines";
}

// The record-size sweep (the seeds' block-size tables, over the wire): every cipher once per
// size, the agreed size in every row, and a line chart of MB/s against record size.
TEST(BenchCli, RecordSizeSweep) {
  Workspace ws;
  const fs::path svg = ws.local / "sweep.svg";
  auto r = run_aesxfer({"bench", "--size", "4M", "--repeat", "2", "-c", "aes128-gcm,aes128-cbc",
                        "--record-size", "4K,64K,1M", "--json", "--plot", svg.string(), "-q"},
                       ws.home, 180);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  Json j;
  ASSERT_TRUE(JsonParser(r.out).parse(j)) << r.out;
  const auto& rows = j.obj["rows"].arr;
  ASSERT_EQ(rows.size(), 6u) << r.out;
  const double want[] = {4096, 65536, 1048576};
  for (size_t i = 0; i < rows.size(); ++i) {
    auto row = rows[i].obj;
    EXPECT_EQ(row["cipher"].str, i < 3 ? "aes128-gcm" : "aes128-cbc");
    EXPECT_EQ(row["record_size"].num, want[i % 3]) << i;
    EXPECT_GT(row["mb_per_s_median"].num, 0);
    EXPECT_EQ(row["mb_per_s_runs"].arr.size(), 2u);
  }
  const std::string doc = read_text_file(svg);
  EXPECT_EQ(xml_problem(doc), "");
  EXPECT_EQ(count_of(doc, "class=\"line\""), 2u) << "one line per cipher";
  for (const char* tick : {">4K<", ">64K<", ">1M<"}) EXPECT_NE(doc.find(tick), std::string::npos) << tick;
  // The table has a record column; sizes outside 4K..1M are a usage error.
  auto t =
      run_aesxfer({"bench", "--size", "1M", "--repeat", "1", "-c", "none", "--record-size", "16K,256K", "-q"},
                  ws.home, 120);
  ASSERT_EQ(t.exit_code, 0) << t.describe();
  EXPECT_NE(t.out.find(" record "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("16K"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("256K"), std::string::npos) << t.out;
  auto bad = run_aesxfer({"bench", "--record-size", "2K"}, ws.home, 30);
  EXPECT_EQ(bad.exit_code, 2) << bad.describe();
}

// Issue 27: a run beside a busy loop on the same core carries the contention mark in every form:
// the JSON rows, the table (with its legend line), the CSV, and the record-size chart (with the
// MAC's name, as the bar chart has it).
TEST(BenchCli, ContendedRunIsMarkedInEveryForm) {
  Workspace ws;
  const fs::path svg = ws.local / "rs.svg";
  ProcResult json, table, csv;
  {
    BusyCore busy;  // the bench's client and its server child inherit the pinning
    json = run_aesxfer({"bench", "--size", "8M", "--repeat", "1", "-c", "none", "--record-size", "16K,256K",
                        "--json", "--plot", svg.string(), "-q"},
                       ws.home, 120);
    table = run_aesxfer({"bench", "--size", "8M", "--repeat", "1", "-c", "none", "-q"}, ws.home, 120);
    csv = run_aesxfer({"bench", "--size", "8M", "--repeat", "1", "-c", "none", "--csv", "-q"}, ws.home, 120);
  }
  ASSERT_EQ(json.exit_code, 0) << json.describe();
  Json j;
  ASSERT_TRUE(JsonParser(json.out).parse(j)) << json.out;
  ASSERT_EQ(j.obj["rows"].arr.size(), 2u) << json.out;
  for (auto& row : j.obj["rows"].arr) {
    EXPECT_TRUE(row.obj["contended"].b) << row.obj["verdict"].str;
    EXPECT_NE(row.obj["verdict"].str.find("conten"), std::string::npos) << row.obj["verdict"].str;
  }
  const std::string doc = read_text_file(svg);
  EXPECT_EQ(xml_problem(doc), "");
  EXPECT_EQ(count_of(doc, "class=\"mark\" "), 2u) << "a '*' beside each point";
  EXPECT_NE(doc.find("* CPU contended"), std::string::npos);
  EXPECT_NE(doc.find("MAC: hmac-sha256"), std::string::npos);
  ASSERT_EQ(table.exit_code, 0) << table.describe();
  const auto lines = lines_of(table.out);
  auto row =
      std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("none ", 0) == 0; });
  ASSERT_NE(row, lines.end()) << table.out;
  EXPECT_NE(row->find("* "), std::string::npos) << "the median carries the mark: " << *row;
  EXPECT_NE(table.out.find("\n* CPU contended: "), std::string::npos) << table.out;
  ASSERT_EQ(csv.exit_code, 0) << csv.describe();
  const auto c = lines_of(csv.out);
  ASSERT_EQ(c.size(), 2u) << csv.out;
  EXPECT_EQ(split(c[1], ',')[split(c[0], ',').size() - 2], "true") << c[1];
}

TEST(BenchCli, NoAesniTooPairsAesRowsWithSpeedup) {
  Workspace ws;
  const fs::path svg = ws.local / "pairs.svg";
  // AESXFER_NO_AESNI=0: the hardware rows must exist even when the suite runs with the variable set.
  auto r = run_process({AESXFER_BINARY, "bench", "--size", "2M", "--repeat", "1", "-c", "aes128-ctr,blowfish",
                        "--no-aesni-too", "--json", "-q", "--plot", svg.string()},
                       {{"AESXFER_HOME", ws.home.string()}, {"AESXFER_NO_AESNI", "0"}}, 180);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  Json j;
  ASSERT_TRUE(JsonParser(r.out).parse(j)) << r.out;
  auto& rows = j.obj["rows"].arr;
  ASSERT_EQ(rows.size(), 3u) << "aes128-ctr twice (on/off), blowfish once";
  EXPECT_EQ(rows[0].obj["cipher"].str, "aes128-ctr");
  EXPECT_FALSE(rows[0].obj["no_aesni"].b);
  EXPECT_EQ(rows[1].obj["cipher"].str, "aes128-ctr");
  EXPECT_TRUE(rows[1].obj["no_aesni"].b);
  for (const char* hw : {"aesni", "vaes"}) EXPECT_NE(rows[1].obj["impl"].str, hw) << "--no-aesni row";
  EXPECT_EQ(rows[2].obj["cipher"].str, "blowfish-cbc");
  ASSERT_EQ(rows[0].obj["speedup"].kind, Json::Num);
  EXPECT_NEAR(rows[0].obj["speedup"].num,
              rows[0].obj["mb_per_s_median"].num / rows[1].obj["mb_per_s_median"].num, 0.05);
  EXPECT_EQ(rows[1].obj["speedup"].kind, Json::Null);
  const std::string doc = read_text_file(svg);
  EXPECT_EQ(xml_problem(doc), "");
  EXPECT_EQ(count_of(doc, "<rect class=\"bar\""), 3u);
}

TEST(BenchCli, TableNamesEveryCipherAndAVerdict) {
  Workspace ws;
  auto r = run_aesxfer({"bench", "--size", "2M", "--repeat", "1", "-c", "aes128-gcm,none"}, ws.home, 120);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("median"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("aes128-gcm" + aesni_tag() + ": limited by: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("none" + aesni_tag() + ": limited by: "), std::string::npos) << r.out;
}

TEST(BenchCli, UsageErrors) {
  Workspace ws;
  struct Case {
    std::vector<std::string> args;
    const char* why;
  };
  const std::vector<Case> cases = {
      {{"bench", "--json", "--csv"}, "--json and --csv"},
      {{"bench", "--size", "lots"}, "bad size"},
      {{"bench", "--size", "1M", "-c", "rot13"}, "unknown cipher"},
      {{"bench", "--size", "1M", "--repeat", "0"}, "repeat 0"},
      {{"bench", "--size", "1M", "-m", "crc32"}, "unknown MAC"},
  };
  for (const auto& c : cases) {
    auto r = run_aesxfer(c.args, ws.home, 60);
    EXPECT_EQ(r.exit_code, 2) << c.why << "\n" << r.describe();
    EXPECT_NE(r.err.find("aesxfer"), std::string::npos) << c.why;
  }
}

TEST(BenchCli, RemoteHostHasNoServerCpu) {
  Workspace ws;
  ServerProcess server(ws.home, ws.root);
  auto r = run_aesxfer({"bench", "127.0.0.1", "-P", std::to_string(server.port()), "--size", "2M", "--repeat",
                        "2", "-c", "aes128-gcm", "--json", "-q"},
                       ws.home, 120);
  ASSERT_EQ(r.exit_code, 0) << r.describe() << "\nserver log:\n" << server.log();
  Json j;
  ASSERT_TRUE(JsonParser(r.out).parse(j)) << r.out;
  EXPECT_FALSE(j.obj["local_server"].b);
  ASSERT_EQ(j.obj["rows"].arr.size(), 1u);
  auto& row = j.obj["rows"].arr[0].obj;
  EXPECT_EQ(row["server_cpu_pct"].kind, Json::Null) << "a remote server's CPU is not measured";
  EXPECT_EQ(row["mb_per_s_runs"].arr.size(), 2u);
  EXPECT_GT(row["mb_per_s_median"].num, 0);
  const std::string v = row["verdict"].str;
  EXPECT_TRUE(v == "network or receiver (server CPU not measured)" || v.rfind("sender cipher CPU", 0) == 0 ||
              v == "CPU contention (other processes)")
      << v;
  EXPECT_TRUE(server.running()) << "bench leaves a remote server running";
}

// bench HOST reads $AESXFER_HOME/config as send does: an alias's HostName and Port take the aesxfer
// rows to the server, and a broken config file is one line and exit 2.
TEST(BenchCli, HostAliasFromTheConfigFile) {
  Workspace ws;
  ServerProcess server(ws.home, ws.root);
  write_text_file(ws.home / "config",
                  "Host srv\n  HostName 127.0.0.1\n  Port " + std::to_string(server.port()) + "\n");
  fs::permissions(ws.home / "config", fs::perms::owner_read | fs::perms::owner_write);
  auto r = run_aesxfer({"bench", "srv", "--size", "1M", "--repeat", "1", "-c", "none", "--json", "-q"},
                       ws.home, 120);
  ASSERT_EQ(r.exit_code, 0) << r.describe() << "\nserver log:\n" << server.log();
  Json j;
  ASSERT_TRUE(JsonParser(r.out).parse(j)) << r.out;
  EXPECT_EQ(j.obj["host"].str, "srv");
  ASSERT_EQ(j.obj["rows"].arr.size(), 1u);
  EXPECT_GT(j.obj["rows"].arr[0].obj["mb_per_s_median"].num, 0);
  // The server logs the put when its session ends, which may be after the client has exited.
  EXPECT_TRUE(server.wait_for_log("op=put")) << server.log();

  write_text_file(ws.home / "config", "Host srv\n  HostName 127.0.0.1\n  Prot 1\n");
  r = run_aesxfer({"bench", "srv", "--size", "1M", "--repeat", "1", "-c", "none", "-q"}, ws.home, 60);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("Prot"), std::string::npos) << r.err;
}

TEST(BenchCli, UnreachableHostFailsWithOneLine) {
  Workspace ws;
  auto r = run_aesxfer({"bench", "127.0.0.1", "-P", std::to_string(unused_port()), "--size", "1M", "--repeat",
                        "1", "-c", "none", "-q", "--timeout", "5"},
                       ws.home, 60);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("aesxfer bench: none"), std::string::npos) << r.err;
}

// ---------------------------------------------------------------------------------------------
// --vs-scp (issue 19): scp next to aesxfer. The real runs use the throwaway sshd that bench starts
// on 127.0.0.1 (or, for a HOST, one the test starts the same way): openssh-server must be
// installed (scripts/setup-debian.sh does it), and these tests fail, not skip, when it is not.

std::string sshd_or_empty() {
  return app::proc::find_program("sshd", {"/usr/sbin", "/usr/local/sbin", "/sbin"});
}
const char* kNoSshd = "sshd not found: install openssh-server (scripts/setup-debian.sh does)";

TEST(BenchUnit, ScpMeterKexAndCipherMap) {
  double mb = 0;
  // As scp 9.2 printed it on a pseudo-terminal (the first update, then the final line).
  const std::string meter =
      "\rdata                                            0%    0     0.0KB/s   --:-- ETA"
      "\rdata                                          100%   64MB 182.3MB/s   00:00    \r\n";
  ASSERT_TRUE(app::parse_scp_meter(meter, mb));
  EXPECT_NEAR(mb, 182.3 * 1048576 / 1e6, 0.01) << "scp's MB are MiB";
  ASSERT_TRUE(app::parse_scp_meter("x 100% 2048MB   1.2GB/s   00:01\r\n", mb));
  EXPECT_NEAR(mb, 1.2 * 1073741824 / 1e6, 0.01);
  ASSERT_TRUE(app::parse_scp_meter("x 100%  512KB 812.5KB/s   00:00\r\n", mb));
  EXPECT_NEAR(mb, 812.5 * 1024 / 1e6, 1e-6);
  EXPECT_FALSE(app::parse_scp_meter("data  45%   29MB  28.1MB/s   00:01 ETA", mb)) << "never reached 100%";
  EXPECT_FALSE(app::parse_scp_meter("", mb));
  EXPECT_FALSE(app::parse_scp_meter("data 100% 64MB fastB/s", mb));

  std::string c, m;
  ASSERT_TRUE(app::parse_ssh_kex(
      "debug1: kex: server->client cipher: aes128-ctr MAC: umac-64-etm@openssh.com compression: none\r\n"
      "debug1: kex: client->server cipher: aes128-cbc MAC: hmac-sha2-256-etm@openssh.com compression: "
      "none\r\n",
      c, m));
  EXPECT_EQ(c, "aes128-cbc") << "the direction the file goes";
  EXPECT_EQ(m, "hmac-sha2-256-etm@openssh.com");
  ASSERT_TRUE(
      app::parse_ssh_kex("debug1: kex: client->server cipher: aes128-gcm@openssh.com MAC: <implicit> "
                         "compression: none\r\n",
                         c, m));
  EXPECT_EQ(c, "aes128-gcm@openssh.com");
  EXPECT_EQ(m, "aead");
  EXPECT_FALSE(app::parse_ssh_kex("debug1: Authentications that can continue: publickey\r\n", c, m));

  const auto cbc = app::scp_cipher_for("aes128-cbc");
  ASSERT_TRUE(cbc.has_value());
  EXPECT_STREQ(cbc->ssh_cipher, "aes128-cbc");
  EXPECT_STREQ(cbc->ssh_mac, "hmac-sha2-256-etm@openssh.com");
  const auto ctr = app::scp_cipher_for("aes128-ctr");
  ASSERT_TRUE(ctr.has_value());
  EXPECT_STREQ(ctr->ssh_mac, "hmac-sha2-256-etm@openssh.com");
  const auto gcm = app::scp_cipher_for("aes128-gcm");
  ASSERT_TRUE(gcm.has_value());
  EXPECT_STREQ(gcm->ssh_cipher, "aes128-gcm@openssh.com");
  EXPECT_EQ(gcm->ssh_mac, nullptr) << "AEAD: no MAC";
  for (const char* gone : {"blowfish-cbc", "arcfour"}) {
    const auto g = app::scp_cipher_for(gone);
    ASSERT_TRUE(g.has_value()) << gone;
    ASSERT_NE(g->history, nullptr) << gone;
    EXPECT_NE(std::string(g->history).find("OpenSSH 7.6"), std::string::npos) << gone;
  }
  EXPECT_EQ(app::scp_cipher_for("none")->ssh_cipher, nullptr);
  EXPECT_FALSE(app::scp_cipher_for("rot13").has_value());
  // The names come from the cipher rows (crypto/suite.cpp), aliases included.
  for (const auto& row : crypto::ciphers()) {
    const auto entry = app::scp_cipher_for(
        row.aliases[0] ? std::string(row.aliases).substr(0, std::string(row.aliases).find(',')) : row.name);
    ASSERT_TRUE(entry.has_value()) << row.name;
    EXPECT_EQ(entry->ssh_cipher, row.openssh.name) << row.name;
    EXPECT_EQ(entry->history, row.openssh.gone) << row.name;
    EXPECT_TRUE(entry->ssh_cipher || entry->history) << row.name << ": no OpenSSH name and no reason";
  }
}

// An scp row: the keys every row has, and those of scp rows.
void expect_scp_row(std::map<std::string, Json>& row, const std::string& cipher, bool local) {
  SCOPED_TRACE("scp row " + cipher);
  EXPECT_EQ(row["tool"].str, "scp");
  EXPECT_EQ(row["cipher"].str, cipher);
  EXPECT_EQ(row["impl"].str, "openssh");
  EXPECT_TRUE(row["offered"].b);
  EXPECT_TRUE(row["metered"].b) << "the rate comes from scp's progress meter";
  EXPECT_GT(row["mb_per_s_median"].num, 0);
  EXPECT_LE(row["mb_per_s_min"].num, row["mb_per_s_median"].num);
  EXPECT_GE(row["mb_per_s_max"].num, row["mb_per_s_median"].num);
  EXPECT_GT(row["client_cpu_pct"].num, 0);
  EXPECT_EQ(row["server_cpu_pct"].kind, local ? Json::Num : Json::Null);
  if (local) {
    EXPECT_GT(row["server_cpu_pct"].num, 0) << "sshd's CPU is counted";
  }
  EXPECT_EQ(row["setup_seconds_median"].kind, Json::Num);
  EXPECT_EQ(row["vs_scp"].kind, Json::Null);
  EXPECT_FALSE(row["verdict"].str.empty());
}

TEST(BenchScp, JsonRowsAgainstTheThrowawaySshd) {
  ASSERT_NE(sshd_or_empty(), "") << kNoSshd;
  Workspace ws;
  const fs::path tmp = ws.local / "tmp", svg = ws.local / "vs.svg";
  fs::create_directories(tmp);
  // AESXFER_NO_AESNI=0: the ratio is only given for rows with AES-NI on (as scp has it).
  auto r = run_process(
      {AESXFER_BINARY, "bench", "--vs-scp", "-c", "aes128-cbc,aes128-gcm,blowfish-cbc,arcfour", "--size",
       "4M", "--repeat", "2", "--json", "-q", "--plot", svg.string()},
      {{"AESXFER_HOME", ws.home.string()}, {"AESXFER_NO_AESNI", "0"}, {"TMPDIR", tmp.string()}}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  Json j;
  ASSERT_TRUE(JsonParser(r.out).parse(j)) << r.out;
  ASSERT_EQ(j.obj["scp"].kind, Json::Obj) << r.out;
  EXPECT_EQ(json_scheme_problems(r.out), std::vector<std::string>{});
  auto& scp = j.obj["scp"].obj;
  EXPECT_NE(scp["version"].str.find("OpenSSH"), std::string::npos) << scp["version"].str;
  EXPECT_EQ(scp["target"].str, "127.0.0.1:/dev/null");
  EXPECT_TRUE(scp["local_sshd"].b);
  auto& rows = j.obj["rows"].arr;
  // Per cipher the aesxfer row, then the scp row; scp's defaults last.
  const std::vector<std::pair<std::string, std::string>> want = {
      {"aesxfer", "aes128-cbc"}, {"scp", "aes128-cbc"},       {"aesxfer", "aes128-gcm"},
      {"scp", "aes128-gcm"},     {"aesxfer", "blowfish-cbc"}, {"scp", "blowfish-cbc"},
      {"aesxfer", "arcfour"},    {"scp", "arcfour"},          {"scp", "default"}};
  ASSERT_EQ(rows.size(), want.size()) << r.out;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(rows[i].obj["tool"].str, want[i].first) << i;
    EXPECT_EQ(rows[i].obj["cipher"].str, want[i].second) << i;
  }
  auto& cbc = rows[1].obj;
  expect_scp_row(cbc, "aes128-cbc", true);
  EXPECT_EQ(cbc["ssh_cipher"].str, "aes128-cbc") << "what ssh -v says was negotiated";
  EXPECT_EQ(cbc["mac"].str, "hmac-sha2-256-etm@openssh.com");
  EXPECT_EQ(cbc["mb_per_s_runs"].arr.size(), 2u);
  auto& gcm = rows[3].obj;
  expect_scp_row(gcm, "aes128-gcm", true);
  EXPECT_EQ(gcm["ssh_cipher"].str, "aes128-gcm@openssh.com");
  EXPECT_EQ(gcm["mac"].str, "aead");
  // Issue 27: both tools' set-up is timed, and "+" is set where it took longer than the transfer.
  for (auto& row : rows) {
    auto& o = row.obj;
    if (o["mb_per_s_median"].kind != Json::Num) continue;
    SCOPED_TRACE(o["tool"].str + " " + o["cipher"].str);
    ASSERT_EQ(o["setup_seconds_median"].kind, Json::Num) << r.out;
    // A row without scp's meter (a starved scp draws none) is timed over the whole run: its
    // transfer is that less the set-up, which ssh -v's "Authenticated to" still marks.
    const bool whole_run = o["tool"].str == "scp" && !o["metered"].b;
    const double setup = o["setup_seconds_median"].num,
                 transfer = 4.0 * 1048576 / (o["mb_per_s_median"].num * 1e6) - (whole_run ? setup : 0);
    if (std::abs(setup - transfer) > 0.002) {
      EXPECT_EQ(o["setup_dominates"].b, setup > transfer);
    }
    EXPECT_EQ(o["contended"].kind, Json::Bool);
  }
  auto& def = rows[8].obj;
  expect_scp_row(def, "default", true);
  EXPECT_FALSE(def["ssh_cipher"].str.empty()) << "the negotiated cipher of scp's defaults";
  // The ratio on the aesxfer rows is their median over the scp row's.
  for (size_t i : {0u, 2u}) {
    auto& a = rows[i].obj;
    ASSERT_EQ(a["vs_scp"].kind, Json::Num) << i;
    // Both medians and the ratio are printed to 2 decimals, so the ratio of the printed medians
    // may differ from the printed ratio by the rounding of all three (x90 against scp: ~0.02).
    const double ma = a["mb_per_s_median"].num, ms = rows[i + 1].obj["mb_per_s_median"].num;
    const double bound = 0.005 + (ma / ms) * (0.005 / ma + 0.005 / ms) + 1e-9;
    EXPECT_NEAR(a["vs_scp"].num, ma / ms, bound) << i;
    EXPECT_EQ(a["server_cpu_pct"].kind, Json::Num);
  }
  // OpenSSH removed blowfish-cbc and arcfour in 7.6: rows that say so, without figures.
  for (size_t i : {5u, 7u}) {
    auto& g = rows[i].obj;
    SCOPED_TRACE(g["cipher"].str);
    EXPECT_EQ(g["tool"].str, "scp");
    EXPECT_FALSE(g["offered"].b);
    EXPECT_EQ(g["mb_per_s_median"].kind, Json::Null);
    EXPECT_EQ(g["mb_per_s_min"].kind, Json::Null);
    EXPECT_EQ(g["mb_per_s_runs"].arr.size(), 0u);
    EXPECT_EQ(g["client_cpu_pct"].kind, Json::Null);
    EXPECT_NE(g["verdict"].str.find("not offered"), std::string::npos) << g["verdict"].str;
    EXPECT_NE(g["verdict"].str.find("removed in OpenSSH 7.6"), std::string::npos) << g["verdict"].str;
    EXPECT_EQ(rows[i - 1].obj["vs_scp"].kind, Json::Null) << "nothing to compare with";
  }
  // The chart: a bar per measured row, the refusals as text in their place.
  const std::string doc = read_text_file(svg);
  EXPECT_EQ(xml_problem(doc), "");
  EXPECT_EQ(count_of(doc, "<rect class=\"bar\""), 7u);
  EXPECT_EQ(count_of(doc, "<text class=\"absent\""), 2u);
  EXPECT_NE(doc.find("removed in OpenSSH 7.6"), std::string::npos);
  EXPECT_EQ(count_of(doc, "aesxfer/scp: x"), 2u) << "the ratio under the aes128-cbc and aes128-gcm groups";
  // The one encoding (app/lab/svg.h): scp has its own colour, each cipher its family's.
  EXPECT_EQ(chart_encoding_problems({doc}), std::vector<std::string>{});
  EXPECT_NE(doc.find(std::string("fill=\"") + app::svg::family_colour("scp") + "\" data-family=\"scp\""),
            std::string::npos);
  // The throwaway sshd was stopped by its PID, and its keys went with the temporary folder.
  const pid_t sshd = pid_t(scp["sshd_pid"].num);
  ASSERT_GT(sshd, 0);
  const std::string cmdline = "/proc/" + std::to_string(sshd) + "/cmdline";
  EXPECT_TRUE(!fs::exists(cmdline) || read_text_file(cmdline).find("sshd_config") == std::string::npos)
      << "sshd " << sshd << " still runs";
  EXPECT_TRUE(fs::is_empty(tmp)) << "the temporary folder (keys, sshd_config) is removed";
}

TEST(BenchScp, CsvRowsAndRefusals) {
  ASSERT_NE(sshd_or_empty(), "") << kNoSshd;
  Workspace ws;
  // 16 MiB: at 2 MiB scp's default row once printed its meter a single time under the ASan stage's
  // load, so its metered window was 0 s and its server CPU share "n/a" (a loaded run this stop).
  auto r = run_process({AESXFER_BINARY, "bench", "--vs-scp", "-c", "aes128-ctr,arcfour,none", "--size", "16M",
                        "--repeat", "1", "--csv", "-q"},
                       {{"AESXFER_HOME", ws.home.string()}, {"AESXFER_NO_AESNI", "0"}}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 8u) << r.out;  // header, 3 aesxfer rows, 3 scp rows, scp's defaults
  EXPECT_EQ(lines[0], app::kBenchCsvHeader);
  const std::vector<std::string> header = split(lines[0], ',');
  std::vector<std::map<std::string, std::string>> rows;
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto f = split(lines[i], ',');
    ASSERT_EQ(f.size(), header.size()) << lines[i];
    std::map<std::string, std::string> row;
    for (size_t k = 0; k < f.size(); ++k) row[header[k]] = f[k];
    rows.push_back(row);
  }
  const char* order[][2] = {{"aesxfer", "aes128-ctr"}, {"scp", "aes128-ctr"}, {"aesxfer", "arcfour"},
                            {"scp", "arcfour"},        {"aesxfer", "none"},   {"scp", "none"},
                            {"scp", "default"}};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["tool"], order[i][0]) << i;
    EXPECT_EQ(rows[i]["cipher"], order[i][1]) << i;
  }
  EXPECT_EQ(rows[1]["ssh_cipher"], "aes128-ctr");
  EXPECT_EQ(rows[1]["mac"], "hmac-sha2-256-etm@openssh.com");
  // The "+" column is a boolean on every measured row (whether set-up dominates 2 MB depends on
  // how fast scp ran: TableShowsBothToolsAndTheRatio and the JSON test check the rule itself; at
  // 256 KiB scp's metered window can be too short for the CPU figures this test reads).
  EXPECT_TRUE(rows[1]["setup_dominates"] == "true" || rows[1]["setup_dominates"] == "false") << lines[2];
  EXPECT_EQ(rows[3]["setup_dominates"], "false") << "not offered: no figures, no mark";
  for (size_t i : {1u, 6u}) {
    for (const char* k :
         {"mb_per_s_median", "mb_per_s_min", "mb_per_s_max", "client_cpu_pct", "server_cpu_pct"})
      EXPECT_TRUE(is_number(rows[i][k])) << i << " " << k << "=" << rows[i][k];
    EXPECT_EQ(rows[i]["vs_scp"], "n/a");
  }
  ASSERT_TRUE(is_number(rows[0]["vs_scp"])) << rows[0]["vs_scp"];
  EXPECT_NEAR(std::strtod(rows[0]["vs_scp"].c_str(), nullptr),
              std::strtod(rows[0]["mb_per_s_median"].c_str(), nullptr) /
                  std::strtod(rows[1]["mb_per_s_median"].c_str(), nullptr),
              0.02);
  // Refusals: no figures, a verdict that says why.
  for (size_t i : {3u, 5u}) {
    for (const char* k :
         {"mb_per_s_median", "mb_per_s_min", "mb_per_s_max", "client_cpu_pct", "server_cpu_pct"})
      EXPECT_EQ(rows[i][k], "n/a") << i << " " << k;
    EXPECT_EQ(rows[i]["verdict"].rfind("not offered: ", 0), 0u) << rows[i]["verdict"];
  }
  EXPECT_NE(rows[3]["verdict"].find("removed in OpenSSH 7.6"), std::string::npos) << rows[3]["verdict"];
  EXPECT_NE(rows[5]["verdict"].find("no unencrypted cipher"), std::string::npos) << rows[5]["verdict"];
  EXPECT_EQ(rows[2]["vs_scp"], "n/a");
}

TEST(BenchScp, TableShowsBothToolsAndTheRatio) {
  ASSERT_NE(sshd_or_empty(), "") << kNoSshd;
  Workspace ws;
  auto r = run_process({AESXFER_BINARY, "bench", "--vs-scp", "-c", "aes128-gcm,blowfish-cbc", "--size",
                        "256K", "--repeat", "1"},
                       {{"AESXFER_HOME", ws.home.string()}, {"AESXFER_NO_AESNI", "0"}}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  EXPECT_NE(r.out.find("vs scp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("scp:  OpenSSH"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(throwaway sshd, pid "), std::string::npos) << r.out;
  const auto lines = lines_of(r.out);
  auto line_of = [&](const std::string& start) {
    for (const auto& l : lines)
      if (l.rfind(start, 0) == 0) return l;
    return std::string();
  };
  const std::string a = line_of("aes128-gcm    aesxfer "), s = line_of("aes128-gcm    scp "),
                    g = line_of("blowfish-cbc  scp ");
  EXPECT_NE(a, "") << r.out;
  EXPECT_NE(s, "") << r.out;
  EXPECT_NE(a.find(" x"), std::string::npos) << "the ratio ends the aesxfer row: " << a;
  EXPECT_NE(g.find("not offered: removed in OpenSSH 7.6"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("aes128-gcm (scp -c aes128-gcm@openssh.com): limited by: "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("progress meter"), std::string::npos) << r.out;
  // 256 KiB is too small for scp even when it is starved (at 6 MB/s it moves in 0.04 s, less than
  // any ssh set-up); its row is marked "+", explained under the table and in
  // its verdict line, and both tools' set-up times are given.
  EXPECT_NE(s.find("+"), std::string::npos) << s;
  EXPECT_NE(r.out.find("\n+ set-up (connect, key exchange, authentication) took longer than the transfer"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("aes128-gcm (scp -c aes128-gcm@openssh.com): limited by: "), std::string::npos);
  EXPECT_NE(r.out.find(" s: too small to compare"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" s per aesxfer connection"), std::string::npos) << r.out;
}

// Without scp's meter (-q hides it; a starved scp may draw none) the row still has every field:
// the rate over the whole run, the set-up up to ssh -v's "Authenticated to", and "+" from those.
TEST(BenchScp, RowsWithoutAMeterStillTimeTheSetUp) {
  ASSERT_NE(sshd_or_empty(), "") << kNoSshd;
  Workspace ws;
  auto r = run_process({AESXFER_BINARY, "bench", "--vs-scp", "-c", "aes128-ctr", "--size", "256K", "--repeat",
                        "1", "--json", "-q", "--ssh-opts=-q"},
                       {{"AESXFER_HOME", ws.home.string()}}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  Json j;
  ASSERT_TRUE(JsonParser(r.out).parse(j)) << r.out;
  EXPECT_EQ(j.obj["scp"].obj["timed_by"].str, "whole scp run") << r.out;
  int scp_rows = 0;
  for (auto& row : j.obj["rows"].arr) {
    auto& o = row.obj;
    if (o["tool"].str != "scp") continue;
    ++scp_rows;
    SCOPED_TRACE(o["cipher"].str);
    EXPECT_FALSE(o["metered"].b);
    ASSERT_EQ(o["setup_seconds_median"].kind, Json::Num) << r.out;
    const double setup = o["setup_seconds_median"].num,
                 whole = 256.0 * 1024 / (o["mb_per_s_median"].num * 1e6);
    EXPECT_GT(setup, 0);
    EXPECT_LT(setup, whole * 1.01 + 0.01) << "the set-up is part of the whole run";
    if (std::abs(2 * setup - whole) > 0.01) {
      EXPECT_EQ(o["setup_dominates"].b, setup > whole - setup) << r.out;
    }
  }
  EXPECT_EQ(scp_rows, 2) << r.out;
}

TEST(BenchScp, HostUsesTheUsersSshSetupThroughSshOpts) {
  const std::string sshd_path = sshd_or_empty();
  ASSERT_NE(sshd_path, "") << kNoSshd;
  Workspace ws;
  ServerProcess server(ws.home, ws.root);
  // The "user's own setup": an sshd on loopback that only the ssh_config given by --ssh-opts reaches.
  // 16 MiB: scp's CPU for 2 MiB (a few ms) was measured as 0 once, under the ASan stage's load.
  app::ThrowawaySshd sshd(ws.local / "ssh", sshd_path, app::proc::find_program("ssh-keygen"));
  auto r = run_aesxfer({"bench", "127.0.0.1", "-P", std::to_string(server.port()), "--vs-scp",
                        "--ssh-opts=-F " + sshd.client_config().string(), "-c", "aes128-ctr", "--size", "16M",
                        "--repeat", "1", "--json", "-q"},
                       ws.home, 300);
  ASSERT_EQ(r.exit_code, 0) << r.describe() << "\nsshd log: " << sshd.log_tail();
  Json j;
  ASSERT_TRUE(JsonParser(r.out).parse(j)) << r.out;
  EXPECT_FALSE(j.obj["local_server"].b);
  EXPECT_FALSE(j.obj["scp"].obj["local_sshd"].b);
  EXPECT_EQ(j.obj["scp"].obj["sshd_pid"].kind, Json::Null);
  auto& rows = j.obj["rows"].arr;
  ASSERT_EQ(rows.size(), 3u) << r.out;
  expect_scp_row(rows[1].obj, "aes128-ctr", false);
  EXPECT_EQ(rows[1].obj["ssh_cipher"].str, "aes128-ctr");
  EXPECT_EQ(rows[1].obj["mac"].str, "hmac-sha2-256-etm@openssh.com");
  expect_scp_row(rows[2].obj, "default", false);
  // The server side is not measured: no verdict may blame it (a loaded machine gives contention).
  for (size_t i : {1u, 2u}) {
    const std::string v = rows[i].obj["verdict"].str;
    EXPECT_TRUE(v == "network or receiver (server CPU not measured)" ||
                v.rfind("sender cipher CPU", 0) == 0 || v == "CPU contention (other processes)")
        << v;
  }
  EXPECT_TRUE(server.running());
  const pid_t pid = sshd.pid();
  EXPECT_EQ(sshd.stop(), 0) << "the test's own sshd stops on SIGTERM: " << sshd.log_tail();
  EXPECT_NE(::kill(pid, 0), 0);
}

TEST(BenchScp, UsageAndMissingPrograms) {
  Workspace ws;
  // Without sshd a local run says which package to install, before writing any data.
  auto r = run_aesxfer({"bench", "--vs-scp", "--sshd", (ws.local / "no-such-sshd").string(), "--size", "1M"},
                       ws.home, 60);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("install the openssh-server package"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("writing"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
  // Without scp in $PATH: the client package.
  r = run_process({AESXFER_BINARY, "bench", "--vs-scp", "--size", "1M"},
                  {{"AESXFER_HOME", ws.home.string()}, {"PATH", ws.local.string()}}, 60);
  EXPECT_EQ(r.exit_code, 1) << r.describe();
  EXPECT_NE(r.err.find("openssh-client"), std::string::npos) << r.err;
  r = run_aesxfer({"bench", "--ssh-opts=-q", "--size", "1M"}, ws.home, 60);
  EXPECT_EQ(r.exit_code, 2) << r.describe();
  EXPECT_NE(r.err.find("--vs-scp"), std::string::npos) << r.err;
}

TEST(SpeedPlot, OnePolylinePerRow) {
  Workspace ws;
  const fs::path svg = ws.local / "speed.svg";
  auto r = run_aesxfer(
      {"speed", "-c", "aes128-cbc,none,hmac-sha256", "--seconds", "0.01", "--json", "--plot", svg.string()},
      ws.home, 120);
  ASSERT_EQ(r.exit_code, 0) << r.describe();
  Json j;
  ASSERT_TRUE(JsonParser(r.out).parse(j)) << r.out;
  std::set<std::string> rows;
  for (auto& cell : j.obj["results"].arr)
    rows.insert(cell.obj["cipher"].str + "/" + cell.obj["op"].str + "/" +
                (cell.obj.count("lanes") ? std::to_string(int(cell.obj["lanes"].num)) : "-"));
  ASSERT_GE(rows.size(), 5u) << r.out;  // cbc enc, dec, lanes..., none enc, dec, hmac, sha256
  const std::string doc = read_text_file(svg);
  EXPECT_EQ(xml_problem(doc), "");
  EXPECT_EQ(count_of(doc, "<polyline"), rows.size());
  EXPECT_NE(doc.find("block size"), std::string::npos);
  EXPECT_NE(doc.find("MB per CPU-second"), std::string::npos);
  EXPECT_NE(doc.find(">1M<"), std::string::npos) << "x ticks name the block sizes";
}

TEST(SpeedPlot, UnwritablePlotFails) {
  Workspace ws;
  auto r = run_aesxfer(
      {"speed", "-c", "none", "--seconds", "0.01", "--plot", (ws.local / "no/such/dir/x.svg").string()},
      ws.home, 60);
  EXPECT_EQ(r.exit_code, 2) << r.describe();  // a usage error, before the measurement (272d568)
  EXPECT_NE(r.err.find("--plot"), std::string::npos) << r.err;
}

// A sixteenth re-attack (L8): -c ",," named nothing and ran every cipher. A usage error, for speed
// and bench alike; leaving -c out is how to ask for all.
TEST(SpeedPlot, AListThatNamesNothingIsRefused) {
  Workspace ws;
  for (const char* verb : {"speed", "bench"}) {
    auto r = run_aesxfer({verb, "-c", ",,"}, ws.home, 60);
    EXPECT_EQ(r.exit_code, 2) << verb << r.describe();
    EXPECT_NE(r.err.find("names no cipher (leave -c out for all)"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace aesxfer::test
