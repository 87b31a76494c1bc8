// Dispatcher: what an application implements to receive messages and
// connection events (Ceph's Dispatcher).
//
// A messenger keeps an ordered list of dispatchers (add_dispatcher_head /
// add_dispatcher_tail). A received message is offered to each in turn:
//   fast path   the first dispatcher whose ms_can_fast_dispatch(m) is true
//               gets ms_fast_dispatch(m) on the connection's worker thread,
//               synchronously: it must not block. No thread hop.
//   normal path otherwise the message is queued to the messenger's dispatch
//               thread, which calls ms_dispatch(m) on each dispatcher until
//               one returns true (handled). A message nobody handles is
//               logged and dropped.
// Order: messages of one connection reach the normal path in the order they
// were received; likewise on the fast path. The connection events below are
// queued to the dispatch thread in order with that connection's normal-path
// messages.
//
// Lifetime: a dispatcher must outlive the messenger it is added to (until
// Messenger::wait() returns).
//
// Thread model: all callbacks other than ms_fast_dispatch and
// ms_can_fast_dispatch run on the one dispatch thread, so a dispatcher that
// only uses the normal path needs no locking of its own. Callbacks may call
// any Connection or Messenger method (send_message, mark_down, connect_to),
// except Messenger::wait() and shutdown().
#pragma once

#include "msgr/api/connection.h"
#include "msgr/api/message.h"

namespace siphon {

class Dispatcher {
 public:
  virtual ~Dispatcher() = default;

  // --- messages ---
  // Normal path; return true when handled (later dispatchers are skipped).
  virtual bool ms_dispatch(MessageRef m) = 0;
  // Fast path: called on the worker thread; must be cheap and thread-safe.
  virtual bool ms_can_fast_dispatch(const Message& /*m*/) const { return false; }
  virtual void ms_fast_dispatch(MessageRef m) { ms_dispatch(std::move(m)); }

  // --- connection events ---
  // An outgoing connection reached READY (first time, and after each
  // reconnect that started a new session).
  virtual void ms_handle_connect(ConnectionRef /*con*/) {}
  // An incoming connection reached READY.
  virtual void ms_handle_accept(ConnectionRef /*con*/) {}
  // A lossy connection faulted (or any connection was marked down by the
  // peer's behaviour) and is gone: queued and unacknowledged messages are
  // dropped. Return true if handled.
  virtual bool ms_handle_reset(ConnectionRef /*con*/) { return false; }
  // The peer reset our session: it restarted, or it lost the session state
  // (SESSION_RESET, or a new client_cookie with resetcheck). Messages sent in
  // the old session that were not acknowledged may have been lost.
  virtual void ms_handle_remote_reset(ConnectionRef /*con*/) {}
  // An outgoing connection attempt was refused (TCP RST / ECONNREFUSED).
  // Return true if handled. Lossless connections keep retrying with backoff.
  virtual bool ms_handle_refused(ConnectionRef /*con*/) { return false; }
};

}  // namespace siphon
