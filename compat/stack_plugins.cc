#include "compat/stack_plugins.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <system_error>

#include "compat/factory.h"
#include "msgr/base/error.h"
#include "msgr/base/log.h"
#include "msgr/transport/stack_plugin.h"

#ifndef SIPHON_STACK_PLUGIN_DEFAULT_DIR
#define SIPHON_STACK_PLUGIN_DEFAULT_DIR "/usr/local/lib/siphon"
#endif

namespace siphon::compat {
namespace {

std::mutex g_load_mu;

// The stacks available without this plugin: the built-ins and any plugin
// already loaded.
std::string available_list() {
  std::string out;
  for (const auto& n : StackRegistry::instance().names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

[[noreturn]] void refuse(const std::string& cause, const std::string& remedy) {
  throw SetupError(errc::config_error, cause, remedy);
}

}  // namespace

std::string default_stack_plugin_dir() { return SIPHON_STACK_PLUGIN_DEFAULT_DIR; }

std::string stack_plugin_dir(const Config& cfg) {
  const std::string& d = cfg.get<Opt::ms_stack_plugin_dir>();
  return d.empty() ? default_stack_plugin_dir() : d;
}

std::string stack_plugin_path(const std::string& dir, const std::string& name) {
  return (std::filesystem::path(dir) / fmt::format("libsiphon-stack-{}.so", name)).string();
}

void load_stack_plugin(const std::string& name, const Config& cfg) {
  std::lock_guard lk(g_load_mu);
  auto& reg = StackRegistry::instance();
  for (const auto& n : reg.names())
    if (n == "async+" + name) return;

  const std::string dir = stack_plugin_dir(cfg);
  const std::string path = stack_plugin_path(dir, name);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    refuse(fmt::format("ms_type async+{}: no stack plugin {} in {} (ms_stack_plugin_dir{})", name,
                       std::filesystem::path(path).filename().string(), dir,
                       cfg.get<Opt::ms_stack_plugin_dir>().empty() ? " is empty: the default directory" : ""),
           fmt::format("stacks available: {}; install the plugin there or set ms_stack_plugin_dir to its "
                       "directory",
                       available_list()));

  // RTLD_LOCAL: the plugin's symbols stay its own. The handle is never
  // closed (its stacks may live until exit).
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = ::dlerror();
    refuse(fmt::format("stack plugin {} cannot be loaded: {}", path, why != nullptr ? why : "unknown dlopen error"),
           "check that the file is a shared library built for this machine and that its dependencies "
           "are installed (ldd shows missing ones)");
  }
  ::dlerror();
  void* sym = ::dlsym(handle, SIPHON_STACK_PLUGIN_ENTRY);
  if (sym == nullptr) {
    ::dlclose(handle);
    refuse(fmt::format("{} is not a Siphon stack plugin: it has no {} symbol", path, SIPHON_STACK_PLUGIN_ENTRY),
           "build it against msgr/transport/stack_plugin.h and export the entry point with "
           "SIPHON_STACK_PLUGIN_EXPORT");
  }
  siphon_stack_plugin_entry_fn entry = nullptr;
  static_assert(sizeof(entry) == sizeof(sym));
  std::memcpy(&entry, &sym, sizeof(entry));
  const siphon_stack_plugin* p = entry();
  if (p == nullptr) {
    ::dlclose(handle);
    refuse(fmt::format("stack plugin {}: its entry point returned no descriptor", path),
           "the plugin is broken; rebuild it");
  }
  // Only abi_version may be read before it is checked.
  if (p->abi_version != SIPHON_STACK_PLUGIN_ABI_VERSION) {
    const std::uint32_t theirs = p->abi_version;
    ::dlclose(handle);
    refuse(fmt::format("stack plugin {} was built for stack plugin ABI version {}; this Siphon expects "
                       "version {}",
                       path, theirs, SIPHON_STACK_PLUGIN_ABI_VERSION),
           "rebuild the plugin against this Siphon's msgr/transport/stack_plugin.h (or use a Siphon of "
           "its version)");
  }
  if (p->options_size != sizeof(transport::TcpOptions)) {
    const std::uint32_t theirs = p->options_size;
    ::dlclose(handle);
    refuse(fmt::format("stack plugin {} was built with other Siphon headers (TcpOptions is {} bytes "
                       "there, {} here)",
                       path, theirs, sizeof(transport::TcpOptions)),
           "rebuild the plugin from the same Siphon source and compiler as this program");
  }
  if (p->name == nullptr || name != p->name || p->create == nullptr || p->destroy == nullptr) {
    const std::string theirs = p->name != nullptr ? p->name : "(none)";
    ::dlclose(handle);
    refuse(fmt::format("stack plugin {} provides stack '{}' (or lacks create/destroy), not '{}'", path, theirs,
                       name),
           fmt::format("rename the file to libsiphon-stack-{}.so or fix the plugin's descriptor", theirs));
  }
  SIPHON_LOG(compat, 1, "loaded stack plugin async+{} from {}: {}", name, path,
             p->description != nullptr ? p->description : "");

  reg.add(name, [p, path](const Config& c) -> std::shared_ptr<transport::Stack> {
    const transport::TcpOptions opts = tcp_options(c);
    const std::string entity = c.name().to_string();
    siphon_stack_plugin_args args{};
    args.abi_version = SIPHON_STACK_PLUGIN_ABI_VERSION;
    args.options = &opts;
    args.entity_name = entity.c_str();
    std::array<char, 512> err{};
    transport::Stack* s = p->create(&args, err.data(), err.size());
    if (s == nullptr) {
      err.back() = '\0';
      throw SetupError(errc::config_error,
                       fmt::format("stack plugin {} could not create a stack: {}", path,
                                   err[0] != '\0' ? err.data() : "no reason given"),
                       "see the plugin's documentation for the options it needs");
    }
    auto destroy = p->destroy;
    return std::shared_ptr<transport::Stack>(s, [destroy](transport::Stack* x) { destroy(x); });
  });
}

}  // namespace siphon::compat
