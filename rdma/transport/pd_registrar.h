// The RDMA stack's registrar of pool memory on its protection domain (internal).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "rdma/provider.h"
#include "rdma/transport/buffer_pool.h"

namespace siphon::rdma {

// Registers pool slabs and transfer regions on the stack's PD.
class PdRegistrar final : public Registrar {
 public:
  PdRegistrar(ProtectionDomain& pd, std::uint32_t access) noexcept : pd_(&pd), access_(access) {}
  std::error_code register_region(void* addr, std::size_t len, RegionKeys& keys) override;
  void deregister_region(const RegionKeys& keys) noexcept override;
  // Regions registered and not yet deregistered.
  std::size_t region_count() const;
  // The PD to register on: nullptr while the device is gone (registration
  // then fails with device_not_found), a new one when it is reopened. Every
  // region of the old PD must have been deregistered first.
  void set_pd(ProtectionDomain* pd) noexcept;

 private:
  ProtectionDomain* pd_;  // guarded by mu_
  std::uint32_t access_;
  mutable std::mutex mu_;
  std::unordered_map<std::uint64_t, std::unique_ptr<MemoryRegion>> mrs_;
  std::uint64_t next_id_ = 1;
};

}  // namespace siphon::rdma
