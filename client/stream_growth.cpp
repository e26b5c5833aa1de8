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
    m_min_srtt_ = s.srtt_us;
    return 0;
  }
  if (s.srtt_us && (m_min_srtt_ == 0 || s.srtt_us < m_min_srtt_)) m_min_srtt_ = s.srtt_us;
  if (ms - m_ms_ < kMeasureMs) return 0;
  Phase now;
  now.conns = conns;
  now.rate = double(acked - m_acked_) * 1000.0 / double(ms - m_ms_);
  now.resent = sent > m_sent_ ? double(resent - m_resent_) / double(sent - m_sent_) : 0;
  now.rtt_ratio = s.base_rtt_us ? double(m_min_srtt_) / double(s.base_rtt_us) : 0;
  const int cap = std::min(s.max, kMaxStreams);
  if (now.resent < kMinResent) {
    now.why = Stop::kLittleLoss;
  } else if (now.rtt_ratio > kMaxRttRatio) {
    now.why = Stop::kQueue;
  } else if (have_prev_ && (now.conns <= prev_.conns ||  // nothing was added, or too little came of it
                            (now.rate - prev_.rate) / double(now.conns - prev_.conns) <
                                kMinGain * prev_.rate / double(prev_.conns))) {
    now.why = Stop::kNoGain;
  } else if (conns >= cap) {
    now.why = Stop::kCap;
  }
  last_ = now;
  if (now.why != Stop::kNone) {
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
