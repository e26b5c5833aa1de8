// Writes the seed corpus for the fuzz targets (tests/fuzz/corpus/<target>/): a few small valid
// inputs made by the product's own code. Run from the fuzz build: fuzz_make_corpus DIR.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "crypto/suite.h"
#include "proto/handshake.h"
#include "proto/listing.h"
#include "proto/messages.h"
#include "proto/record.h"
#include "tests/fuzz/fixed_keys.h"

using namespace aesxfer;
namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

static void put(const fs::path& dir, const std::string& name, const Bytes& b) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary)
      .write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  fs::path root = argv[1];
  // Handshake: a server fed a real ClientHello (+ ClientAuth of a real run); a client fed a real
  // ServerHello.
  proto::Identity host = proto::Identity::generate(), me = proto::Identity::generate();
  for (const char* cn : {"aes128-gcm", "aes128-cbc", "blowfish-cbc"}) {
    proto::ClientHandshake c(me, *crypto::find_cipher(cn), *crypto::find_mac("hmac-sha256"));
    proto::ServerHandshake s(host, [](const proto::PublicKey&) { return true; });
    Bytes hello = c.start().send;
    proto::Step sh = s.feed(hello.data(), hello.size());
    c.feed(sh.send.data(), sh.send.size());
    Bytes auth = c.confirm_host().send;
    Bytes in{0x00};
    in.insert(in.end(), hello.begin(), hello.end());
    in.insert(in.end(), auth.begin(), auth.end());
    put(root / "fuzz_handshake", std::string("server-") + cn, in);
    Bytes cin{uint8_t(0x01 | (0 << 1))};
    cin.insert(cin.end(), sh.send.begin(), sh.send.end());
    put(root / "fuzz_handshake", std::string("client-") + cn, cin);
  }
  // Records: a control, a data and an end record for each cipher (MAC hmac-sha256 and none).
  const proto::DirectionKeys k = fuzz::fixed_keys();
  auto ciphers = crypto::ciphers();
  auto macs = crypto::macs();
  for (size_t ci = 0; ci < ciphers.size(); ++ci)
    for (size_t mi = 0; mi < macs.size(); ++mi) {
      proto::RecordSealer s(ciphers[ci], macs[mi], k);
      Bytes stream{uint8_t(ci), uint8_t(mi), 0};
      const std::pair<proto::RecordType, size_t> recs[] = {
          {proto::RecordType::control, 5}, {proto::RecordType::data, 100}, {proto::RecordType::end, 40}};
      for (auto [t, n] : recs) {
        Bytes rec(proto::kHeaderLen + n + s.max_overhead());
        for (size_t i = 0; i < n; ++i) rec[proto::kHeaderLen + i] = uint8_t(i * 7);
        size_t len = s.seal(t, t == proto::RecordType::end ? proto::kFlagFinal : 0, rec.data(), n);
        stream.insert(stream.end(), rec.begin(), rec.begin() + long(len));
      }
      put(root / "fuzz_record", std::string("stream-") + ciphers[ci].name + "-" + macs[mi].name, stream);
      put(root / "fuzz_record", std::string("roundtrip-") + ciphers[ci].name + "-" + macs[mi].name,
          Bytes{uint8_t(ci), uint8_t(0x80 | mi), 0, 'h', 'e', 'l', 'l', 'o'});
    }
  // Batches (fuzz_batch): per cipher and MAC, 3 data records and an end record as the sender's
  // seal_batch makes them, opened 4 at a time; and a round trip of 3 records, untouched and with
  // one bit flipped.
  for (size_t ci = 0; ci < ciphers.size(); ++ci)
    for (size_t mi = 0; mi < macs.size(); ++mi) {
      proto::RecordSealer s(ciphers[ci], macs[mi], k);
      std::vector<Bytes> recs(4);
      std::vector<proto::SealJob> jobs(4);
      for (size_t i = 0; i < 4; ++i) {
        const size_t n = i == 3 ? 40 : 1000 + 300 * i;
        recs[i].assign(proto::kHeaderLen + n + s.max_overhead(), uint8_t(i * 13));
        jobs[i] = {i == 3 ? proto::RecordType::end : proto::RecordType::data,
                   uint8_t(i == 3 ? proto::kFlagFinal : 0), recs[i].data(), n, 0};
      }
      s.seal_batch(jobs.data(), jobs.size());
      Bytes stream{uint8_t(ci), uint8_t(mi), 3};
      for (size_t i = 0; i < 4; ++i)
        stream.insert(stream.end(), recs[i].begin(), recs[i].begin() + long(jobs[i].wire_len));
      const std::string tag = std::string(ciphers[ci].name) + "-" + macs[mi].name;
      put(root / "fuzz_batch", "stream-" + tag, stream);
      Bytes rt{uint8_t(ci), uint8_t(0x80 | mi), 2, 0, 0, 0};
      for (int i = 0; i < 300; ++i) rt.push_back(uint8_t(i * 7));
      put(root / "fuzz_batch", "roundtrip-" + tag, rt);
      rt[3] = 1, rt[5] = 77;  // flip bit 77 of record 1
      put(root / "fuzz_batch", "tampered-" + tag, rt);
    }
  // Messages: one of each type.
  std::vector<proto::Message> ms(6);
  ms[0].type = proto::MsgType::welcome, ms[0].text = "hello";
  ms[1].type = proto::MsgType::request, ms[1].op = proto::Op::put, ms[1].path = "dir/file.bin",
  ms[1].size = 1234, ms[1].text = "file.bin";
  ms[2].type = proto::MsgType::request, ms[2].op = proto::Op::get, ms[2].path = "file.bin";
  ms[3].type = proto::MsgType::response, ms[3].size = 99, ms[3].mode = 0644, ms[3].mtime = 1700000000;
  ms[4].type = proto::MsgType::result, ms[4].status = proto::Status::no_space,
  ms[4].text = "no space left on device";
  ms[5].type = proto::MsgType::bye;
  for (size_t i = 0; i < ms.size(); ++i) {
    Bytes b;
    proto::encode(ms[i], b);
    put(root / "fuzz_messages", "msg-" + std::to_string(i), b);
  }
  // recv -r and recv --resume: a list request, a get with the resume flag and a listing page.
  proto::Message lq, rg;
  lq.type = proto::MsgType::request, lq.op = proto::Op::list, lq.path = "dir";
  rg.type = proto::MsgType::request, rg.op = proto::Op::get, rg.path = "file.bin", rg.offset = 4096,
  rg.flags = proto::kFlagResume, rg.digest = std::string(proto::kPrefixMacLen, '\x5a');
  Bytes b;
  proto::encode(lq, b);
  put(root / "fuzz_messages", "msg-list", b);
  proto::encode(rg, b);
  put(root / "fuzz_messages", "msg-get-resume", b);
  proto::ListPage page;
  page.last = true;
  page.entries = {{proto::EntryType::dir, "d", 0, 0755, 1700000000},
                  {proto::EntryType::file, "d/f.bin", 300001, 0644, 1700000000},
                  {proto::EntryType::symlink, "d/l", 0, 0777, 1700000000}};
  proto::encode_list_page(page, b);
  put(root / "fuzz_messages", "page-0", b);
  page.entries = {{proto::EntryType::left_out, ".", 2, 0, 0},
                  {proto::EntryType::unreadable_dir, "locked", 0, 0700, 1700000000},
                  {proto::EntryType::dir, "d", 0, 0755, 1700000000},
                  {proto::EntryType::left_out, "d", 1, 0, 0}};
  proto::encode_list_page(page, b);
  put(root / "fuzz_messages", "page-not-listed", b);  // protocol 5's kinds
  // Differential: each family (fuzz_differential.cpp) over lengths around its block and lane
  // boundaries; the key, IV and data are a counter pattern, the selector varies.
  for (uint8_t family = 0; family < 8; ++family)
    for (size_t len : {size_t(0), size_t(15), size_t(64), size_t(1000), size_t(4099)}) {
      Bytes d{family, uint8_t(len * 7 + family)};
      for (size_t i = 0; i < 32 + len; ++i) d.push_back(uint8_t(i * 31 + family));
      put(root / "fuzz_differential", "family" + std::to_string(family) + "-" + std::to_string(len), d);
    }
  // fuzz_client writes its own seeds (answers a real server gives): FUZZ_CLIENT_SEEDS=DIR fuzz_client.
  std::printf("corpus written to %s\n", root.c_str());
  return 0;
}
