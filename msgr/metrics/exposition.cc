// Rendering the exposition (exposition.h). Samples are gathered into
// families first and written afterwards, so each family's HELP and TYPE
// appear once and its samples are contiguous even when several loggers (one
// per worker, or a labeled logger's instances) feed the same name -- the
// rule promtool enforces and Ceph 16.2.15's mgr module breaks.
#include "msgr/metrics/exposition.h"

#include <fmt/format.h>

#include <cctype>
#include <map>
#include <set>
#include <utility>

namespace siphon::metrics {
namespace {

struct Family {
  std::string type;  // counter, gauge
  std::string help;
  std::vector<std::pair<std::string, std::string>> samples;  // label text, value text
  std::set<std::string> label_sets;                          // a series appears once
};

class Families {
 public:
  void add(const std::string& name, std::string_view type, std::string_view help, const std::string& labels,
           std::string value) {
    auto [it, fresh] = families_.try_emplace(name);
    Family& f = it->second;
    if (fresh) {
      f.type = std::string(type);
      f.help = std::string(help);
    } else if (f.type != type) {
      return;  // two sources mapped to one name with different types: the first wins
    }
    if (!f.label_sets.insert(labels).second) return;  // the same series twice: the first wins
    f.samples.emplace_back(labels, std::move(value));
  }

  std::string text() const {
    std::string out;
    for (const auto& [name, f] : families_) {
      out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, escape_help(f.help), name, f.type);
      for (const auto& [labels, value] : f.samples) out += fmt::format("{}{} {}\n", name, labels, value);
    }
    return out;
  }

 private:
  std::map<std::string, Family> families_;  // sorted by name, as ceph-exporter sorts
};

std::string labels_text(const std::vector<std::pair<std::string, std::string>>& labels) {
  if (labels.empty()) return {};
  std::string out = "{";
  for (std::size_t i = 0; i < labels.size(); ++i)
    out += fmt::format("{}{}=\"{}\"", i ? "," : "", labels[i].first, escape_label_value(labels[i].second));
  return out + "}";
}

// ns -> "<sec>.<9 digits>", exact (no rounding through a double).
std::string seconds(std::uint64_t ns) { return fmt::format("{}.{:09}", ns / 1000000000u, ns % 1000000000u); }

void add_counter(Families& fams, const perf::Logger& l, const perf::CounterInfo& info, const perf::Value& v,
                 const std::string& daemon) {
  if (info.type & perf::kHistogram) return;
  std::vector<std::pair<std::string, std::string>> labels{{"ceph_daemon", daemon}};
  for (const auto& [k, val] : l.labels()) {
    std::string n = label_name(k);
    bool dup = false;
    for (const auto& e : labels) dup = dup || e.first == n;
    if (!dup) labels.emplace_back(std::move(n), val);
  }
  const std::string lt = labels_text(labels);
  const std::string name = "ceph_" + promethize(l.name() + "_" + info.name);
  const bool time = info.type & perf::kTime;
  const std::string desc = info.description.empty() ? l.name() + "." + info.name : info.description;
  if (info.type & perf::kLongRunAvg) {
    // Two counter families, as the mgr module writes them (ceph-exporter
    // declares _sum with the schema's metric_type, gauge; both only grow, so
    // counter is the type rate() is right for).
    fams.add(name + "_sum", "counter", desc + " Total", lt, time ? seconds(v.u64) : fmt::format("{}", v.u64));
    fams.add(name + "_count", "counter", desc + " Count", lt, fmt::format("{}", v.count));
    return;
  }
  fams.add(name, info.metric_type(), desc, lt, time ? seconds(v.u64) : fmt::format("{}", v.u64));
}

// The NIC's sysfs counters: ceph_rdma_port_<file>_total (counters/, the IB
// port counters, a leading "port_" dropped; the data counters are in 4-byte
// words and are shown in bytes) and ceph_rdma_hw_<file>_total (hw_counters/,
// the driver's).
void add_nic(Families& fams, const ExpositionOptions& o) {
  if (!o.nic_reader) return;
  for (const auto& p : o.nic_ports) {
    const std::string lt =
        labels_text({{"ceph_daemon", o.daemon}, {"device", p.device}, {"port", std::to_string(p.port)}});
    const NicReading r = o.nic_reader(p);
    fams.add("ceph_rdma_port_sysfs_files", "gauge",
             "Counter files read from the port's sysfs counters/ and hw_counters/ (0: the device or port is "
             "not there)",
             lt, fmt::format("{}", r.counters.size()));
    if (r.state)
      fams.add("ceph_rdma_port_state", "gauge", "The port's state (sysfs state: 4 = ACTIVE)", lt,
               fmt::format("{}", *r.state));
    for (const auto& c : r.counters) {
      if (c.group == "counters") {
        // port_xmit_packets -> ceph_rdma_port_xmit_packets_total.
        const std::string base =
            "ceph_rdma_port_" + promethize(c.name.rfind("port_", 0) == 0 ? c.name.substr(5) : c.name);
        if (c.name == "port_xmit_data" || c.name == "port_rcv_data") {
          fams.add(base + "_bytes_total", "counter",
                   fmt::format("sysfs counters/{} in bytes (the file counts 4-byte words)", c.name), lt,
                   fmt::format("{}", c.value * 4));
        } else {
          fams.add(base + "_total", "counter", fmt::format("sysfs counters/{}", c.name), lt,
                   fmt::format("{}", c.value));
        }
      } else if (c.name != "lifespan") {  // mlx5's refresh interval in ms, not a counter
        fams.add("ceph_rdma_hw_" + promethize(c.name) + "_total", "counter",
                 fmt::format("sysfs hw_counters/{}", c.name), lt, fmt::format("{}", c.value));
      }
    }
  }
}

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }

}  // namespace

std::string promethize(std::string_view path) {
  std::string out;
  for (std::size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (c == ':' && i + 1 < path.size() && path[i + 1] == ':') {
      out += '_';
      ++i;
    } else if (c == '.' || c == '/' || std::isspace(static_cast<unsigned char>(c))) {
      out += '_';
    } else if (c == '+') {
      out += "_plus";
    } else if (c == '-') {
      out += i + 1 == path.size() ? "_minus" : "_";
    } else {
      out += name_char(c) ? c : '_';
    }
  }
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out.insert(out.begin(), '_');
  return out;
}

std::string label_name(std::string_view name) {
  std::string out;
  for (char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])) || out.rfind("__", 0) == 0)
    out.insert(out.begin(), 'l');
  return out;
}

std::string escape_label_value(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string escape_help(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string daemon_label(std::string_view entity_name) {
  if (entity_name.rfind("ceph-", 0) == 0) entity_name.remove_prefix(5);
  if (entity_name.rfind("client.", 0) == 0) entity_name.remove_prefix(7);
  return std::string(entity_name);
}

bool is_messenger_logger(std::string_view n) {
  return n.rfind("AsyncMessenger::", 0) == 0 || n.rfind("Siphon::", 0) == 0 || n.rfind("siphon-messenger-", 0) == 0;
}

std::string render(const perf::Collection& c, const ExpositionOptions& o) {
  Families fams;
  perf::DumpFilter f;
  f.min_priority = std::min(o.prio_limit, o.msgr_prio_limit);
  c.visit(f, [&](const perf::Logger& l, const perf::CounterInfo& info, const perf::Value& v) {
    const int limit = is_messenger_logger(l.name()) ? o.msgr_prio_limit : o.prio_limit;
    if (info.priority < limit) return;
    add_counter(fams, l, info, v, o.daemon);
  });
  add_nic(fams, o);
  return fams.text();
}

}  // namespace siphon::metrics
