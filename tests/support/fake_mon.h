// A messenger playing a Ceph monitor in a test: entity mon.0 with nonce 0,
// a stateless server towards clients, the mon messages decoded to their
// classes, bound to a loopback port; the caller's dispatcher answers.
#pragma once

#include <gtest/gtest.h>

#include <memory>

#include "msgr/api/messenger.h"
#include "msgr/mon/messages.h"

namespace siphon::test {

inline std::unique_ptr<Messenger> start_fake_mon(std::shared_ptr<transport::Stack> stack, Dispatcher* d,
                                                 const EntityAddrVec& bind_to, MessengerOptions o = {}) {
  auto msgr = Messenger::create(std::move(stack), {entity_type::mon, 0}, o, 0);
  msgr->set_policy(entity_type::client, Policy::stateless_server());
  auto reg = std::make_shared<MessageRegistry>();
  mon::register_mon_messages(*reg);
  msgr->set_message_registry(reg);
  msgr->add_dispatcher_tail(d);
  EXPECT_FALSE(msgr->bind(bind_to));
  msgr->start();
  return msgr;
}

}  // namespace siphon::test
