// The client config parser (client/config.h), on text: ssh_config's syntax and semantics.
#include "client/config.h"

#include <gtest/gtest.h>

namespace aesxfer::client {
namespace {

std::string error_of(const std::string& text, const std::string& host = "h") {
  try {
    parse_config(text, "cfg", host);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ConfigParse, HostBlocksWildcardsAndFirstValueWins) {
  const std::string text =
      "# comment line\n"
      "Host backup  nas?.lan   # two patterns\n"
      "  HostName 10.0.0.7\n"
      "  Port 7300\n"
      "Host *.lan\n"
      "  Port 7400\n"  // a later block: the first value obtained (7300) wins for nas1.lan
      "  Cipher aes128-cbc\n"
      "Host *\n"
      "  Cipher aes128-ctr\n"
      "  Streams 4\n";
  HostConfig b = parse_config(text, "cfg", "backup");
  EXPECT_EQ(b.hostname, "10.0.0.7");
  EXPECT_EQ(b.port, 7300);
  EXPECT_EQ(b.cipher, "aes128-ctr");
  EXPECT_EQ(b.streams, 4);
  EXPECT_EQ(b.applied, (std::vector<std::string>{"cfg line 2", "cfg line 8"}));
  HostConfig n = parse_config(text, "cfg", "NAS1.lan");  // matching ignores case
  EXPECT_EQ(n.port, 7300);
  EXPECT_EQ(n.cipher, "aes128-cbc");
  HostConfig x = parse_config(text, "cfg", "nas12.lan");  // '?' is one character
  EXPECT_EQ(x.hostname, std::nullopt);
  EXPECT_EQ(x.port, 7400);
  HostConfig o = parse_config(text, "cfg", "other");
  EXPECT_EQ(o.port, std::nullopt);
  EXPECT_EQ(o.cipher, "aes128-ctr");
}

TEST(ConfigParse, EqualsFormsCaseAndQuotes) {
  HostConfig c = parse_config(
      "port=7001\nCIPHER = aes128-cbc\nmac= hmac-sha256\nIdentityFile \"/keys/my key\"\nrecordsize 64K\n"
      "Checksum sha256\nTimeout 2.5\nStrictHostKeyChecking yes\nretries=0\n",
      "cfg", "h");
  EXPECT_EQ(c.port, 7001);
  EXPECT_EQ(c.cipher, "aes128-cbc");
  EXPECT_EQ(c.mac, "hmac-sha256");
  EXPECT_EQ(c.identity_file, "/keys/my key");
  EXPECT_EQ(c.record_size, 65536u);
  EXPECT_EQ(c.checksum, "sha256");
  EXPECT_EQ(c.timeout, 2.5);
  EXPECT_EQ(c.strict_host_keys, true);
  EXPECT_EQ(c.retries, 0) << "0 is a value (end at the first loss), not unset";
  EXPECT_EQ(c.applied, std::vector<std::string>{}) << "no Host line matched: none named";
}

TEST(ConfigParse, NegatedPatternExcludes) {
  const std::string text = "Host *.lan !secret.lan\n  Port 7100\n";
  EXPECT_EQ(parse_config(text, "cfg", "a.lan").port, 7100);
  EXPECT_EQ(parse_config(text, "cfg", "secret.lan").port, std::nullopt);
  EXPECT_EQ(parse_config("Host !x\nPort 1\n", "cfg", "y").port, std::nullopt) << "only negations: no match";
}

TEST(ConfigParse, EveryLineIsCheckedMatchingOrNot) {
  EXPECT_EQ(error_of("Host other\n  Prot 7227\n"),
            "cfg:2: unknown keyword 'Prot' (known: Host, " + config_keywords() + ")");
  EXPECT_EQ(error_of("Host other\n\n  Port 99999\n"), "cfg:3: Port '99999': bad port (1 to 65535)");
  EXPECT_EQ(error_of("Cipher des\n").rfind("cfg:1: Cipher 'des': unknown cipher (known: ", 0), 0u);
  EXPECT_EQ(error_of("Port\n"), "cfg:1: Port: missing value");
  EXPECT_EQ(error_of("Port 1 2\n"), "cfg:1: Port: one value expected, got 2");
  EXPECT_EQ(error_of("Streams 17\n"), "cfg:1: Streams '17': bad number of streams (0 = auto, 1 to 16)");
  EXPECT_EQ(error_of("Retries 101\n"),
            "cfg:1: Retries '101': bad number of retries (0 to 100; 0 = end at the first lost connection)");
  EXPECT_EQ(error_of("Retries -1\n").rfind("cfg:1: Retries '-1': bad number of retries", 0), 0u);
  EXPECT_EQ(error_of("RecordSize 2M\n"), "cfg:1: RecordSize '2M': bad record size (4K to 1M)");
  EXPECT_EQ(error_of("IdentityFile ~bob/k\n"),
            "cfg:1: IdentityFile '~bob/k': ~user is not supported (write ~/ or a path)");
  EXPECT_EQ(error_of("StrictHostKeyChecking no\n").rfind("cfg:1: StrictHostKeyChecking 'no': must be yes", 0),
            0u);
  EXPECT_EQ(error_of("HostName \"a b\n"), "cfg:1: unterminated quote");
  EXPECT_EQ(error_of("Host\n"), "cfg:1: Host: at least one pattern expected");
  EXPECT_EQ(error_of("Checksum md5\n").rfind("cfg:1: Checksum 'md5': unknown checksum", 0), 0u);
  EXPECT_EQ(error_of("Port 7227\nTimeout 0\n"),
            "cfg:2: Timeout '0': bad timeout (seconds, more than 0 and at most a year)");
  EXPECT_EQ(error_of("Bad\x1b[2J 1\n").find('\x1b'), std::string::npos) << "control bytes escaped";
}

TEST(ConfigParse, OptionsFirstWinsAndFillFrom) {
  HostConfig o;
  apply_option("Port=7001", o);
  apply_option("port 7002", o);  // repeated: the first one wins, as in ssh
  apply_option("Cipher=aes128-cbc", o);
  EXPECT_EQ(o.port, 7001);
  HostConfig file = parse_config("Port 7300\nCipher aes128-ctr\nStreams 2\n", "cfg", "h");
  o.fill_from(file);
  EXPECT_EQ(o.port, 7001);
  EXPECT_EQ(o.cipher, "aes128-cbc");
  EXPECT_EQ(o.streams, 2);
  HostConfig bad;
  try {
    apply_option("Host=x", bad);
    ADD_FAILURE() << "Host accepted in -o";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "-o 'Host=x': Host blocks belong in the config file");
  }
  EXPECT_THROW(apply_option("Nope=1", bad), ConfigError);
}

TEST(ConfigParse, PatternsAndTilde) {
  EXPECT_TRUE(match_pattern("host.example.org", "*.example.org"));
  EXPECT_TRUE(match_pattern("abc", "a*c"));
  EXPECT_TRUE(match_pattern("ac", "a*c"));
  EXPECT_TRUE(match_pattern("abcbc", "a*bc"));
  EXPECT_FALSE(match_pattern("abcd", "a*c"));
  EXPECT_TRUE(match_pattern("a1", "a?"));
  EXPECT_FALSE(match_pattern("a", "a?"));
  EXPECT_TRUE(match_pattern("", "*"));
  EXPECT_TRUE(match_pattern("10.0.0.7", "10.0.0.*"));
  EXPECT_EQ(expand_tilde("~/.keys/k", "/home/u"), "/home/u/.keys/k");
  EXPECT_EQ(expand_tilde("~", "/home/u"), "/home/u");
  EXPECT_EQ(expand_tilde("k~", "/home/u"), "k~");
  EXPECT_EQ(expand_tilde("/abs/k", "/home/u"), "/abs/k");
}

}  // namespace
}  // namespace aesxfer::client
