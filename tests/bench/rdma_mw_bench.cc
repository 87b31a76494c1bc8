// The setup cost of a zero-copy transfer's remote access (docs/rdma-transport.md,
// "Connection-scoped rkeys"; numbers in docs/performance.md):
//   RegMrDereg          today's fallback: reg_mr(kRemoteRead) + deregistration
//   RegMrMwAllocDealloc what the stack does per transfer with windows, minus the
//                       bind WR: reg_mr(kMwBind) + alloc_mw + dealloc_mw + dereg
//   BindLocalInv        a signaled bind_mw WR and a signaled local_inv WR on a
//                       connected QP, each awaited (the stack posts the bind
//                       unsignaled in the read_request's batch, so this is an
//                       upper bound of its latency, not a cost on the sender)
// On the software fabric (soft0) by default; --provider=verbs --device=NAME
// is not wired up here (run the conformance suite on rxe for correctness).
#include <benchmark/benchmark.h>

#include <cstring>
#include <memory>
#include <vector>

#include "rdma/provider.h"
#include "rdma/soft/soft_provider.h"

namespace {

using namespace siphon::rdma;

struct Fixture {
  std::unique_ptr<Provider> prov = soft::make_provider();
  std::unique_ptr<Device> dev;
  std::unique_ptr<ProtectionDomain> pd;
  std::unique_ptr<CompletionQueue> cq;
  std::unique_ptr<QueuePair> a, b;
  bool ok = false;

  Fixture() {
    std::error_code ec;
    dev = prov->open_device("soft0", ec);
    if (!dev) return;
    pd = dev->alloc_pd(ec);
    cq = dev->create_cq(1024, ec);
    if (!pd || !cq) return;
    QpInit init;
    init.send_cq = init.recv_cq = cq.get();
    init.caps.max_send_wr = init.caps.max_recv_wr = 64;
    a = pd->create_qp(init, ec);
    b = pd->create_qp(init, ec);
    if (!a || !b) return;
    std::vector<GidEntry> gids;
    if (dev->query_gids(1, gids)) return;
    const Gid loop{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1};
    std::uint8_t idx = 0;
    Gid gid{};
    for (const auto& g : gids)
      if (g.gid == loop) {
        idx = static_cast<std::uint8_t>(g.index);
        gid = g.gid;
      }
    if (gid != loop) return;
    ok = !up(*a, b->qp_num(), gid, idx) && !up(*b, a->qp_num(), gid, idx);
  }

  static std::error_code up(QueuePair& qp, std::uint32_t remote, const Gid& gid, std::uint8_t idx) {
    QpAttr x;
    x.state = QpState::init;
    x.access_flags = kLocalWrite | kRemoteRead | kRemoteWrite;
    if (auto ec = qp.modify(x, kAttrState | kAttrPkeyIndex | kAttrPort | kAttrAccessFlags)) return ec;
    x.state = QpState::rtr;
    x.av.dgid = gid;
    x.av.sgid_index = idx;
    x.dest_qp_num = remote;
    if (auto ec = qp.modify(x, kAttrState | kAttrPath | kAttrDestQpn | kAttrRqPsn | kAttrMaxDestRdAtomic |
                                   kAttrMinRnrTimer))
      return ec;
    x.state = QpState::rts;
    return qp.modify(x, kAttrState | kAttrSqPsn | kAttrTimeout | kAttrRetryCnt | kAttrRnrRetry | kAttrMaxRdAtomic);
  }

  bool complete_one() {
    Wc wc;
    for (;;) {
      if (cq->poll({&wc, 1}) == 1) return wc.status == WcStatus::success;
    }
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

void RegMrDereg(benchmark::State& st) {
  Fixture& f = fixture();
  std::vector<std::uint8_t> mem(static_cast<std::size_t>(st.range(0)), 1);
  for (auto _ : st) {
    std::error_code ec;
    auto mr = f.pd->reg_mr(mem.data(), mem.size(), kRemoteRead, ec);
    if (!mr) st.SkipWithError("reg_mr");
    benchmark::DoNotOptimize(mr->rkey());
  }
}
BENCHMARK(RegMrDereg)->Arg(64 << 10)->Arg(4 << 20);

void RegMrMwAllocDealloc(benchmark::State& st) {
  Fixture& f = fixture();
  std::vector<std::uint8_t> mem(static_cast<std::size_t>(st.range(0)), 1);
  for (auto _ : st) {
    std::error_code ec;
    auto mr = f.pd->reg_mr(mem.data(), mem.size(), kMwBind, ec);
    auto mw = mr ? f.pd->alloc_mw(ec) : nullptr;
    if (!mw) st.SkipWithError("reg_mr / alloc_mw");
    benchmark::DoNotOptimize(mw->rkey());
    mw.reset();
  }
}
BENCHMARK(RegMrMwAllocDealloc)->Arg(64 << 10)->Arg(4 << 20);

void BindLocalInv(benchmark::State& st) {
  Fixture& f = fixture();
  if (!f.ok) return st.SkipWithError("no connected QP pair on soft0 (127.0.0.1)");
  std::vector<std::uint8_t> mem(64 << 10, 1);
  std::error_code ec;
  auto mr = f.pd->reg_mr(mem.data(), mem.size(), kMwBind, ec);
  auto mw = f.pd->alloc_mw(ec);
  if (!mr || !mw) return st.SkipWithError("reg_mr / alloc_mw");
  for (auto _ : st) {
    SendWr bind;
    bind.opcode = Opcode::bind_mw;
    bind.flags = kSignaled;
    bind.rkey = next_rkey(mw->rkey());
    bind.bind = MwBind{mw.get(), mr.get(), reinterpret_cast<std::uint64_t>(mem.data()), mem.size(), kRemoteRead};
    if (f.a->post_send({&bind, 1}, nullptr) || !f.complete_one()) return st.SkipWithError("bind");
    SendWr inv;
    inv.opcode = Opcode::local_inv;
    inv.flags = kSignaled;
    inv.rkey = mw->rkey();
    if (f.a->post_send({&inv, 1}, nullptr) || !f.complete_one()) return st.SkipWithError("local_inv");
  }
}
BENCHMARK(BindLocalInv);

}  // namespace

BENCHMARK_MAIN();
