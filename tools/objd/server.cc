#include "tools/objd/server.h"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>

#include "msgr/api/connection.h"
#include "msgr/base/log.h"

namespace siphon::objd {

namespace {

std::shared_ptr<perf::Logger> make_logger() {
  perf::LoggerBuilder b("objd", l_objd_first + 1, l_objd_last);
  b.shared();  // ms_dispatch may run on the dispatch thread or (fast) on workers
  b.add_u64_counter(l_objd_op, "op", "Requests served (any operation)", "ops", perf::kInteresting);
  b.add_u64_counter(l_objd_op_put, "op_put", "Put requests", {}, perf::kUseful);
  b.add_u64_counter(l_objd_op_get, "op_get", "Get requests", {}, perf::kUseful);
  b.add_u64_counter(l_objd_op_stat, "op_stat", "Stat requests", {}, perf::kUseful);
  b.add_u64_counter(l_objd_op_delete, "op_delete", "Delete requests", {}, perf::kUseful);
  b.add_u64_counter(l_objd_op_errors, "op_errors", "Requests answered with an error", "err", perf::kInteresting);
  b.add_u64_counter(l_objd_op_in_bytes, "op_in_bytes", "Object bytes stored by puts", "in", perf::kInteresting,
                    perf::Unit::bytes);
  b.add_u64_counter(l_objd_op_out_bytes, "op_out_bytes", "Object bytes returned by gets", "out", perf::kInteresting,
                    perf::Unit::bytes);
  b.add_time_avg(l_objd_op_latency, "op_latency",
                 "Request received (whole frame read) to reply queued, including dispatch queue time", "lat",
                 perf::kInteresting);
  return b.create();
}

}  // namespace

ObjectServer::ObjectServer(ObjectStore& store, std::uint64_t max_object_size)
    : store_(store), max_(max_object_size), perf_(make_logger()) {
  perf::process_collection().add(perf_);
}

ObjectServer::~ObjectServer() { perf::process_collection().remove(perf_.get()); }

boost::intrusive_ptr<MObjdReply> ObjectServer::handle(const MObjdOp& op) {
  auto r = make_message<MObjdReply>();
  r->op = op.op;
  r->name = op.name;
  r->set_tid(op.get_tid());
  auto error = [&](int err, std::string why) {
    r->result = -err;
    r->error = std::move(why);
    counters_.errors.fetch_add(1, std::memory_order_relaxed);
    perf_->inc(l_objd_op_errors);
    return r;
  };
  if (std::string why = check_object_name(op.name); !why.empty())
    return error(EINVAL, fmt::format("{}: {}", to_string(op.op), why));
  std::string why;
  int rc = 0;
  switch (op.op) {
    case OpCode::put: {
      counters_.puts.fetch_add(1, std::memory_order_relaxed);
      perf_->inc(l_objd_op_put);
      const std::uint64_t len = op.data().length();
      if (len > max_)
        return error(EFBIG, fmt::format("put {}: {} bytes is more than objd_max_object_size ({})", op.name, len, max_));
      if (const std::uint32_t c = data_crc(op.data()); c != op.crc)
        return error(EBADMSG, fmt::format("put {}: the data's crc32c is {:#010x}, the request says {:#010x}",
                                          op.name, c, op.crc));
      rc = store_.put(op.name, op.data(), why);
      if (rc == 0) {
        r->size = len;
        counters_.bytes_in.fetch_add(len, std::memory_order_relaxed);
        perf_->inc(l_objd_op_in_bytes, len);
      }
      break;
    }
    case OpCode::get: {
      counters_.gets.fetch_add(1, std::memory_order_relaxed);
      perf_->inc(l_objd_op_get);
      BufferList data;
      rc = store_.get(op.name, max_, data, why);
      if (rc == 0) {
        r->size = data.length();
        r->crc = data_crc(data);
        counters_.bytes_out.fetch_add(data.length(), std::memory_order_relaxed);
        perf_->inc(l_objd_op_out_bytes, data.length());
        r->set_data(std::move(data));
      }
      break;
    }
    case OpCode::stat:
      counters_.stats.fetch_add(1, std::memory_order_relaxed);
      perf_->inc(l_objd_op_stat);
      rc = store_.stat(op.name, r->size, why);
      break;
    case OpCode::remove:
      counters_.deletes.fetch_add(1, std::memory_order_relaxed);
      perf_->inc(l_objd_op_delete);
      rc = store_.remove(op.name, why);
      break;
    default:
      return error(EOPNOTSUPP, fmt::format("unknown operation code {} (put 1, get 2, stat 3, delete 4)",
                                           static_cast<unsigned>(op.op)));
  }
  if (rc < 0) return error(-rc, std::move(why));
  return r;
}

bool ObjectServer::ms_dispatch(MessageRef m) {
  const auto* op = m->get_type() == kMsgObjdOp ? dynamic_cast<const MObjdOp*>(m.get()) : nullptr;
  if (op == nullptr) {
    // Another application's message, or ours without the registry: dropped.
    // The first few are logged at level 1, the rest at level 5: a peer
    // that floods us must not flood the log.
    const std::uint64_t n = counters_.dropped.fetch_add(1, std::memory_order_relaxed);
    const int level = n < 10 ? 1 : 5;
    SIPHON_LOG(tools, level, "objd: dropping a message of type {:#06x} ({} bytes) from {}.{}: not an objd request{}",
               m->get_type(), m->payload_length(), static_cast<unsigned>(m->get_source().type),
               m->get_source().num, n == 9 ? " (further drops are logged at level 5)" : "");
    return true;
  }
  perf_->inc(l_objd_op);
  auto reply = handle(*op);
  if (reply->result < 0) SIPHON_LOG(tools, 5, "objd: {}", reply->error);
  if (const auto& con = m->get_connection()) con->send_message(reply);
  if (const auto stamp = m->get_recv_stamp(); stamp != std::chrono::steady_clock::time_point{})
    perf_->tinc(l_objd_op_latency, std::chrono::steady_clock::now() - stamp);
  return true;
}

}  // namespace siphon::objd
