#include "client/stream_growth.h"

#include <algorithm>

namespace aesxfer::client {

int StreamGrowth::step(const Sample& s) {
  if (stopped_) return 0;
  const int64_t ms = s.ms;
  const uint64_t acked = s.acked, sent = s.sent, resent = s.resent;
  const int conns = s.conns;
  if (conns != phase_conns_) {  // the first sample, or connections were added: a new phase
    phase_conns_ = conns;
    phase_start_ = ms;
    measuring_ = false;
  }
  if (!measuring_) {
    if (ms - phase_start_ < kSettleMs) return 0;
    measuring_ = true;
    m_ms_ = ms;
    m_acked_ = acked;
    m_sent_ = sent;
    m_resent_ = resent;
    return 0;
  }
  if (ms - m_ms_ < kMeasureMs) return 0;
  Phase now;
  now.conns = conns;
  now.rate = double(acked - m_acked_) * 1000.0 / double(ms - m_ms_);
  now.resent = sent > m_sent_ ? double(resent - m_resent_) / double(sent - m_sent_) : 0;
  now.rtt_ratio = s.base_rtt_us ? double(s.srtt_us) / double(s.base_rtt_us) : 0;
  last_ = now;
  bool grow = now.resent >= kMinResent && now.rtt_ratio <= kMaxRttRatio;
  if (grow && have_prev_ && now.conns <= prev_.conns) grow = false;  // nothing was added
  if (grow && have_prev_) {
    const double per_added = (now.rate - prev_.rate) / double(now.conns - prev_.conns);
    grow = per_added >= kMinGain * prev_.rate / double(prev_.conns);
  }
  const int cap = std::min(s.max, kMaxStreams);
  if (!grow || conns >= cap) {
    stopped_ = true;
    return 0;
  }
  prev_ = now;
  have_prev_ = true;
  measuring_ = false;
  phase_start_ = ms;
  return std::min(conns, cap - conns);
}

}  // namespace aesxfer::client
