// siphon-ceph map-object: object placement computed locally from the
// OSDMap the mon sends (no mon command), printed as `ceph osd map` prints it.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "msgr/mon/mon_client.h"
#include "rados/osdmap/osdmap.h"
#include "rados/osdmap/placement.h"

namespace siphon::tools {

/// Subscribes to "osdmap" (one time, from epoch 0: the mon answers with its
/// newest full map) and waits up to `timeout` for it. Sets `error` and
/// returns nullopt on a timeout or a map that does not decode.
std::optional<osdmap::OsdMap> fetch_osdmap(mon::MonClient& mc, std::chrono::nanoseconds timeout,
                                           std::string& error);

/// `ceph osd map -f json`'s object for one placement, on one line:
/// {"epoch":..,"pool":..,"pool_id":..,"objname":..,"raw_pgid":..,"pgid":..,
///  "up":[..],"up_primary":..,"acting":[..],"acting_primary":..}
std::string osd_map_json(const osdmap::OsdMap& m, const std::string& pool,
                         const std::string& object, const std::string& nspace,
                         const osdmap::ObjectMapping& o);
/// Its plain form: "osdmap e21 pool 'rep3' (1) object 'foo' -> pg
/// 1.7fc1f406 (1.6) -> up ([2,3,0], p2) acting ([2,3,0], p2)".
std::string osd_map_plain(const osdmap::OsdMap& m, const std::string& pool,
                          const std::string& object, const std::string& nspace,
                          const osdmap::ObjectMapping& o);

/// The subcommand: words = {"map-object", POOL, OBJECT|-, ...} plus
/// [-N|--namespace NS]; format "" or "json" (one JSON object per line) or
/// "plain". Returns the exit status (2 = ENOENT for a missing pool, as ceph).
int map_object_command(mon::MonClient& mc, const std::vector<std::string>& words,
                       const std::string& format, std::chrono::nanoseconds timeout);

}  // namespace siphon::tools
