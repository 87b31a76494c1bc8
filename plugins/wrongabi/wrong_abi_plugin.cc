// A plugin that declares a stack plugin ABI version this Siphon does not
// speak (as a plugin built for a future or past Siphon would). The host must
// refuse it after reading abi_version alone: the other members here are
// deliberately unusable, so calling into them would crash the test.
#include "msgr/transport/stack_plugin.h"

namespace {

// A fixed number, so the test can look for it in the refusal whatever the
// current version is.
static_assert(SIPHON_STACK_PLUGIN_ABI_VERSION != 42u);
const siphon_stack_plugin kPlugin{42u,
                                  0, "wrongabi", "a plugin for another ABI version", nullptr, nullptr};

}  // namespace

SIPHON_STACK_PLUGIN_EXPORT const siphon_stack_plugin* siphon_stack_plugin_entry(void) { return &kPlugin; }
