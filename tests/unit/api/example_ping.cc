// docs/messenger.md's example: a ping server and a client in one process.
#include <cstdio>
#include <future>

#include "msgr/api/messenger.h"
#include "msgr/transport/tcp_stack.h"

using namespace siphon;
constexpr std::uint16_t kPing = 2, kPong = 0x7f02;  // CEPH_MSG_PING, an app type

struct PingServer : Dispatcher {
  bool ms_dispatch(MessageRef m) override {  // runs on the dispatch thread
    if (m->get_type() != kPing) return false;
    MessageRef pong = make_message<Message>(kPong);
    pong->set_tid(m->get_tid());
    pong->front().append(m->front());  // echo the payload
    m->get_connection()->send_message(pong);
    return true;
  }
};

struct PingClient : Dispatcher {
  std::promise<std::string> reply;
  bool ms_dispatch(MessageRef m) override {
    if (m->get_type() != kPong) return false;
    reply.set_value(m->front().to_string());
    return true;
  }
};

int main() {
  // TCP by construction; a program with a ceph.conf asks compat for its
  // stacks and options instead (compat::create_messenger, docs/embedding.md).
  transport::TcpOptions tcp;  // the stack's options: threads, ports, ...
  tcp.common.async_op_threads = 1;
  MessengerOptions opts;  // the messenger's: timeouts, throttles, ...
  PingServer server_logic;  // the server: bind, start
  auto server = Messenger::create(transport::make_tcp_stack(tcp), {entity_type::osd, 0}, opts);
  server->set_policy(entity_type::client, Policy::stateless_server());
  server->add_dispatcher_tail(&server_logic);
  auto any_port = EntityAddrVec(EntityAddr(AddrType::msgr2, *NetAddress::parse("127.0.0.1:0")));
  if (server->bind(any_port)) return 1;
  server->start();
  PingClient client_logic;  // the client: start, connect, send
  auto client = Messenger::create(transport::make_tcp_stack(tcp), {entity_type::client, -1}, opts);
  client->set_policy(entity_type::osd, Policy::lossy_client());
  client->add_dispatcher_tail(&client_logic);
  client->start();
  ConnectionRef con = client->connect_to(entity_type::osd, server->get_myaddrs());
  MessageRef ping = make_message<Message>(kPing);
  ping->set_tid(1);
  ping->front().append("hello");
  con->send_message(ping);
  auto reply = client_logic.reply.get_future();
  const bool ok = reply.wait_for(std::chrono::seconds(10)) == std::future_status::ready &&
                  reply.get() == "hello";
  std::printf("ping %s\n", ok ? "answered" : "FAILED");
  client->shutdown();
  server->shutdown();
  client->wait();
  server->wait();
  return ok ? 0 : 1;
}
