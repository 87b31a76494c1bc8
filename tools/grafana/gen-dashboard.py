#!/usr/bin/env python3
"""Writes siphon-rdma-dashboard.json (docs/observability.md, Grafana):

  tools/grafana/gen-dashboard.py > tools/grafana/siphon-rdma-dashboard.json

The dashboard is generated so its queries follow one pattern: per-worker
loggers have one metric name per worker (ceph_AsyncMessenger_Worker_0_...,
ceph-exporter's names), so a selector matches several names; rate() drops
the name and the series would collide ("vector cannot contain metrics with
the same labelset"). Each selector is therefore label_replace()d to keep its
name in a label, and rated over a subquery before the sum. The subquery's
step is the variable $step (set it to the scrape interval; default 15s):
Prometheus's default step, the evaluation interval, is often too coarse for
a rate over $__rate_interval.
prometheus_scrape_interop runs every query against a real Prometheus."""
import json
import sys

W = lambda name: '{__name__=~"ceph_AsyncMessenger_Worker(_[0-9]+)?_%s",ceph_daemon=~"$daemon"}' % name
R = lambda name: '{__name__=~"ceph_Siphon_RDMAWorker(_[0-9]+)?_%s",ceph_daemon=~"$daemon"}' % name
M = lambda name: '{__name__=~"ceph_siphon_messenger_.+_%s",ceph_daemon=~"$daemon"}' % name
S = lambda name: '{__name__="ceph_Siphon_RDMAStack_%s",ceph_daemon=~"$daemon"}' % name
N = lambda name: '%s{ceph_daemon=~"$daemon",device=~"$device"}' % name


def rate(sel):
    return ('sum by (ceph_daemon) (rate(label_replace(%s, "series", "$1", "__name__", "(.+)")'
            '[$__rate_interval:$step]))' % sel)


def nrate(sel):
    return 'sum by (ceph_daemon, device, port) (rate(%s[$__rate_interval]))' % sel


def level(sel):
    return 'sum by (ceph_daemon) (%s)' % sel


panels = []


