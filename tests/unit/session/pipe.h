// An in-memory frame pipe between a ClientHandshake and a ServerHandshake:
// every frame a Step sends is delivered to the other side, in order, with no
// sockets. The server's decisions are answered by a callback, as the
// messenger's driver would.
#pragma once

#include <algorithm>
#include <deque>
#include <functional>
#include <vector>

#include "msgr/session/handshake.h"

namespace siphon::session::test {

inline EntityAddr v2(const char* ip, std::uint16_t port, std::uint32_t nonce) {
  EntityAddr a(AddrType::msgr2, NetAddress::parse(ip).value(), nonce);
  a.addr.set_port(port);
  return a;
}

struct Services {
  std::uint64_t global_seq = 0;
  std::uint64_t cookie = 0x1000;
  HandshakeServices make(PolicyView server_policy = {}) {
    HandshakeServices s;
    s.next_global_seq = [this](std::uint64_t at_least) { return global_seq = std::max(global_seq, at_least) + 1; };
    s.random_cookie = [this] { return ++cookie; };
    s.policy_for = [server_policy](std::uint8_t) { return server_policy; };
    s.new_global_id = [] { return std::uint64_t{4100}; };
    return s;
  }
};

// Runs the two machines until neither has anything to deliver or one side
// stops (fault, wait, ready on both). Records the tags in wire order.
class Pipe {
 public:
  Pipe(ClientHandshake& c, ServerHandshake& s) : c_(c), s_(s) {}

  // Called on ident_request / reconnect_request; returns the server's step.
  std::function<Step(ServerHandshake&, Step::Outcome)> decide = [](ServerHandshake& s, Step::Outcome o) {
    if (o == Step::Outcome::ident_request) return s.accept_new_session(7, 0xabcdef);
    return s.reply_reset(true);
  };

  Step client_last, server_last;
  std::vector<std::pair<char, Tag>> wire;  // ('c'|'s', tag) in send order
  std::vector<Step> client_steps, server_steps;

  void run() {
    push('c', c_.start(), true);
    push('s', s_.start(), false);
    for (int guard = 0; guard < 1000 && (!to_server_.empty() || !to_client_.empty()); ++guard) {
      if (!to_server_.empty()) {
        Frame f = std::move(to_server_.front());
        to_server_.pop_front();
        push('s', s_.on_frame(f), false);
      } else {
        Frame f = std::move(to_client_.front());
        to_client_.pop_front();
        push('c', c_.on_frame(f), true);
      }
    }
  }

  // Delivers one frame to a side directly (for out-of-state tests).
  Step inject_to_client(const Frame& f) { return c_.on_frame(f); }
  Step inject_to_server(const Frame& f) { return s_.on_frame(f); }

 private:
  void push(char who, Step st, bool from_client) {
    for (;;) {
      for (auto& f : st.send) {
        wire.emplace_back(who, f.tag);
        (from_client ? to_server_ : to_client_).push_back(std::move(f));
      }
      st.send.clear();
      (from_client ? client_steps : server_steps).push_back(st);
      (from_client ? client_last : server_last) = st;
      if (from_client) {
        if (st.outcome == Step::Outcome::fault || st.outcome == Step::Outcome::wait) stop_ = true;
        return;
      }
      if (st.outcome != Step::Outcome::ident_request && st.outcome != Step::Outcome::reconnect_request) {
        if (st.outcome == Step::Outcome::fault) stop_ = true;
        return;
      }
      st = decide(s_, st.outcome);
    }
  }

  ClientHandshake& c_;
  ServerHandshake& s_;
  std::deque<Frame> to_server_, to_client_;
  bool stop_ = false;
};

}  // namespace siphon::session::test
