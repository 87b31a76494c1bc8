// Reads a classic pcap file (Ethernet or Linux cooked capture, IPv4/TCP) and
// reassembles each TCP connection's two byte streams, for feeding captured
// msgr2 exchanges to the decoder in tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace siphon::testing {

struct TcpStream {
  std::string client;        // "ip:port" of the connecting side
  std::string server;        // "ip:port" of the listening side
  std::vector<std::uint8_t> client_to_server;
  std::vector<std::uint8_t> server_to_client;
};

// Streams whose server port is `server_port`, in order of their first packet.
// Returns false and sets `error` on a malformed file.
bool read_tcp_streams(const std::string& path, std::uint16_t server_port,
                      std::vector<TcpStream>& out, std::string& error);

}  // namespace siphon::testing