def row(title, y):
    panels.append({"type": "row", "title": title, "id": len(panels) + 1, "collapsed": False,
                   "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}, "panels": []})


def ts(title, targets, unit, x, y, desc=""):
    ds = {"type": "prometheus", "uid": "${datasource}"}
    panels.append({
        "type": "timeseries", "title": title, "id": len(panels) + 1, "description": desc, "datasource": ds,
        "gridPos": {"h": 8, "w": 8, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit, "custom": {"drawStyle": "line", "fillOpacity": 10}},
                        "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["mean", "max"]},
                    "tooltip": {"mode": "multi"}},
        "targets": [{"datasource": ds, "refId": chr(65 + i), "expr": e, "legendFormat": l}
                    for i, (e, l) in enumerate(targets)],
    })


y = 0
row("Messenger (Ceph's AsyncMessenger::Worker counters, every stack)", y)
y += 1
ts("Messages/s", [(rate(W("msgr_send_messages")), "{{ceph_daemon}} sent"),
                  (rate(W("msgr_recv_messages")), "{{ceph_daemon}} received")], "ops", 0, y,
   "msgr_send_messages / msgr_recv_messages summed over the workers")
ts("Bytes/s", [(rate(W("msgr_send_bytes")), "{{ceph_daemon}} sent"),
               (rate(W("msgr_recv_bytes")), "{{ceph_daemon}} received")], "Bps", 8, y)
ts("Send queue latency (average)",
   [("%s / %s" % (rate(W("msgr_send_messages_queue_lat_sum")), rate(W("msgr_send_messages_queue_lat_count"))),
     "{{ceph_daemon}}")], "s", 16, y, "msgr_send_messages_queue_lat: _sum (seconds) over _count")
y += 8
ts("Worker busy (cores)", [(rate(W("msgr_running_total_time")), "{{ceph_daemon}} total"),
                           (rate(W("msgr_running_send_time")), "{{ceph_daemon}} send"),
                           (rate(W("msgr_running_recv_time")), "{{ceph_daemon}} recv")], "short", 0, y,
   "rate of the cumulative msgr_running_*_time seconds: 1 = one worker busy all the time")
ts("Connections", [(level(W("msgr_active_connections")), "{{ceph_daemon}} active"),
                   (rate(W("msgr_created_connections")), "{{ceph_daemon}} created/s")], "short", 8, y)
ts("Faults and reconnects", [(rate(M("faults")), "{{ceph_daemon}} faults/s"),
                             (rate(M("reconnects")), "{{ceph_daemon}} reconnects/s"),
                             (rate(R("connection_faults")), "{{ceph_daemon}} RDMA connection faults/s")],
   "short", 16, y)
y += 8
row("RDMA stack (Siphon::RDMAWorker, Siphon::RDMAStack)", y)
y += 1
ts("Credit stalls", [(rate(R("credit_stalls")), "{{ceph_daemon}} stalls/s"),
                     ("%s / %s" % (rate(R("credit_stall_time_sum")), rate(R("credit_stall_time_count"))),
                      "{{ceph_daemon}} average stall (s)")], "short", 0, y,
   "Sends deferred because the peer had no receive credit left: the receiver is the bottleneck")
ts("RNR and completion errors", [(rate(R("rnr_events")), "{{ceph_daemon}} RNR retry exceeded/s"),
                                 (rate(R("wc_errors")), "{{ceph_daemon}} error completions/s"),
                                 (rate(R("wc_retry_exceeded")), "{{ceph_daemon}} transport retry exceeded/s")],
   "short", 8, y)
ts("Send buffer stalls and zero-copy", [(rate(R("send_buffer_stalls")), "{{ceph_daemon}} send buffer stalls/s"),
                                        (rate(R("zero_copy_bytes")), "{{ceph_daemon}} zero-copy B/s"),
                                        (rate(R("tx_copied_bytes")), "{{ceph_daemon}} copied B/s")], "short", 16, y)
y += 8
ts("RDMA payload", [(rate(R("tx_bytes")), "{{ceph_daemon}} tx"), (rate(R("rx_bytes")), "{{ceph_daemon}} rx")],
   "Bps", 0, y)
ts("CQ polling efficiency", [("1 - %s / %s" % (rate(R("cq_polls_empty")), rate(R("cq_polls"))), "{{ceph_daemon}}")],
   "percentunit", 8, y, "Share of CQ polls that found work (cq_polls have priority 0: exported by default here)")
ts("Pinned memory and buffers", [(level(S("pinned_bytes")), "{{ceph_daemon}} pinned bytes"),
                                 (level(S("recv_buffers_in_use")), "{{ceph_daemon}} recv buffers in use"),
                                 (level(S("send_buffers_in_use")), "{{ceph_daemon}} send buffers in use")],
   "short", 16, y)
y += 8
row("NIC (sysfs counters and hw_counters of the device in use)", y)
y += 1
ts("Port data (NIC)", [(nrate(N("ceph_rdma_port_xmit_data_bytes_total")), "{{device}}:{{port}} xmit"),
                       (nrate(N("ceph_rdma_port_rcv_data_bytes_total")), "{{device}}:{{port}} rcv")], "Bps", 0, y,
   "IB port counters (mlx5 and other HCAs); rxe has hw_counters only (next panel)")
ts("Packets (NIC)", [(nrate(N("ceph_rdma_port_xmit_packets_total")), "{{device}}:{{port}} xmit"),
                     (nrate(N("ceph_rdma_port_rcv_packets_total")), "{{device}}:{{port}} rcv"),
                     (nrate(N("ceph_rdma_hw_sent_pkts_total")), "{{device}}:{{port}} sent (rxe)"),
                     (nrate(N("ceph_rdma_hw_rcvd_pkts_total")), "{{device}}:{{port}} rcvd (rxe)")], "pps", 8, y)
ts("RNR NAKs and retries (NIC)",
   [(nrate(N("ceph_rdma_hw_rnr_nak_retry_err_total")), "{{device}} rnr_nak_retry_err"),
    (nrate(N("ceph_rdma_hw_local_ack_timeout_err_total")), "{{device}} local_ack_timeout_err"),
    (nrate(N("ceph_rdma_hw_rcvd_rnr_err_total")), "{{device}} rcvd_rnr_err (rxe)"),
    (nrate(N("ceph_rdma_hw_send_rnr_err_total")), "{{device}} send_rnr_err (rxe)"),
    (nrate(N("ceph_rdma_hw_retry_exceeded_err_total")), "{{device}} retry_exceeded_err (rxe)")], "short", 16, y)
y += 8
ts("Congestion: CNPs (NIC)", [(nrate(N("ceph_rdma_hw_np_cnp_sent_total")), "{{device}} CNP sent (we saw ECN marks)"),
                              (nrate(N("ceph_rdma_hw_rp_cnp_handled_total")), "{{device}} CNP handled (we were slowed)")],
   "short", 0, y)
ts("Loss and drops (NIC)", [(nrate(N("ceph_rdma_hw_out_of_sequence_total")), "{{device}} out_of_sequence"),
                            (nrate(N("ceph_rdma_hw_packet_seq_err_total")), "{{device}} packet_seq_err"),
                            (nrate(N("ceph_rdma_hw_out_of_buffer_total")), "{{device}} out_of_buffer"),
                            (nrate(N("ceph_rdma_port_xmit_discards_total")), "{{device}} xmit_discards"),
                            (nrate(N("ceph_rdma_port_rcv_errors_total")), "{{device}} rcv_errors"),
                            (nrate(N("ceph_rdma_hw_out_of_seq_request_total")), "{{device}} out_of_seq_request (rxe)")],
   "short", 8, y)
ts("Port state (4 = ACTIVE)", [(N("ceph_rdma_port_state"), "{{device}}:{{port}}"),
                               (N("ceph_rdma_port_sysfs_files"), "{{device}}:{{port}} sysfs files read")],
   "short", 16, y)


def var(name, label, query):
    return {"name": name, "label": label, "type": "query",
            "datasource": {"type": "prometheus", "uid": "${datasource}"},
            "query": {"query": query, "refId": name}, "definition": query,
            "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2, "current": {}, "hide": 0}


dash = {
    "title": "Siphon messenger and RDMA",
    "uid": "siphon-rdma",
    "description": "Siphon's /metrics endpoint (docs/observability.md, Prometheus): messenger rates, RDMA credit "
                   "stalls and RNR, and the NIC's counters side by side",
    "tags": ["siphon", "ceph", "rdma"],
    "schemaVersion": 38,
    "version": 1,
    "editable": True,
    "time": {"from": "now-1h", "to": "now"},
    "refresh": "30s",
    "timezone": "",
    "templating": {"list": [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0},
        {"name": "step", "label": "Subquery step (the scrape interval)", "type": "custom",
         "query": "5s,10s,15s,30s,1m", "current": {"text": "15s", "value": "15s"},
         "options": [{"text": v, "value": v, "selected": v == "15s"} for v in ("5s", "10s", "15s", "30s", "1m")],
         "hide": 0},
        var("daemon", "Daemon", 'label_values({__name__=~"ceph_AsyncMessenger_Worker.*_msgr_send_messages"}, ceph_daemon)'),
        var("device", "RDMA device", "label_values(ceph_rdma_port_state, device)"),
    ]},
    "panels": panels,
}
json.dump(dash, sys.stdout, indent=2)
sys.stdout.write("\n")
