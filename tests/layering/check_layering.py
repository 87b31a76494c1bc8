#!/usr/bin/env python3
"""Checks the layering of docs/architecture.md §1 over the sources and the
CMake link graph.

  check_layering.py SOURCE_ROOT [LINK_GRAPH_FILE]

Every file under a layer's paths may include project headers only from its
own layer and the layers below it; rdma-core headers (<infiniband/...>,
<rdma/...>) only in rdma/verbs. LINK_GRAPH_FILE (written by CMake) lists
"target: dep;dep;..." for each layer target; every siphon_* dependency must be
allowed by the same table. Exits 1 and lists each violation."""
import os
import re
import sys

# layer -> (paths it owns, layers it may use directly). Order: bottom-up.
LAYERS = {
    "siphon_base": (["msgr/base"], []),
    # Perf counters (Ceph's model): any layer above base may register loggers.
    "siphon_perf": (["msgr/perf"], ["siphon_base"]),
    "siphon_proto": (["msgr/proto"], ["siphon_base"]),
    "siphon_transport": (["msgr/transport"], ["siphon_proto", "siphon_perf", "siphon_auth"]),
    # The session layer is pure (events in, actions out): it needs the codec,
    # not the transport; msgr/api drives both.
    # cephx and secure-mode crypto (OpenSSL); pure bytes in, bytes out.
    "siphon_auth": (["msgr/auth"], ["siphon_base", "siphon_proto"]),
    "siphon_session": (["msgr/session"], ["siphon_proto", "siphon_auth"]),
    "siphon_api": (["msgr/api"], ["siphon_session", "siphon_transport"]),
    # The admin socket: Ceph's wire format, the command registry, the
    # standard commands (messenger dump needs the API).
    "siphon_admin": (["msgr/admin"], ["siphon_api", "siphon_perf"]),
    "siphon_mon": (["msgr/mon"], ["siphon_api"]),
    # The client's OSDMap and placement: pure code over the codec.
    "siphon_osdmap": (["rados/osdmap"], ["siphon_proto"]),
    # The OSD client: ops to OSDs over a messenger, the mon client and the map.
    "siphon_rados_client": (["rados/client"], ["siphon_mon", "siphon_osdmap"]),
    "siphon_rdma_provider": (["rdma/provider.h", "rdma/provider"], ["siphon_base"]),
    "siphon_rdma_verbs": (["rdma/verbs"], ["siphon_rdma_provider"]),
    "siphon_rdma_soft": (["rdma/soft"], ["siphon_rdma_provider"]),
    "siphon_rdma_transport": (["rdma/transport"], ["siphon_rdma_provider", "siphon_transport"]),
    # The Prometheus endpoint: the perf counters' exposition and its HTTP
    # server (the NIC counters come through a reader compat wires).
    "siphon_metrics": (["msgr/metrics"], ["siphon_perf"]),
    "siphon_compat": (["compat"], ["siphon_api", "siphon_mon", "siphon_admin", "siphon_rdma_transport",
                                    "siphon_rdma_verbs", "siphon_rdma_soft", "siphon_metrics"]),
    "siphon_stack_plugins": (["plugins"], ["siphon_transport"]),
    "siphon_tools": (["tools"], ["siphon_compat", "siphon_mon", "siphon_osdmap", "siphon_rados_client",
                                 "siphon_rados_tool"]),
    # The RADOS tools' shared setup: configuration flags, mon session, OSD client.
    "siphon_rados_tool": (["tools/rados/cluster.h", "tools/rados/cluster.cc"],
                          ["siphon_rados_client", "siphon_compat"]),
    "siphon_objd_proto": (["tools/objd/proto.h", "tools/objd/proto.cc"], ["siphon_api"]),
    "siphon_objd_core": (["tools/objd/store.h", "tools/objd/store.cc", "tools/objd/server.h",
                          "tools/objd/server.cc"], ["siphon_objd_proto"]),
    "siphon_objd": (["tools/objd"], ["siphon_objd_core", "siphon_compat"]),
    # siphon-doctor's facts, checks and report: the verbs provider's pure
    # selection and the stack's pinned-memory formula, no messenger.
    "siphon_doctor_core": (["tools/doctor/facts.h", "tools/doctor/facts.cc", "tools/doctor/checks.h",
                            "tools/doctor/checks.cc", "tools/doctor/report.h", "tools/doctor/report.cc"],
                           ["siphon_rdma_verbs", "siphon_rdma_transport"]),
    # --peer / --listen run siphon-bench's client and server.
    "siphon_doctor_peer": (["tools/doctor/peer.h", "tools/doctor/peer.cc"],
                           ["siphon_doctor_core", "siphon_bench_run"]),
    "siphon_doctor": (["tools/doctor"], ["siphon_doctor_peer", "siphon_compat"]),
    "siphon_bench_core": (["tools/bench"], ["siphon_compat"]),
    "siphon_bench_run": (["tools/bench/engine.h", "tools/bench/engine.cc", "tools/bench/stack.h",
                          "tools/bench/stack.cc", "tools/bench/main.cc", "tools/bench/objd_run.h",
                          "tools/bench/objd_run.cc", "tools/bench/perf_delta.h", "tools/bench/perf_delta.cc",
                          "tools/bench/rados_run.h", "tools/bench/rados_run.cc"],
                         ["siphon_bench_core", "siphon_compat", "siphon_objd_proto", "siphon_rados_tool"]),
}
RDMA_CORE = re.compile(r"^(infiniband|rdma)/")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
SOURCE_EXT = (".h", ".hpp", ".cc", ".cpp", ".c")


