// siphon-doctor's output (docs/doctor.md): text for a person, one line per
// check with problems first, or one JSON document for automation.
#pragma once

#include <string>
#include <vector>

#include "tools/doctor/checks.h"

namespace siphon::doctor {

// Errors, then warnings, then cannot-tell, then OK; the order of run_checks
// within each. Evidence and the fix are indented under their check (with
// `verbose`, under OK checks too).
std::string render_text(const std::vector<Check>& checks, bool verbose);

// {"schema":"siphon-doctor","version":1,"status":N,"summary":{...},
//  "checks":[{"name","status","summary","evidence":[...],"fix"}]}
std::string render_json(const std::vector<Check>& checks);

}  // namespace siphon::doctor
