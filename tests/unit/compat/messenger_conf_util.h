// Helpers for the compat tests that run messengers built only from a
// ceph.conf (factory_test.cc, stack_plugin_test.cc): loading a conf text,
// and an echoing server messenger with a client messenger connected to it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "compat/factory.h"
#include "messenger_pair.h"

namespace siphon::compat::test {

// `text` as the ceph.conf of entity `name`; expects no errors.
inline Config load(std::string_view text, std::string name = "osd.3") {
  Diagnostics diags;
  ConfigRequest req;
  std::string err;
  req.name = *EntityName::parse(name, err);
  Config c = Config::load_text(text, "test.conf", req, diags);
  EXPECT_FALSE(diags.has_errors()) << diags.to_string();
  return c;
}

// Answers every message with one of the next type, same front and data.
struct Echo : Dispatcher {
  bool ms_dispatch(MessageRef m) override {
    MessageRef r = make_message<Message>(m->get_type() + 1);
    r->front().append(m->front());
    r->set_data(m->data());
    m->get_connection()->send_message(r);
    return true;
  }
};

// osd.0 (echoing, stateless server on 127.0.0.1) and client.admin (lossy
// client) connected to it, each built from its own ceph.conf text.
struct ConfPair {
  Echo echo;  // outlives the messengers
  siphon::test::MessengerPair m;
  ConnectionRef con;
  void stop() { m.stop(); }
};

// Starts `p`: the client's messages go to `client_dispatcher`, which must
// outlive `p`.
inline void start_conf_pair(ConfPair& p, const std::string& server_conf, const std::string& client_conf,
                            Dispatcher& client_dispatcher) {
  p.m.server = create_messenger(load(server_conf, "osd.0"), Purpose::public_network);
  p.m.client = create_messenger(load(client_conf, "client.admin"), Purpose::client);
  p.m.server->set_policy(entity_type::client, Policy::stateless_server());
  p.m.server->add_dispatcher_tail(&p.echo);
  ASSERT_FALSE(p.m.server->bind(
      proto::EntityAddrVec(proto::EntityAddr(proto::AddrType::msgr2, *NetAddress::parse("127.0.0.1:0")))));
  p.m.server->start();
  p.m.client->set_policy(entity_type::osd, Policy::lossy_client());
  p.m.client->add_dispatcher_tail(&client_dispatcher);
  p.m.client->start();
  p.con = p.m.client->connect_to(entity_type::osd, p.m.server->get_myaddrs());
}

}  // namespace siphon::compat::test
