#!/usr/bin/env python3
"""siphon-doctor end to end over captured trees (docs/doctor.md).

  doctor_test.py SIPHON_DOCTOR DATA_DIR CASE

Each case builds /sys, /proc and /dev trees in a temporary directory from
the verbs provider's device data (DATA_DIR: rxe0-devinfo.txt, captured from
rxe0 in the QEMU guest, and connectx-roce-gids.txt, a ConnectX port's shape),
seeds at most one fault, runs siphon-doctor on them with a ceph.conf, and
checks the exit status, the check that found the fault and the fix it names.
Case "host" runs on this machine's own /sys (no RDMA here)."""
import json
import os
import re
import subprocess
import sys
import tempfile

DOCTOR, DATA, CASE = sys.argv[1], sys.argv[2], sys.argv[3]

# Small pools so that the memlock need (320 KiB) fits the usual default limit;
# the memlock cases use the defaults or prlimit explicitly.
SMALL_POOLS = """ms_async_rdma_buffer_size = 4096
ms_async_rdma_send_buffers = 16
ms_async_rdma_receive_buffers = 64
"""


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text + "\n")


def load_sample(name):
    """(port lines, [(index, gid, type, netdev)]) from a data file."""
    section, port, gids = None, {}, []
    with open(os.path.join(DATA, name)) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                continue
            if line.startswith("== "):
                section = line[3:]
                continue
            if section == "gids" and line.strip():
                m = re.match(r"(\d+) (\S+) (IB/RoCE v1|RoCE v2) (\S+)", line)
                gids.append((int(m.group(1)), m.group(2), m.group(3), m.group(4)))
            elif section == "ibv_devinfo -v":
                m = re.match(r"\s+(state|active_mtu|link_layer|gid_tbl_len):\s+(.*)", line)
                if m and m.group(1) not in port:
                    port[m.group(1)] = m.group(2)
    return port, gids