def closure():
    allowed = {}
    for layer in LAYERS:
        seen, todo = {layer}, list(LAYERS[layer][1])
        while todo:
            d = todo.pop()
            if d not in seen:
                seen.add(d)
                todo.extend(LAYERS[d][1])
        allowed[layer] = seen
    return allowed


def owner(rel):
    best, best_len = None, -1
    for layer, (paths, _) in LAYERS.items():
        for p in paths:
            if (rel == p or rel.startswith(p + "/")) and len(p) > best_len:
                best, best_len = layer, len(p)
    return best


def check_sources(root, allowed):
    errors = []
    for top in ("msgr", "rados", "rdma", "compat", "plugins", "tools"):
        for dirpath, _, files in os.walk(os.path.join(root, top)):
            for f in files:
                if not f.endswith(SOURCE_EXT):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                layer = owner(rel)
                if layer is None:
                    errors.append(f"{rel}: file belongs to no layer (add it to LAYERS)")
                    continue
                with open(path, encoding="utf-8", errors="replace") as fh:
                    for n, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        kind, inc = m.groups()
                        if kind == "<" and RDMA_CORE.match(inc):
                            if layer != "siphon_rdma_verbs":
                                errors.append(f"{rel}:{n}: <{inc}> (rdma-core) is allowed only in rdma/verbs")
                            continue
                        if kind != '"':
                            continue
                        if ".." in inc.split("/"):
                            errors.append(f"{rel}:{n}: relative include \"{inc}\" bypasses the layering")
                            continue
                        target = owner(inc)
                        if target is None:
                            continue  # same-directory include or a non-project header
                        if target not in allowed[layer]:
                            errors.append(f"{rel}:{n}: {layer} may not include \"{inc}\" ({target})")
    return errors


def check_links(graph_file, allowed):
    errors = []
    with open(graph_file, encoding="utf-8") as fh:
        for line in fh:
            if ":" not in line:
                continue
            target, deps = line.split(":", 1)
            target = target.strip()
            if target not in LAYERS:
                errors.append(f"CMake layer target {target} is not in the layering table")
                continue
            for d in filter(None, (x.strip() for x in deps.split(";"))):
                if d.startswith("siphon_") and d != "siphon_warnings" and d not in allowed[target]:
                    errors.append(f"CMake: {target} links {d}, against the layering")
    return errors


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    allowed = closure()
    errors = check_sources(sys.argv[1], allowed)
    if len(sys.argv) > 2:
        errors += check_links(sys.argv[2], allowed)
    for e in errors:
        print("layering violation:", e)
    print(f"layering: {len(errors)} violation(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
