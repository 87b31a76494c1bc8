// Handle classes of the soft fabric shared between objects.cc and cm.cc.
// Not a public header.
#pragma once

#include <memory>

#include "rdma/soft/core.h"

namespace siphon::rdma::soft {

class CqImpl final : public CompletionQueue {
 public:
  CqImpl(std::shared_ptr<detail::Fabric> f, detail::DeviceCore& d, std::uint32_t gen,
         std::shared_ptr<detail::CqCore> core);
  ~CqImpl() override;
  std::size_t poll(std::span<Wc> out) noexcept override;
  std::error_code arm(bool solicited_only) noexcept override;
  int channel_fd() const noexcept override;
  std::size_t consume_events() noexcept override;
  std::uint32_t capacity() const noexcept override;
  int progress_fd() const noexcept override;
  void attach_progress(bool on, void (*kick)(void*), void* arg) noexcept override;
  bool progress(bool io, bool before_sleep) noexcept override;
  detail::DeviceCore& device() const noexcept { return dev_; }
  std::uint32_t generation() const noexcept { return gen_; }  // DeviceCore::generation
  const std::shared_ptr<detail::CqCore>& core() const noexcept { return core_; }

 private:
  std::shared_ptr<detail::Fabric> fabric_;
  detail::DeviceCore& dev_;
  std::uint32_t gen_;
  std::shared_ptr<detail::CqCore> core_;
};

// A type-2 memory window: its slot in the device's key table. The rkey is
// updated by QpImpl::post_send when a bind WR is taken.
class MwImpl final : public MemoryWindow {
 public:
  MwImpl(std::shared_ptr<detail::Fabric> f, detail::DeviceCore& d, std::uint32_t key);
  ~MwImpl() override;
  std::uint32_t rkey() const noexcept override { return rkey_.load(std::memory_order_relaxed); }
  void set_rkey(std::uint32_t k) noexcept { rkey_.store(k, std::memory_order_relaxed); }
  detail::DeviceCore& device() const noexcept { return dev_; }

 private:
  std::shared_ptr<detail::Fabric> fabric_;
  detail::DeviceCore& dev_;
  std::uint32_t index_;
  std::atomic<std::uint32_t> rkey_;
};

class QpImpl final : public QueuePair {
 public:
  QpImpl(std::shared_ptr<detail::Fabric> f, std::shared_ptr<detail::QpCore> core);
  ~QpImpl() override;
  std::uint32_t qp_num() const noexcept override;
  QpState state() const noexcept override;
  const QpCaps& caps() const noexcept override;
  std::error_code modify(const QpAttr& attr, std::uint32_t mask) noexcept override;
  std::error_code query_path(QpPath& out) const override;
  std::error_code post_send(std::span<const SendWr> wrs, std::size_t* bad) noexcept override;
  std::error_code post_recv(std::span<const RecvWr> wrs, std::size_t* bad) noexcept override;

 private:
  std::shared_ptr<detail::Fabric> fabric_;
  std::shared_ptr<detail::QpCore> core_;
};

// `gen` is the device generation of the PD (DeviceCore::generation): a QP
// is made only while it is current (else errc::device_not_found).
std::shared_ptr<detail::QpCore> create_qp_core(const std::shared_ptr<detail::Fabric>& fabric,
                                               detail::DeviceCore& dev, std::uint32_t pd,
                                               std::uint32_t gen, const QpInit& init,
                                               std::error_code& ec);
// The soft device, PD id and device generation behind `pd` (nullptr when it
// is not a soft PD).
detail::DeviceCore* device_of(ProtectionDomain& pd, std::uint32_t* pd_id, std::uint32_t* gen);
// A Device handle on `dev` made in generation `gen` (dead once the device
// is removed after that generation).
std::unique_ptr<Device> open_device_handle(std::shared_ptr<detail::Fabric> fabric,
                                           detail::DeviceCore& dev, std::uint32_t gen);
std::unique_ptr<EventChannel> make_event_channel(std::shared_ptr<detail::Fabric> fabric,
                                                 std::error_code& ec);

}  // namespace siphon::rdma::soft
