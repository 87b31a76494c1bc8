// A plugin that declares a stack plugin ABI version this Siphon does not
// speak (as a plugin built for a future or past Siphon would). The host must
// refuse it after reading abi_version alone: the other members here are
// deliberately unusable, so calling into them would crash the test.
#include "msgr/transport/stack_plugin.h"

namespace {

const siphon_stack_plugin kPlugin{SIPHON_STACK_PLUGIN_ABI_VERSION + 41,  // = 42 while the ABI is 1
                                  0, "wrongabi", "a plugin for another ABI version", nullptr, nullptr};

}  // namespace

SIPHON_STACK_PLUGIN_EXPORT const siphon_stack_plugin* siphon_stack_plugin_entry(void) { return &kPlugin; }
