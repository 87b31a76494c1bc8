// The stack plugin ABI (docs/configuration.md, "Stack plugins"): a shared
// library libsiphon-stack-<name>.so that provides the stack selected by
// `ms_type = async+<name>` when <name> is not a built-in stack.
//
// A plugin exports one C symbol,
//
//   extern "C" const siphon_stack_plugin* siphon_stack_plugin_entry(void);
//
// returning a static descriptor. The host (compat/stack_plugins.cc) reads
// the descriptor's first member, abi_version, and nothing else unless it
// equals SIPHON_STACK_PLUGIN_ABI_VERSION: that member is frozen for every
// future version, so a plugin built for another version is refused with its
// version and the expected one, never called.
//
// The create function receives the typed transport options the host read
// from its configuration (nothing here reads ceph.conf) and returns a transport::Stack the host owns until it
// calls destroy. Because the stack is a C++ object, the ABI version also
// covers transport.h, options.h and the compiler: bump it whenever either
// header changes layout, and build plugins with the compiler and flags of the
// host. options_size (sizeof(TcpOptions) as the plugin saw it) catches the
// most common mistake, headers from another Siphon build.
//
// A plugin links what it needs (normally siphon_transport) statically, with
// its own symbols hidden, and exports only the entry point. It is loaded
// once per process and never unloaded (stacks and their threads may live
// until exit).
#pragma once

#include <cstddef>
#include <cstdint>

#include "msgr/transport/options.h"
#include "msgr/transport/transport.h"

// 1: the first version (Siphon 0.1).
// 2: transport::Stack gained send_queue_marks() (a new virtual: the vtable of
//    a version-1 plugin's stack lacks it, while TcpOptions kept its size, so
//    only the version number can tell the two apart).
#define SIPHON_STACK_PLUGIN_ABI_VERSION 2u

// The symbol the host looks up with dlsym().
#define SIPHON_STACK_PLUGIN_ENTRY "siphon_stack_plugin_entry"

extern "C" {

// What the host passes to create().
struct siphon_stack_plugin_args {
  std::uint32_t abi_version;                       // the host's SIPHON_STACK_PLUGIN_ABI_VERSION
  const siphon::transport::TcpOptions* options;    // threads, frame limits, injection, TCP settings
  const char* entity_name;                         // e.g. "osd.3"
};

struct siphon_stack_plugin {
  std::uint32_t abi_version;   // frozen as the first member: SIPHON_STACK_PLUGIN_ABI_VERSION
  std::uint32_t options_size;  // sizeof(siphon::transport::TcpOptions) when the plugin was built
  const char* name;            // the <name> of async+<name>; must match the file name
  const char* description;     // one line for logs and error messages
  // Creates the stack (not started). On failure returns null and writes one
  // sentence naming the cause into err (NUL-terminated, at most err_len).
  siphon::transport::Stack* (*create)(const siphon_stack_plugin_args* args, char* err, std::size_t err_len);
  // Destroys a stack create() returned (after the host stopped using it).
  void (*destroy)(siphon::transport::Stack* stack);
};

typedef const siphon_stack_plugin* (*siphon_stack_plugin_entry_fn)(void);

}  // extern "C"

#define SIPHON_STACK_PLUGIN_EXPORT extern "C" __attribute__((visibility("default")))