class Tree:
    """A host as the doctor sees it: root/sys, root/proc, root/dev."""

    def __init__(self, root):
        self.root = root
        self.sys, self.proc, self.dev = (os.path.join(root, d) for d in ("sys", "proc", "dev"))
        write(f"{self.sys}/kernel/mm/transparent_hugepage/enabled", "always [madvise] never")
        write(f"{self.sys}/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "0")
        write(f"{self.sys}/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "0")
        write(f"{self.sys}/devices/system/node/node0/cpulist", "0-1")
        write(f"{self.proc}/self/status", "Name:\tsiphon-doctor\nCpus_allowed_list:\t0-1\nMems_allowed_list:\t0")
        write(f"{self.proc}/modules", "\n".join(
            f"{m} 16384 0 - Live 0x0000000000000000" for m in ("rdma_ucm", "ib_uverbs", "rdma_cm", "ib_core")))
        os.makedirs(f"{self.dev}/infiniband", exist_ok=True)

    def netdev(self, name, mtu, operstate):
        write(f"{self.sys}/class/net/{name}/mtu", str(mtu))
        write(f"{self.sys}/class/net/{name}/operstate", operstate)

    def device(self, name, sample, state="4: ACTIVE", phys="5: LinkUp", rate="2.5 Gb/sec (1X SDR)", slots=None):
        port, gids = load_sample(sample)
        d = f"{self.sys}/class/infiniband/{name}"
        p = f"{d}/ports/1"
        write(f"{p}/state", state)
        write(f"{p}/phys_state", phys)
        write(f"{p}/rate", rate)
        write(f"{p}/link_layer", port["link_layer"])
        write(f"{p}/lid", "0x0")
        by_index = {g[0]: g for g in gids}
        for i in range(slots or max(by_index) + 1):
            g = by_index.get(i)
            write(f"{p}/gids/{i}", g[1] if g else "0000:0000:0000:0000:0000:0000:0000:0000")
            if g:
                write(f"{p}/gid_attrs/types/{i}", g[2])
                write(f"{p}/gid_attrs/ndevs/{i}", g[3])
        write(f"{self.sys}/class/infiniband_verbs/uverbs0/ibdev", name)
        for f in ("uverbs0", "rdma_cm"):
            write(f"{self.dev}/infiniband/{f}", "")
            os.chmod(f"{self.dev}/infiniband/{f}", 0o666)
        return d


def rxe0(tree):
    """rxe0 on dummy0 (MTU 4500) as captured in the guest: no NUMA node, not SR-IOV."""
    tree.netdev("lo", 65536, "unknown")
    tree.netdev("dummy0", 4500, "unknown")
    tree.device("rxe0", "rxe0-devinfo.txt", slots=16)
    return "192.0.2.1"


def connectx(tree, mtu=9000):
    """mlx5_0 shaped after a ConnectX-5 port: PCI device on node 0, SR-IOV PF, ECN on."""
    tree.netdev("enp3s0f0", mtu, "up")
    tree.netdev("enp3s0f0.100", mtu, "up")
    d = tree.device("mlx5_0", "connectx-roce-gids.txt", rate="100 Gb/sec (4X EDR)", slots=255)
    write(f"{d}/device/numa_node", "0")
    write(f"{d}/device/sriov_totalvfs", "8")
    write(f"{d}/device/sriov_numvfs", "0")
    os.makedirs(f"{d}/device/net/enp3s0f0", exist_ok=True)
    for point in ("roce_np", "roce_rp"):
        for prio in range(8):
            write(f"{tree.sys}/class/net/enp3s0f0/ecn/{point}/enable/{prio}", "1")
    return "10.0.0.11"


def run(tree, conf_text, extra=(), prlimit=None):
    conf = os.path.join(tree.root, "ceph.conf")
    with open(conf, "w") as f:
        f.write(conf_text)
    cmd = [DOCTOR, "-c", conf, "--sysfs-root", tree.sys, "--proc-root", tree.proc, "--dev-root", tree.dev, *extra]
    if prlimit is not None:
        cmd = ["prlimit", f"--memlock={prlimit}", "--", *cmd]
    env = dict(os.environ)
    env.pop("CEPH_ARGS", None)
    env.pop("CEPH_CONF", None)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    print(f"$ {' '.join(cmd)}\n{p.stdout}{p.stderr}exit {p.returncode}")
    return p


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def conf(addr, more=""):
    return f"[global]\nms_type = async+rdma\npublic_addr = {addr}\n{SMALL_POOLS}{more}"


def check_json(tree, conf_text):
    p = run(tree, conf_text, extra=["--json"])
    doc = json.loads(p.stdout)
    assert doc["schema"] == "siphon-doctor" and doc["status"] == p.returncode, doc
    return doc, p.returncode


def expect(p, status, check, summary_re, fix_re=None):
    """The exit status, and a line of `check` at the right level whose text and fix match."""
    assert p.returncode == status, f"exit {p.returncode}, expected {status}"
    level = {0: "OK", 1: "WARN", 2: "ERROR"}[status] if status else None
    lines = p.stdout.splitlines()
    found = False
    for i, line in enumerate(lines):
        m = re.match(r"(OK|WARN|ERROR|CAN'T)\s+(\S+)\s+(.*)", line)
        if not m or m.group(2) != check or not re.search(summary_re, m.group(3)):
            continue
        if level and m.group(1) != level:
            continue
        if fix_re:
            block = []
            for follow in lines[i + 1:]:
                if not follow.startswith("       "):
                    break
                block.append(follow)
            assert any(re.search(r"fix: .*" + fix_re, b) for b in block), f"no fix matching {fix_re!r}: {block}"
        found = True
        break
    assert found, f"no {check} line matching {summary_re!r}"
    # Problems first: no OK line before an ERROR or WARN line.
    seen_ok = False
    for line in lines:
        if line.startswith("OK"):
            seen_ok = True
        elif line.startswith(("ERROR", "WARN")):
            assert not seen_ok, "a problem is listed after an OK check"


def case(name):
    with tempfile.TemporaryDirectory() as root:
        t = Tree(root)
        if name == "clean_rxe":
            addr = rxe0(t)
            p = run(t, conf(addr))
            expect(p, 0, "gid", r"rxe0 GID\[1\] ::ffff:192\.0\.2\.1 RoCE v2")
            expect(p, 0, "mtu", r"path MTU 4096: netdev MTU 4500 \(dummy0\), port active MTU 4096")
            expect(p, 0, "device", r"^rxe0 will be used")
            assert "CAN'T  numa" in p.stdout, "rxe0 has no NUMA node: cannot tell"
            doc, st = check_json(t, conf(addr))
            assert st == 0 and {c["name"] for c in doc["checks"]} >= {"device", "port", "gid", "mtu", "memlock"}
        elif name == "clean_connectx":
            addr = connectx(t)
            p = run(t, conf(addr))
            expect(p, 0, "gid", r"mlx5_0 GID\[3\] ::ffff:10\.0\.0\.11 RoCE v2")
            expect(p, 0, "numa", r"NUMA node 0; 2 of the 2 CPUs")
            expect(p, 0, "sriov", r"physical function with 0 of 8 VFs")
            expect(p, 0, "lossless", r"ECN on enp3s0f0 priority 3: notification point on, reaction point on")
            # The VLAN's address: its RoCE v2 GID, and ECN read from the parent netdev.
            p = run(t, conf(addr), extra=["--public_addr", "10.0.100.11"])
            expect(p, 0, "gid", r"mlx5_0 GID\[7\] ::ffff:10\.0\.100\.11 RoCE v2 .* on enp3s0f0\.100")
            expect(p, 0, "lossless", r"ECN on enp3s0f0 priority 3: notification point on")
        elif name == "no_device":
            p = run(t, conf("192.0.2.1"))
            expect(p, 0, "device", r"no RDMA device: async\+rdma will run on the software fabric")
            assert not re.search(r"^\S+\s+memlock", p.stdout, re.M), "no memlock need without a device"
        elif name == "device_missing":
            rxe0(t)
            p = run(t, conf("192.0.2.1", "ms_async_rdma_device_name = mlx5_9\n"))
            expect(p, 2, "device", r"'mlx5_9'.*not found; devices present: rxe0",
                   r"set ms_async_rdma_device_name to one of the devices present")
        elif name == "port_down":
            t.netdev("dummy0", 4500, "down")
            t.device("rxe0", "rxe0-devinfo.txt", state="1: DOWN", phys="3: Disabled")
            p = run(t, conf("192.0.2.1"))
            expect(p, 2, "port", r"rxe0 port 1: state 1: DOWN, physical state 3: Disabled", r"bring the link up")
            # The GID for when the port is up, on the netdev that is down with it.
            assert re.search(r"^ERROR +gid +the stack would use rxe0 GID\[1\] ::ffff:192\.0\.2\.1 RoCE v2 .* once the "
                             r"port is ACTIVE; its netdev dummy0 is down", p.stdout, re.M), "the GID for when the port is up"
        elif name == "gid_roce_v1":
            connectx(t)
            p = run(t, conf("10.0.0.11", "ms_async_rdma_gid_idx = 0\n"))
            expect(p, 1, "gid", r"GID\[0\] fe80::a2b:3cff:fe4d:5e6f RoCE v1.*not RoCE v2", r"pin a RoCE v2 GID")
        elif name == "gid_missing":
            connectx(t)
            p = run(t, conf("10.0.0.11", "ms_async_rdma_gid_idx = 12\n"))
            expect(p, 2, "gid", r"ms_async_rdma_gid_idx = 12: mlx5_0 port 1 has no GID at index 12",
                   r"set ms_async_rdma_gid_idx / ms_async_rdma_local_gid to a RoCE v2 entry")
        elif name == "gid_netdev_down":
            connectx(t)
            t.netdev("enp3s0f0.100", 9000, "down")
            p = run(t, conf("10.0.0.11", "ms_async_rdma_local_gid = ::ffff:10.0.100.11\n"))
            expect(p, 2, "gid", r"GID\[7\] ::ffff:10\.0\.100\.11.*its netdev enp3s0f0\.100 is down",
                   r"bring enp3s0f0\.100 up")
        elif name == "mtu_small":
            connectx(t, mtu=1500)
            p = run(t, conf("10.0.0.11"))
            expect(p, 1, "mtu", r"path MTU 1024: netdev MTU 1500 \(enp3s0f0\), port active MTU 1024",
                   r"raise the MTU of enp3s0f0")
        elif name == "memlock":
            # The defaults pin up to 128 MiB + 4 GiB per stack; a 4 MiB limit (lowering
            # a limit needs no privilege) is too small.
            rxe0(t)
            p = run(t, "[global]\nms_type = async+rdma\npublic_addr = 192.0.2.1\n", prlimit=4 << 20)
            expect(p, 2, "memlock", r"RLIMIT_MEMLOCK is 4 MiB but this configuration may pin 4\.1 GiB",
                   r"LimitMEMLOCK=infinity")
        elif name == "hugepages":
            rxe0(t)
            p = run(t, conf("192.0.2.1", "ms_async_rdma_enable_hugepage = true\n"))
            expect(p, 1, "hugepages", r"0 free 2 MiB hugepages", r"reserve at least \d+ 2 MiB pages")
        elif name == "numa_remote":
            connectx(t)
            write(f"{t.sys}/class/infiniband/mlx5_0/device/numa_node", "1")
            write(f"{t.sys}/devices/system/node/node1/cpulist", "2-3")
            p = run(t, conf("10.0.0.11"))
            expect(p, 1, "numa", r"NUMA node 1; 0 of the 2 CPUs", r"numactl --cpunodebind=1")
        elif name == "numa_membind":
            # The CPUs are on the NIC's node, the memory policy is not.
            connectx(t)
            write(f"{t.proc}/self/status", "Name:\tsiphon-doctor\nCpus_allowed_list:\t0-1\nMems_allowed_list:\t1")
            p = run(t, conf("10.0.0.11"))
            expect(p, 1, "numa", r"NUMA node 0; 2 of the 2 CPUs.*memory may not come from node 0",
                   r"--membind=0")
        elif name == "malformed":
            # Garbage in every file the doctor parses: no crash, a report, and
            # the broken facts treated as unknown (the port is not ACTIVE).
            connectx(t)
            d = f"{t.sys}/class/infiniband/mlx5_0"
            for path, text in [(f"{d}/ports/1/state", "ACTIVE?"), (f"{d}/ports/1/gids/3", "not-a-gid"),
                               (f"{d}/ports/1/gid_attrs/types/1", "RoCE v9"), (f"{d}/ports/1/lid", "zz"),
                               (f"{d}/device/numa_node", "-7x"), (f"{d}/device/sriov_totalvfs", "99999999999999999999"),
                               (f"{t.sys}/class/net/enp3s0f0/mtu", "-1"),
                               (f"{t.sys}/devices/system/node/node0/cpulist", "5-1,0-99999999,x-"),
                               (f"{t.sys}/kernel/mm/transparent_hugepage/enabled", "]["),
                               (f"{t.sys}/kernel/mm/hugepages/hugepages-2048kB/free_hugepages", "lots"),
                               (f"{t.proc}/self/status", "Cpus_allowed_list:\n\0\0garbage"),
                               (f"{t.proc}/modules", "\n\n   \n")]:
                write(path, text)
            os.makedirs(f"{d}/ports/1/gids/notanumber", exist_ok=True)
            p = run(t, conf("10.0.0.11", "ms_async_rdma_enable_hugepage = true\n"))
            assert p.returncode in (0, 1, 2), f"exit {p.returncode}"
            expect(p, 2, "port", r"mlx5_0 port 1: state ACTIVE\?", r"bring the link up")
        elif name == "sriov_vf":
            connectx(t)
            d = f"{t.sys}/class/infiniband/mlx5_0/device"
            os.remove(f"{d}/sriov_totalvfs")
            os.remove(f"{d}/sriov_numvfs")
            os.makedirs(f"{d}/physfn")
            p = run(t, conf("10.0.0.11"))
            expect(p, 0, "sriov", r"mlx5_0 is an SR-IOV virtual function")
        elif name == "ecn_off":
            connectx(t)
            write(f"{t.sys}/class/net/enp3s0f0/ecn/roce_np/enable/3", "0")
            p = run(t, conf("10.0.0.11"))
            expect(p, 1, "lossless", r"priority 3: notification point off", r"enable RoCE ECN for priority 3")
        elif name == "no_rdma_cm":
            rxe0(t)
            os.remove(f"{t.dev}/infiniband/rdma_cm")
            p = run(t, conf("192.0.2.1"))
            expect(p, 2, "access", r"infiniband/rdma_cm does not exist", r"modprobe rdma_ucm")
        elif name == "config_error":
            rxe0(t)
            p = run(t, conf("192.0.2.1", "ms_async_rdma_credits = 1\n"))
            expect(p, 2, "config", r"ms_async_rdma_credits", r"siphon-conf --check")
            # The same problem given with --set, as siphon-bench takes options.
            p = run(t, conf("192.0.2.1"), extra=("--set", "ms_async_rdma_credits=1"))
            expect(p, 2, "config", r"ms_async_rdma_credits", r"siphon-conf --check")
            # An unknown key or a malformed pair is a usage error (exit 3) naming it.
            p = run(t, conf("192.0.2.1"), extra=("--set", "ms_no_such_option=1"))
            assert p.returncode == 3 and "ms_no_such_option" in p.stderr, "unknown --set key"
            p = run(t, conf("192.0.2.1"), extra=("--set", "ms_async_rdma_credits"))
            assert p.returncode == 3 and "KEY=VALUE" in p.stderr, "malformed --set"
        elif name == "host":
            # This machine has no RDMA: a clean report naming the software fabric.
            if os.path.isdir("/sys/class/infiniband") and os.listdir("/sys/class/infiniband"):
                print("this host has RDMA devices; the case is for hosts without")
                sys.exit(77)
            c = os.path.join(root, "ceph.conf")
            with open(c, "w") as f:
                f.write("[global]\nms_type = async+rdma\n")
            p = subprocess.run([DOCTOR, "-c", c], capture_output=True, text=True, timeout=60)
            print(p.stdout, p.stderr)
            expect(p, 0, "device", r"no RDMA device: async\+rdma will run on the software fabric")
        elif name == "peer":
            # --listen and --peer over async+rdma on this host (the software
            # fabric without RDMA hardware): round trips with zero errors.
            c = os.path.join(root, "ceph.conf")
            with open(c, "w") as f:
                f.write("[global]\nms_type = async+rdma\n")
            port = free_port()
            listener = subprocess.Popen([DOCTOR, "-c", c, "--listen", f"127.0.0.1:{port}"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            try:
                line = listener.stderr.readline()
                assert "listening on" in line, line
                p = subprocess.run([DOCTOR, "-c", c, "--peer", f"127.0.0.1:{port}", "--round-trips", "50"],
                                   capture_output=True, text=True, timeout=120)
                print(p.stdout, p.stderr)
                expect(p, 0, "peer", r"^50 round trips to 127\.0\.0\.1:\d+ over async\+rdma: RTT p50 [\d.]+ us.*"
                       r"bulk 32 x 1 MiB echoed.*; 0 errors, 0 faults, 0 RNR events, 0 error completions")
                assert "fault: " not in p.stdout, "fault evidence without faults"
                # Queue pairs the fabric moves to the error state: the lossless
                # session reconnects and replays (no message lost, so a
                # warning, not an error), and the report names why it faulted.
                p = subprocess.run([DOCTOR, "-c", c, "--peer", f"127.0.0.1:{port}", "--round-trips", "50",
                                    "--set", "ms_async_rdma_soft_inject_qp_error_probability=0.01",
                                    "--set", "ms_async_rdma_soft_inject_seed=7"],
                                   capture_output=True, text=True, timeout=120)
                print(p.stdout, p.stderr)
                expect(p, 1, "peer", r"; 0 errors, [1-9]\d* faults, 0 RNR events, 0 error completions",
                       r"check ms_async_rdma_credits")
                assert re.search(r"^ +fault: rdma: RDMA connection to 127\.0\.0\.1:\d+ faulted: the queue pair "
                                 r"moved to the error state", p.stdout, re.M), "no fault reason in the evidence"
            finally:
                listener.send_signal(2)  # SIGINT: the listener stops
                assert listener.wait(timeout=30) == 0, "the listener did not stop cleanly on SIGINT"
            # Nobody listening: an error naming the fix.
            p = subprocess.run([DOCTOR, "-c", c, "--peer", f"127.0.0.1:{port}", "--connect-timeout", "3"],
                               capture_output=True, text=True, timeout=60)
            print(p.stdout, p.stderr)
            expect(p, 2, "peer", r"no round trip to 127\.0\.0\.1:\d+ over async\+rdma",
                   r"start siphon-doctor --listen")
        else:
            raise SystemExit(f"unknown case {name}")


if __name__ == "__main__":
    case(CASE)
    print(f"doctor case {CASE}: passed")
