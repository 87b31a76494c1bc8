// Reading RDMA device facts from a sysfs root (`/sys` of this host, or a
// captured tree in tests). One reader for every caller: siphon-doctor's
// device facts (tools/doctor/facts.*) and the Prometheus endpoint's NIC
// counters (msgr/metrics) read the same files with the same code, so the
// device the doctor checks and the device whose counters a scrape shows are
// chosen by the same rule (device_in_use: rdma::choose_device over the
// devices listed here).
//
// Nothing here fails: a missing or unreadable file is an unknown fact
// (nullopt or an empty list), never a guess.
#pragma once

#include <charconv>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace siphon::rdma::sysfs {

// The file's text without trailing newlines and blanks; nullopt when it
// cannot be read.
std::optional<std::string> read_text(const std::filesystem::path& p);

// A decimal number (the whole leading number of the file); nullopt when the
// file is missing or does not start with one.
template <typename T>
std::optional<T> read_number(const std::filesystem::path& p) {
  const auto t = read_text(p);
  if (!t) return std::nullopt;
  T v{};
  const auto [end, ec] = std::from_chars(t->data(), t->data() + t->size(), v);
  if (ec != std::errc() || end == t->data()) return std::nullopt;
  return v;
}

// A directory's entries, numeric names ("1".."1023") in numeric order and
// the rest in name order; empty when the directory is absent.
std::vector<std::string> entries(const std::filesystem::path& dir);

// True when the path exists (a dangling symbolic link counts).
bool present(const std::filesystem::path& p);

// The RDMA devices under <root>/class/infiniband, in entries() order.
std::vector<std::string> list_devices(const std::string& root);

// The device the RDMA stack uses: rdma::choose_device(configured, the
// devices listed under `root`). nullopt for none, and for the software
// fabric (a name starting with "soft": it has no sysfs counters).
std::optional<std::string> device_in_use(const std::string& root, std::string_view configured);

// One port counter file.
struct PortCounter {
  std::string group;  // "counters" (the IB PMA port counters) or "hw_counters" (the driver's)
  std::string name;   // the file name, e.g. port_xmit_data, rnr_nak_retry_err, np_cnp_sent
  std::uint64_t value = 0;
};

// Every readable numeric file of <root>/class/infiniband/<device>/ports/<port>/
// {counters,hw_counters}, in that order and in entries() order within each.
// A file that does not hold a number (unreadable, or a driver's text file)
// is left out. Drivers differ in which files they have (mlx5: both
// directories; rxe: hw_counters only).
std::vector<PortCounter> read_port_counters(const std::string& root, const std::string& device,
                                            unsigned port);

// The leading number of <root>/class/infiniband/<device>/ports/<port>/state
// ("4: ACTIVE" -> 4); nullopt when it cannot be read.
std::optional<unsigned> read_port_state(const std::string& root, const std::string& device, unsigned port);

}  // namespace siphon::rdma::sysfs
