// The shared sysfs reader (sysfs.h).
#include "rdma/provider/sysfs.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

#include "rdma/provider.h"

namespace siphon::rdma::sysfs {

namespace fs = std::filesystem;

std::optional<std::string> read_text(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  std::string s = ss.str();
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  return s;
}

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    // Numeric order for "0".."1023", name order otherwise.
    if (!a.empty() && !b.empty() && std::isdigit(static_cast<unsigned char>(a[0])) &&
        std::isdigit(static_cast<unsigned char>(b[0])) && a.size() != b.size())
      return a.size() < b.size();
    return a < b;
  });
  return out;
}

bool present(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec)) && !ec;
}

std::vector<std::string> list_devices(const std::string& root) {
  return entries(fs::path(root) / "class" / "infiniband");
}

std::optional<std::string> device_in_use(const std::string& root, std::string_view configured) {
  if (configured.rfind("soft", 0) == 0) return std::nullopt;
  const auto names = list_devices(root);
  return choose_device(configured, names);
}

namespace {
// A device name from the configuration must not walk out of the tree.
bool safe_name(const std::string& device) {
  return !device.empty() && device.find('/') == std::string::npos && device != "." && device != "..";
}
}  // namespace

std::optional<unsigned> read_port_state(const std::string& root, const std::string& device, unsigned port) {
  if (!safe_name(device)) return std::nullopt;
  return read_number<unsigned>(fs::path(root) / "class" / "infiniband" / device / "ports" / std::to_string(port) /
                               "state");
}

std::vector<PortCounter> read_port_counters(const std::string& root, const std::string& device,
                                            unsigned port) {
  std::vector<PortCounter> out;
  if (!safe_name(device)) return out;
  const fs::path dir = fs::path(root) / "class" / "infiniband" / device / "ports" / std::to_string(port);
  for (const char* group : {"counters", "hw_counters"}) {
    for (const auto& name : entries(dir / group)) {
      const auto v = read_number<std::uint64_t>(dir / group / name);
      if (v) out.push_back({group, name, *v});
    }
  }
  return out;
}

}  // namespace siphon::rdma::sysfs
