// Turning `ceph` command words into the JSON a monitor expects, the way the
// ceph CLI does it: the mon's own command table (the answer to
// {"prefix": "get_command_descriptions"}) gives each command's signature:
// literal words, then typed parameters ({"name", "type", "n", "req",
// "strings", "range"}). The words on the command line are matched against
// every signature; the best match names the arguments:
//
//   osd pool create rbd 32   ->  {"prefix": "osd pool create", "pool": "rbd", "pg_num": 32}
//   mon dump -f json         ->  {"prefix": "mon dump", "format": "json"}
//
// Parameters may also be given by name: --pg_num 32, --pg-num=32, and a
// CephBool by its flag alone (--yes-i-really-mean-it). Types converted to
// JSON: CephInt (integer), CephFloat (number), CephBool (true/false),
// n = "N" (a list); everything else is a string.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace siphon::tools {

struct CommandSignature {
  struct Param {
    std::string name;
    std::string type;                  // CephString, CephInt, CephChoices, ...
    std::vector<std::string> choices;  // CephChoices
    bool required = true;
    bool many = false;                 // n = "N"
  };
  std::vector<std::string> words;      // the literal prefix
  std::vector<Param> params;
  std::string help;
  std::string module;
  unsigned flags = 0;
  bool is_mgr() const noexcept { return (flags & 8u) != 0; }  // MonCommand::FLAG_MGR
};

// Parses the mon's description table. Entries it cannot read are skipped.
std::vector<CommandSignature> parse_command_descriptions(const nlohmann::json& table);

struct MatchedCommand {
  const CommandSignature* sig = nullptr;
  nlohmann::ordered_json args;  // {"prefix": ..., params...}
};

// Matches `words` against `sigs`. On failure returns nullopt and sets
// `error` ("unknown command 'foo bar'", "invalid value 'x' for pg_num
// (CephInt)", "missing argument <pool>", ...).
std::optional<MatchedCommand> match_command(const std::vector<CommandSignature>& sigs,
                                            const std::vector<std::string>& words,
                                            std::string& error);

// Without a table: all words joined as the prefix (what a mon gets for a
// command it then validates itself).
nlohmann::ordered_json plain_command(const std::vector<std::string>& words);

// The signature as `ceph` prints it in usage: "osd pool create <pool> [<pg_num:int>] ...".
std::string usage(const CommandSignature& sig);

// Python's json.dumps() text (", " and ": " separators), as the ceph CLI sends.
std::string to_ceph_json(const nlohmann::ordered_json& j);

}  // namespace siphon::tools
