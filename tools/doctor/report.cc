#include "tools/doctor/report.h"

#include <algorithm>

#include <fmt/format.h>

namespace siphon::doctor {
namespace {

int rank(Status s) {
  switch (s) {
    case Status::error: return 0;
    case Status::warning: return 1;
    case Status::cannot_tell: return 2;
    case Status::ok: return 3;
  }
  return 4;
}

std::string label(Status s) {
  switch (s) {
    case Status::error: return "ERROR  ";
    case Status::warning: return "WARN   ";
    case Status::cannot_tell: return "CAN'T  ";
    case Status::ok: return "OK     ";
  }
  return "?      ";
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += ch;
    }
  }
  return out + "\"";
}

}  // namespace

std::string render_text(const std::vector<Check>& checks, bool verbose) {
  std::vector<const Check*> order;
  for (const auto& c : checks) order.push_back(&c);
  std::stable_sort(order.begin(), order.end(),
                   [](const Check* a, const Check* b) { return rank(a->status) < rank(b->status); });
  std::string out;
  for (const Check* c : order) {
    out += fmt::format("{}{:<10} {}\n", label(c->status), c->name, c->summary);
    if (c->status == Status::ok && !verbose) continue;
    for (const auto& e : c->evidence) out += fmt::format("       {:<10}   {}\n", "", e);
    if (!c->fix.empty()) out += fmt::format("       {:<10} fix: {}\n", "", c->fix);
  }
  std::size_t errors = 0, warnings = 0;
  for (const auto& c : checks) {
    errors += c.status == Status::error;
    warnings += c.status == Status::warning;
  }
  out += fmt::format("siphon-doctor: {} error{}, {} warning{} ({} checks)\n", errors, errors == 1 ? "" : "s",
                     warnings, warnings == 1 ? "" : "s", checks.size());
  return out;
}

std::string render_json(const std::vector<Check>& checks) {
  std::size_t counts[4] = {};
  for (const auto& c : checks) ++counts[static_cast<int>(c.status)];
  std::string out = fmt::format(
      "{{\"schema\":\"siphon-doctor\",\"version\":1,\"status\":{},\"summary\":{{\"ok\":{},\"cannot_tell\":{},"
      "\"warning\":{},\"error\":{}}},\"checks\":[",
      exit_status(checks), counts[0], counts[1], counts[2], counts[3]);
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const Check& c = checks[i];
    out += fmt::format("{}{{\"name\":{},\"status\":{},\"summary\":{},\"evidence\":[", i == 0 ? "" : ",",
                       json_string(c.name), json_string(to_string(c.status)), json_string(c.summary));
    for (std::size_t j = 0; j < c.evidence.size(); ++j) out += (j == 0 ? "" : ",") + json_string(c.evidence[j]);
    out += fmt::format("],\"fix\":{}}}", json_string(c.fix));
  }
  return out + "]}\n";
}

}  // namespace siphon::doctor
