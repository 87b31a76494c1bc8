#include "map_object.h"

#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <memory>
#include <mutex>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "rados/osdmap/mosdmap.h"

namespace siphon::tools {

std::optional<osdmap::OsdMap> fetch_osdmap(mon::MonClient& mc, std::chrono::nanoseconds timeout,
                                           std::string& error) {
  struct Shared {
    std::mutex m;
    std::condition_variable cv;
    std::optional<osdmap::OsdMap> map;
    std::string error;
  };
  auto shared = std::make_shared<Shared>();  // the handler may outlive this frame
  mc.set_other_message_handler([shared](const Message& msg) {
    if (msg.get_type() != osdmap::kMsgOsdMap) return;
    std::string err;
    std::optional<osdmap::OsdMap> got;
    auto mm = osdmap::decode_mosdmap(msg.front());
    if (!mm) {
      err = "the mon's MOSDMap does not decode: " + mm.error().message();
    } else if (mm->maps.empty()) {
      err = "the mon's MOSDMap carries no full map";
    } else {
      // The newest full map (a subscription from 0 gets exactly one).
      auto full = osdmap::decode_osdmap(mm->maps.rbegin()->second);
      if (full) got = std::move(*full);
      else err = fmt::format("OSDMap epoch {} does not decode: {}", mm->maps.rbegin()->first,
                             full.error().message());
    }
    std::lock_guard l(shared->m);
    if (shared->map) return;  // the first good map wins
    if (got) shared->map = std::move(got);
    else shared->error = err;
    shared->cv.notify_all();
  });
  mc.subscribe("osdmap", 0, mon::MMonSubscribe::kOneTime);
  std::unique_lock l(shared->m);
  const bool done = shared->cv.wait_for(
      l, timeout, [&] { return shared->map.has_value() || !shared->error.empty(); });
  if (!done) {
    error = "no OSDMap from the monitor within the timeout (--timeout SEC)";
    return std::nullopt;
  }
  if (!shared->map) {
    error = shared->error;
    return std::nullopt;
  }
  return std::move(shared->map);
}

namespace {

std::string objname(const std::string& object, const std::string& nspace) {
  return nspace.empty() ? object : nspace + "/" + object;
}

std::string set_text(const std::vector<std::int32_t>& v) {
  return fmt::format("[{}]", fmt::join(v, ","));
}

}  // namespace

std::string osd_map_json(const osdmap::OsdMap& m, const std::string& pool,
                         const std::string& object, const std::string& nspace,
                         const osdmap::ObjectMapping& o) {
  nlohmann::ordered_json j;
  j["epoch"] = m.epoch;
  j["pool"] = pool;
  j["pool_id"] = o.pool_id;
  j["objname"] = objname(object, nspace);
  j["raw_pgid"] = o.raw_pg.to_string();
  j["pgid"] = o.pg.pg.to_string();
  j["up"] = o.pg.up;
  j["up_primary"] = o.pg.up_primary;
  j["acting"] = o.pg.acting;
  j["acting_primary"] = o.pg.acting_primary;
  // Names are bytes to Ceph; invalid UTF-8 is replaced rather than thrown on.
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string osd_map_plain(const osdmap::OsdMap& m, const std::string& pool,
                          const std::string& object, const std::string& nspace,
                          const osdmap::ObjectMapping& o) {
  return fmt::format("osdmap e{} pool '{}' ({}) object '{}' -> pg {} ({}) -> up ({}, p{}) acting ({}, p{})",
                     m.epoch, pool, o.pool_id, objname(object, nspace), o.raw_pg.to_string(),
                     o.pg.pg.to_string(), set_text(o.pg.up), o.pg.up_primary,
                     set_text(o.pg.acting), o.pg.acting_primary);
}

int map_object_command(mon::MonClient& mc, const std::vector<std::string>& words,
                       const std::string& format, std::chrono::nanoseconds timeout) {
  std::string nspace;
  std::vector<std::string> args;
  for (std::size_t i = 1; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w == "-N" || w == "--namespace" || w == "--nspace") {
      if (i + 1 >= words.size()) {
        std::fprintf(stderr, "siphon-ceph: %s needs a value\n", w.c_str());
        return 22;
      }
      nspace = words[++i];
    } else {
      args.push_back(w);
    }
  }
  if (args.size() < 2) {
    std::fputs("siphon-ceph: usage: map-object POOL OBJECT... ('-' reads names from stdin, one a line)"
               " [-N NAMESPACE]\n", stderr);
    return 22;
  }
  if (!format.empty() && format != "json" && format != "plain") {
    std::fprintf(stderr, "siphon-ceph: map-object prints json (one object a line) or plain, not %s\n",
                 format.c_str());
    return 22;
  }
  std::string error;
  const auto map = fetch_osdmap(mc, timeout, error);
  if (!map) {
    std::fprintf(stderr, "siphon-ceph: %s\n", error.c_str());
    return 110;
  }
  const std::string& pool = args[0];
  const std::int64_t pool_id = map->lookup_pool(pool);
  if (pool_id < 0) {
    std::fprintf(stderr, "Error ENOENT: pool %s does not exist\n", pool.c_str());
    return 2;
  }
  const bool plain = format == "plain";
  int crush_failures = 0;
  auto print = [&](const std::string& object) {
    const auto o = osdmap::map_object(*map, pool_id, object, nspace);
    if (!o) return;  // the pool was looked up above
    if (o->pg.crush_gave_up) ++crush_failures;
    const std::string line = plain ? osd_map_plain(*map, pool, object, nspace, *o)
                                   : osd_map_json(*map, pool, object, nspace, *o);
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
  };
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] != "-") {
      print(args[i]);
      continue;
    }
    std::string line;
    while (std::getline(std::cin, line)) print(line);
  }
  std::fflush(stdout);
  if (crush_failures) {
    std::fprintf(stderr,
                 "siphon-ceph: the CRUSH map of epoch %u needed unbounded work for %d object(s) "
                 "(a corrupt rule or tunable); their sets are empty\n",
                 map->epoch, crush_failures);
    return 5;
  }
  return 0;
}

}  // namespace siphon::tools
