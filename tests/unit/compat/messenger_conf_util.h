// Helpers for the compat tests that run messengers built only from a
// ceph.conf (factory_test.cc, stack_plugin_test.cc): loading a conf text,
// and an echoing server messenger with a client messenger connected to it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <string_view>

#include "compat/factory.h"

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
  std::unique_ptr<Messenger> server, client;
  ConnectionRef con;

  ~ConfPair() { stop(); }
  void stop() {
    if (!server) return;
    client->shutdown();
    server->shutdown();
    client->wait();
    server->wait();
    con.reset();
    client.reset();
    server.reset();
  }
};

// Starts `p`: the client's messages go to `client_dispatcher`, which must
// outlive `p`.
inline void start_conf_pair(ConfPair& p, const std::string& server_conf, const std::string& client_conf,
                            Dispatcher& client_dispatcher) {
  p.server = create_messenger(load(server_conf, "osd.0"), Purpose::public_network);
  p.client = create_messenger(load(client_conf, "client.admin"), Purpose::client);
  p.server->set_policy(entity_type::client, Policy::stateless_server());
  p.server->add_dispatcher_tail(&p.echo);
  ASSERT_FALSE(p.server->bind(
      proto::EntityAddrVec(proto::EntityAddr(proto::AddrType::msgr2, *NetAddress::parse("127.0.0.1:0")))));
  p.server->start();
  p.client->set_policy(entity_type::osd, Policy::lossy_client());
  p.client->add_dispatcher_tail(&client_dispatcher);
  p.client->start();
  p.con = p.client->connect_to(entity_type::osd, p.server->get_myaddrs());
}

}  // namespace siphon::compat::test
