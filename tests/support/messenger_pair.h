// A server and a client messenger that a test runs together and shuts down
// together: stop() (or the destructor, on a failed assertion's early return)
// shuts both down and waits for them, client first.
#pragma once

#include <memory>

#include "msgr/api/messenger.h"

namespace siphon::test {

struct MessengerPair {
  std::unique_ptr<Messenger> server, client;

  MessengerPair() = default;
  MessengerPair(const MessengerPair&) = delete;
  MessengerPair& operator=(const MessengerPair&) = delete;
  ~MessengerPair() { stop(); }

  void stop() {
    if (client) client->shutdown();
    if (server) server->shutdown();
    if (client) client->wait();
    if (server) server->wait();
    client.reset();
    server.reset();
  }
};

}  // namespace siphon::test
