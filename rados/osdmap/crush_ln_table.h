// Ceph's crush_ln() lookup tables (data, generated into crush_ln_table.cc by
// gen_crush_ln_table.py from the tables extracted from Ceph 16.2.15).
#pragma once

#include <cstdint>

namespace siphon::osdmap {

// RH_LH[2k] ~ 2^48/(1+k/128), RH_LH[2k+1] ~ 2^48*log2(1+k/128), k = 0..128.
extern const std::int64_t kCrushRhLh[258];
// LL[k]: the low-order correction (not a formula; copied verbatim).
extern const std::int64_t kCrushLl[256];

}  // namespace siphon::osdmap
