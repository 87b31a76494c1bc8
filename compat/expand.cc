#include "compat/expand.h"

#include <unistd.h>

#include <fmt/format.h>

namespace siphon::compat {
namespace {

constexpr std::string_view kVarChars = "abcdefghijklmnopqrstuvwxyz_";

class Expander {
 public:
  Expander(const MetaVariables& vars, const OptionResolver& resolve, std::vector<std::string>* warnings)
      : vars_(vars), resolve_(resolve), warnings_(warnings) {}

  // The structure follows Ceph's so that the results (loops included) are
  // the same: a value's option is pushed when its expansion starts and popped
  // when it ends normally; a loop returns early without popping.
  std::string expand(std::string_view str, std::string_view self) {
    auto pos = str.find('$');
    if (pos == std::string_view::npos) return std::string(str);
    if (!self.empty()) stack_.emplace_back(self);
    std::string out;
    std::size_t last = 0;
    while (pos != std::string_view::npos) {
      if (pos > last) out += str.substr(last, pos - last);
      std::string var;
      std::size_t end = 0;
      if (pos + 1 < str.size() && str[pos + 1] == '{') {
        end = str.find_first_not_of(kVarChars, pos + 2);
        if (end != std::string_view::npos && str[end] == '}') {
          var = std::string(str.substr(pos + 2, end - pos - 2));
          ++end;
        }
      } else {
        end = str.find_first_not_of(kVarChars, pos + 1);
        var = std::string(end != std::string_view::npos ? str.substr(pos + 1, end - pos - 1)
                                                        : str.substr(pos + 1));
      }
      last = end;
      if (var.empty()) {
        out += '$';
      } else if (var == "type") {
        out += vars_.type;
      } else if (var == "cluster") {
        out += vars_.cluster;
      } else if (var == "name") {
        out += vars_.name;
      } else if (var == "host") {
        out += vars_.host;
      } else if (var == "id" || var == "num") {
        out += vars_.id;
      } else if (var == "pid") {
        out += vars_.pid;
      } else if (var == "home") {
        out += vars_.home;
      } else if (const auto ref = resolve_(var); !ref) {
        out += str.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
      } else if (on_stack(var)) {
        if (warnings_ != nullptr) {
          std::string chain;
          for (const auto& s : stack_) chain += s + " -> ";
          warnings_->push_back(fmt::format("variable expansion loop ({}{}): '${}' left unexpanded, as "
                                           "Ceph does", chain, var, var));
        }
        return "$" + var;
      } else if (ref->is_string) {
        out += expand(ref->value, var);
      } else {
        out += ref->value;
      }
      pos = last == std::string_view::npos ? last : str.find('$', last);
    }
    if (last != std::string_view::npos) out += str.substr(last);
    if (!self.empty() && !stack_.empty()) stack_.pop_back();
    return out;
  }

 private:
  bool on_stack(std::string_view name) const {
    for (const auto& s : stack_)
      if (s == name) return true;
    return false;
  }

  const MetaVariables& vars_;
  const OptionResolver& resolve_;
  std::vector<std::string>* warnings_;
  std::vector<std::string> stack_;
};

}  // namespace

std::string expand_meta(std::string_view value, const MetaVariables& vars, const OptionResolver& resolve,
                        std::string_view self, std::vector<std::string>* warnings) {
  return Expander(vars, resolve, warnings).expand(value, self);
}

std::string short_hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "";
  std::string h(buf);
  return h.substr(0, h.find('.'));
}

}  // namespace siphon::compat
