#include "rdma/transport/pd_registrar.h"

#include "msgr/base/error.h"

namespace siphon::rdma {

// Registration holds the mutex (the PD may be swapped by set_pd); only pool
// slabs come here, off the data path.
std::error_code PdRegistrar::register_region(void* addr, std::size_t len, RegionKeys& keys) {
  std::lock_guard lk(mu_);
  if (pd_ == nullptr) return make_error_code(errc::device_not_found);
  std::error_code ec;
  auto mr = pd_->reg_mr(addr, len, access_, ec);
  if (!mr) return ec ? ec : make_error_code(errc::memory_registration_failed);
  keys.lkey = mr->lkey();
  keys.rkey = mr->rkey();
  keys.region_id = next_id_++;
  mrs_.emplace(keys.region_id, std::move(mr));
  return {};
}

void PdRegistrar::deregister_region(const RegionKeys& keys) noexcept {
  std::lock_guard lk(mu_);
  mrs_.erase(keys.region_id);
}

void PdRegistrar::set_pd(ProtectionDomain* pd) noexcept {
  std::lock_guard lk(mu_);
  pd_ = pd;
}

std::size_t PdRegistrar::region_count() const {
  std::lock_guard lk(mu_);
  return mrs_.size();
}

}  // namespace siphon::rdma
