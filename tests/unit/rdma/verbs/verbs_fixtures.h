// Captured (and documented) device data for the verbs provider's
// device-free tests: see data/README.md.
#pragma once

#include <string>
#include <vector>

#include "rdma/provider.h"

namespace siphon::rdma::verbs::testing {

struct DeviceSample {
  std::string name;  // hca_id
  PortAttr port;     // port 1
  std::vector<GidEntry> gids;
};

// Loads data/<file>; fails the calling test (ADD_FAILURE) when it cannot.
DeviceSample load_sample(const std::string& file);

// A Device over a sample, for resolve_path (any provider's Device works).
class SampleDevice final : public Device {
 public:
  explicit SampleDevice(DeviceSample s);
  const DeviceAttr& attr() const noexcept override { return attr_; }
  std::error_code query_port(std::uint8_t port, PortAttr& out) const override;
  std::error_code query_gids(std::uint8_t port, std::vector<GidEntry>& out) const override;
  std::unique_ptr<ProtectionDomain> alloc_pd(std::error_code& ec) override;
  std::unique_ptr<CompletionQueue> create_cq(std::uint32_t cqe, std::error_code& ec) override;

 private:
  DeviceSample sample_;
  DeviceAttr attr_;
};

}  // namespace siphon::rdma::verbs::testing
