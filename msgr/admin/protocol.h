// Internals of the admin socket shared by its sources and tests: the JSON
// form of a signature (get_command_descriptions) and argument validation.
#pragma once

#include <nlohmann/json.hpp>

#include "msgr/admin/admin_socket.h"

namespace siphon::admin {

// ["perf", "dump", {"name": "logger", "req": "false", "type": "CephString"}, ...]
nlohmann::json signature_json(const Signature& s);
// Ceph's validate_cmd: every required argument present, every present one of
// its declared type. False means "invalid command json".
bool validate(const Signature& s, const nlohmann::json& cmd);

}  // namespace siphon::admin
