// docs/configuration.md, generated from the option schema (options.def) and
// the parsing rules written next to the code that implements them.
// `siphon-conf --dump-schema-markdown` prints it; the ctest
// configuration_doc_in_sync fails when the committed file differs.
#pragma once

#include <string>

namespace siphon::compat {

std::string schema_markdown();

}  // namespace siphon::compat
