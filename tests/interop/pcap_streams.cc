#include "pcap_streams.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <tuple>

namespace siphon::testing {
namespace {

struct Reader {
  const std::vector<std::uint8_t>& d;
  bool swap;
  std::uint32_t u32(std::size_t off) const {
    std::uint32_t v;
    std::memcpy(&v, &d[off], 4);
    return swap ? __builtin_bswap32(v) : v;
  }
};

std::uint16_t be16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] << 8 | p[1]); }
std::uint32_t be32(const std::uint8_t* p) {
  return static_cast<std::uint32_t>(p[0]) << 24 | static_cast<std::uint32_t>(p[1]) << 16 |
         static_cast<std::uint32_t>(p[2]) << 8 | p[3];
}
std::string endpoint(const std::uint8_t* ip, std::uint16_t port) {
  return std::to_string(ip[0]) + "." + std::to_string(ip[1]) + "." + std::to_string(ip[2]) + "." +
         std::to_string(ip[3]) + ":" + std::to_string(port);
}

// One direction: bytes placed by sequence number relative to the SYN.
struct Direction {
  bool have_isn = false;
  std::uint32_t isn = 0;
  std::vector<std::uint8_t> bytes;
  void add(std::uint32_t seq, bool syn, const std::uint8_t* p, std::size_t n) {
    if (syn) {
      have_isn = true;
      isn = seq + 1;
      return;
    }
    if (!have_isn || n == 0) return;
    const std::size_t off = seq - isn;  // wraps correctly in 32-bit space
    if (off > (1u << 30)) return;       // before the start: ignore
    if (bytes.size() < off + n) bytes.resize(off + n);
    std::memcpy(bytes.data() + off, p, n);
  }
};

}  // namespace

bool read_tcp_streams(const std::string& path, std::uint16_t server_port,
                      std::vector<TcpStream>& out, std::string& error) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    error = "cannot open " + path;
    return false;
  }
  const std::vector<std::uint8_t> d((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (d.size() < 24) {
    error = "file too short for a pcap header";
    return false;
  }
  std::uint32_t magic;
  std::memcpy(&magic, d.data(), 4);
  bool swap;
  if (magic == 0xA1B2C3D4 || magic == 0xA1B23C4D) swap = false;
  else if (magic == 0xD4C3B2A1 || magic == 0x4D3CB2A1) swap = true;
  else {
    error = "not a classic pcap file";
    return false;
  }
  const Reader r{d, swap};
  const std::uint32_t linktype = r.u32(20);
  std::size_t l2;
  if (linktype == 1) l2 = 14;          // Ethernet
  else if (linktype == 113) l2 = 16;   // Linux cooked (SLL)
  else {
    error = "unsupported link type " + std::to_string(linktype);
    return false;
  }
  using Key = std::tuple<std::string, std::string>;  // client, server
  std::map<Key, std::pair<Direction, Direction>> conns;
  std::vector<Key> order;
  std::size_t off = 24;
  while (off + 16 <= d.size()) {
    const std::uint32_t caplen = r.u32(off + 8);
    off += 16;
    if (off + caplen > d.size()) {
      error = "truncated packet record";
      return false;
    }
    const std::uint8_t* p = &d[off];
    off += caplen;
    if (caplen < l2 + 20) continue;
    const std::uint16_t ethertype = be16(p + l2 - 2);
    if (ethertype != 0x0800) continue;
    const std::uint8_t* ip = p + l2;
    const std::size_t ihl = (ip[0] & 0x0f) * 4u;
    if (ip[9] != 6 || caplen < l2 + ihl + 20) continue;
    const std::size_t ip_total = be16(ip + 2);
    const std::uint8_t* tcp = ip + ihl;
    const std::size_t thl = (tcp[12] >> 4) * 4u;
    const std::uint16_t sport = be16(tcp), dport = be16(tcp + 2);
    if (ip_total < ihl + thl || l2 + ip_total > caplen) continue;
    const std::size_t payload = ip_total - ihl - thl;
    const bool syn = (tcp[13] & 0x02) != 0;
    const std::uint32_t seq = be32(tcp + 4);
    const bool to_server = dport == server_port;
    if (!to_server && sport != server_port) continue;
    const std::string src = endpoint(ip + 12, sport), dst = endpoint(ip + 16, dport);
    const Key key = to_server ? Key{src, dst} : Key{dst, src};
    if (!conns.count(key)) order.push_back(key);
    auto& c = conns[key];
    (to_server ? c.first : c.second).add(seq, syn, tcp + thl, payload);
  }
  for (const Key& k : order) {
    auto& c = conns[k];
    out.push_back({std::get<0>(k), std::get<1>(k), std::move(c.first.bytes), std::move(c.second.bytes)});
  }
  return true;
}

}  // namespace siphon::testing
