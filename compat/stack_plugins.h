// Stack plugins (docs/configuration.md, "Stack plugins"): `ms_type =
// async+<name>` for a name that is not built in loads
// libsiphon-stack-<name>.so from ms_stack_plugin_dir through the C entry
// point of msgr/transport/stack_plugin.h and registers it in the
// StackRegistry under <name>. A plugin is loaded once per process and never
// unloaded.
#pragma once

#include <string>

#include "compat/config.h"

namespace siphon::compat {

// The directory compiled in for an empty ms_stack_plugin_dir (the install
// libdir's siphon/ folder, e.g. /usr/local/lib/siphon).
std::string default_stack_plugin_dir();

// The directory searched: ms_stack_plugin_dir, or the default when empty.
std::string stack_plugin_dir(const Config& cfg);

// <dir>/libsiphon-stack-<name>.so
std::string stack_plugin_path(const std::string& dir, const std::string& name);

// Loads the plugin for `name` and registers it (a no-op when it already is).
// Throws SetupError (errc::config_error) naming the file and the cause: the
// file is missing (lists the directory searched and the built-in stacks),
// dlopen failed (its message), it has no entry point, it was built for
// another ABI version (its version and the expected one) or with other
// headers, or it names another stack.
void load_stack_plugin(const std::string& name, const Config& cfg);

}  // namespace siphon::compat
