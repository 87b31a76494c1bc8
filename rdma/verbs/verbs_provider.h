// The hardware provider: rdma/provider.h over rdma-core (libibverbs and
// librdmacm), for real NICs and the kernel's Soft-RoCE (rxe). See
// docs/rdma-verbs.md.
//
// This header does not include rdma-core headers; only the .cc files of
// rdma/verbs do. Besides the factory it declares the provider's pure,
// device-free logic so that it can be tested on hosts without RDMA:
//   - RoCE v2 GID selection and path derivation (MTU, traffic class, SL) from
//     the ms_async_rdma_* options (VerbsPathOptions);
//   - the message for a device that cannot be opened;
//   - the mappings from rdma-core's numeric values (work-completion status and
//     opcode, errno of a post, rdma_cm event type and status) into provider.h
//     and the siphon error category. The numeric values are rdma-core's ABI
//     (enum ibv_wc_status, enum rdma_cm_event_type, ...), which never changes.
//
// Nothing here aborts or throws on anything the environment controls: no
// device, no rdma_cm, bad options and bad addresses are returned as errors
// that name the cause and the remedy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "msgr/base/address.h"
#include "rdma/provider.h"

namespace siphon::rdma::verbs {

// ------------------------------------------------------------------ options

// How the path of an RC connection is chosen (names are Ceph's options;
// ms_async_rdma_path_mtu is a Siphon extension). Built by compat/ from the
// configuration; validate() says what is wrong with a value.
struct VerbsPathOptions {
  // ms_async_rdma_gid_idx: pin the source GID by index. -1 (Siphon's default)
  // selects automatically; Ceph's default of 0 is usually a RoCE v1 or
  // link-local entry, so compat/ passes -1 unless the option is set.
  int gid_index = -1;
  // ms_async_rdma_local_gid: pin the source GID by value ("fe80::1",
  // "::ffff:192.0.2.1", Ceph's "0000:0000:...:c000:0201", or a dotted IPv4
  // address meaning its IPv4-mapped GID). Empty selects automatically.
  std::string local_gid;
  // ms_async_rdma_dscp: the DSCP (0-63); the traffic class is dscp << 2.
  // Default 24 gives traffic class 96, the value Ceph writes by default.
  int dscp = 24;
  // ms_async_rdma_sl: service level (RoCE: the 802.1p priority, 0-7; IB 0-15).
  int sl = 3;
  // ms_async_rdma_path_mtu: upper bound for the path MTU in bytes (256, 512,
  // 1024, 2048 or 4096); 0 uses the port's active MTU.
  std::uint32_t max_path_mtu = 0;
  // GRH hop limit for routed RoCE v2 (1-255).
  int hop_limit = 64;
};

// Checks every option's range and syntax. On error `why` names the option,
// the value and the accepted values.
std::error_code validate(const VerbsPathOptions& options, std::string& why);

// ------------------------------------------------------- GID selection

// What GID selection looks at: one port's GID table and the local IP
// address the connection uses.
struct GidQuery {
  std::string_view device;  // for messages: "rxe0"
  std::uint8_t port = 1;
  LinkLayer link_layer = LinkLayer::ethernet;
  std::span<const GidEntry> gids;  // the port's valid entries (Device::query_gids)
  std::uint32_t gid_tbl_len = 0;   // slots in the port's table (PortAttr); 0 = unknown
  NetAddress local;                // the local address in use; unspecified or any allowed
  std::string_view local_netdev;   // interface that owns `local` ("" = unknown)
};

struct GidSelection {
  GidEntry entry;
  std::string how;                    // how it was chosen, for logs
  std::vector<std::string> warnings;  // accepted, but worth a log line
};

// Chooses the source GID (docs/rdma-verbs.md "GID selection"):
//   pinned   ms_async_rdma_gid_idx and/or ms_async_rdma_local_gid, validated
//            (index out of range, GID not in the table, or the two disagreeing
//            are errors);
//   auto     the RoCE v2 entry whose GID is the local address (IPv4-mapped
//            for IPv4), preferring the entry on `local_netdev`; with no local
//            address, the first RoCE v2 IPv4, then global IPv6, then
//            link-local entry; on InfiniBand ports the port GID.
// Errors: errc::config_error (a pinned value is wrong), errc::address_invalid
// (no RoCE v2 GID for the address), errc::not_supported (no usable GID).
std::error_code select_gid(const GidQuery& query, const VerbsPathOptions& options,
                           GidSelection& out, std::string& why);

// ---------------------------------------------------------------- paths

// Everything a QP needs for its path, derived once per local address.
struct VerbsPath {
  std::uint8_t port_num = 1;
  GidEntry sgid;
  Mtu path_mtu = Mtu::mtu1024;     // min(active MTU, ms_async_rdma_path_mtu)
  std::uint8_t traffic_class = 0;  // DSCP << 2
  std::uint8_t sl = 0;
  std::uint8_t hop_limit = 64;
  std::string device;              // "rxe0"
  std::string how;                 // GidSelection::how: auto (and why) or pinned (by what)
  std::string description;         // "rxe0 port 1 GID[1] ::ffff:192.0.2.1 RoCE v2 ..."
  std::vector<std::string> warnings;

  // The address vector towards `dgid` (the peer's GID from the handshake).
  AddressVector address_vector(const Gid& dgid, std::uint32_t flow_label = 0) const noexcept;
};

// Pure: the path for a port with attributes `port` (state must be ACTIVE).
std::error_code derive_path(const GidQuery& query, const PortAttr& port,
                            const VerbsPathOptions& options, VerbsPath& out, std::string& why);

// The same against an open device of any provider: queries the port and its
// GIDs and finds the interface that owns `local`.
std::error_code resolve_path(const Device& device, std::uint8_t port, const NetAddress& local,
                             const VerbsPathOptions& options, VerbsPath& out, std::string& why);

// ------------------------------------------------- selection from facts
// The pure choices of the provider over plain data, so that siphon-doctor
// makes them over facts read from a sysfs tree with the same code
// (tools/doctor, docs/doctor.md).

// The device choice is rdma::choose_device (rdma/provider.h), shared with
// the RDMA stack.
using rdma::choose_device;

// What path selection knows of one port.
struct PortFacts {
  std::string device;  // "rxe0"
  std::uint8_t port = 1;
  PortAttr attr;
  std::vector<GidEntry> gids;  // valid entries, by index
};

// derive_path() over `facts` for the local address `local`, owned by the
// interface `local_netdev` ("" = unknown or no address).
std::error_code path_from_facts(const PortFacts& facts, const NetAddress& local, std::string_view local_netdev,
                                const VerbsPathOptions& options, VerbsPath& out, std::string& why);

// ------------------------------------------- rdma-cm connections (per QP)

// The path attributes of an RC QP connected through rdma-cm: what
// rdma_init_qp_attr proposes for RTR, or what a QP carries (query_qp_path).
struct CmPathAttr {
  std::uint32_t sgid_index = 0;
  std::uint8_t sl = 0;
  Mtu path_mtu = Mtu::mtu1024;
  std::uint8_t traffic_class = 0;  // the TOS byte (CmId::set_qos / ms_async_rdma_dscp)
  std::uint8_t hop_limit = 0;
};

// What the verbs provider applies to every rdma-cm connection's QP at RTR
// (docs/rdma-verbs.md "What is applied per connection"): the source GID
// index and the SL of `path` (the selection: auto or pinned), the path MTU
// min(rdma-cm's, path.path_mtu), and rdma-cm's traffic class (the id's TOS)
// and hop limit unchanged.
CmPathAttr apply_selected_path(const CmPathAttr& proposed, const VerbsPath& path) noexcept;

// One line for logs: "rxe0 port 1 GID[1] ::ffff:192.0.2.1 RoCE v2 (the RoCE
// v2 GID of the local address ...), path MTU 1024 (rdma-cm 4096, selection
// 1024), SL 3, traffic class 96; rdma-cm proposed GID[1] SL 0".
std::string describe_applied(const CmPathAttr& proposed, const CmPathAttr& applied,
                             const VerbsPath& path);

// What a verbs QP reports (ibv_query_qp): state, destination and path.
struct QpPathInfo {
  QpState state = QpState::reset;
  std::uint32_t dest_qp_num = 0;
  Gid dgid{};
  CmPathAttr path;
};
// errc::invalid_argument for a QP of another provider; the errno of
// ibv_query_qp otherwise. For tests and diagnostics.
std::error_code query_qp_path(const QueuePair& qp, QpPathInfo& out);

// What the provider did for an rdma-cm id's connection (after connect's
// CONNECT_RESPONSE on the active side, after accept on the passive side):
// rdma-cm's proposal, what was applied, and the selection's description.
// False when the id has no such connection yet or is not a verbs id.
struct CmPathReport {
  CmPathAttr proposed;
  CmPathAttr applied;
  std::string description;
};
bool applied_path(const CmId& id, CmPathReport& out);

// ---------------------------------------------------------------- helpers

// The GID of an IP address: ::ffff:a.b.c.d for IPv4, the address for IPv6.
// Unspecified addresses give the zero GID.
Gid gid_of(const NetAddress& address) noexcept;
// Parses IPv6 notation (any form inet_pton accepts, including Ceph's eight
// groups of four digits) or a dotted IPv4 address (its IPv4-mapped GID).
std::optional<Gid> parse_gid(std::string_view text);
// "::ffff:192.0.2.1", "fe80::c86:96ff:fef7:9a0e" (inet_ntop form).
std::string format_gid(const Gid& gid);
// "IB", "RoCE v1", "RoCE v2".
std::string_view to_string(GidType type) noexcept;
// "0: fe80::1 RoCE v2 eth0, 1: ..." (at most `limit` entries, then "... N more").
std::string describe_gids(std::span<const GidEntry> gids, std::size_t limit = 16);

std::optional<Mtu> mtu_from_bytes(std::uint32_t bytes) noexcept;
// min(active, cap); cap 0 means no cap. `cap` must be a valid MTU or 0.
Mtu cap_mtu(Mtu active, std::uint32_t cap_bytes) noexcept;

// The interface that owns `address` (getifaddrs), "" when none does.
std::string netdev_for_address(const NetAddress& address);
// The local address the kernel's routing would use towards `peer` (a UDP
// connect, no packet sent). nullopt when there is no route.
std::optional<NetAddress> source_address_for(const NetAddress& peer);

// ------------------------------------------------------ device opening

// The message for a failed Provider::open_device(name): cause, the devices
// present, and the remedy, e.g.
//   RDMA device 'mlx5_0' not found (devices present: none): set
//   ms_async_rdma_device_name = soft0 to use the software fabric, or load a
//   driver (rdma link add rxe0 type rxe netdev eth0 for Soft-RoCE)
std::string describe_open_failure(std::string_view name, std::span<const std::string> found_devices,
                                  std::error_code ec);

// -------------------------------------------- mappings of rdma-core values

// enum ibv_wc_status -> WcStatus (every value; unknown ones are general_error).
WcStatus wc_status_from_ibv(int ibv_wc_status) noexcept;
// libibverbs' own name of a status (ibv_wc_status_str), for logs and tests.
std::string_view ibv_wc_status_name(int ibv_wc_status) noexcept;
// enum ibv_wc_opcode -> WcOpcode (receive-side values by the IBV_WC_RECV bit).
WcOpcode wc_opcode_from_ibv(int ibv_wc_opcode) noexcept;
// The errno a post (ibv_post_send/recv/srq_recv) returned -> siphon error:
// ENOMEM is a full queue (errc::queue_full), EINVAL a bad work request.
std::error_code post_error(int err) noexcept;
// Siphon's QpAttrMask -> enum ibv_qp_attr_mask bits.
int ibv_qp_attr_mask(std::uint32_t mask) noexcept;
// Siphon's Access bits -> enum ibv_access_flags; nullopt for unknown bits or
// remote write without local write (verbs rejects that combination).
std::optional<int> ibv_access(std::uint32_t access) noexcept;
// The IB state table (C10-9): may a QP go from `from` to `to`?
bool is_valid_transition(QpState from, QpState to) noexcept;

// A port number the device can answer for: 1..phys_port_cnt (a device that
// reports no ports has none), else invalid_argument. Checked before any
// command goes to the device, so the answer never depends on a response.
std::error_code check_port_number(std::uint8_t port, std::uint8_t phys_port_cnt) noexcept;
// ibv_query_port's answer in rdma-core's numbering (enum ibv_port_state,
// enum ibv_mtu, IBV_LINK_LAYER_*).
struct RawPortAnswer {
  int state = 0;
  int max_mtu = 0;
  int active_mtu = 0;
  int link_layer = 0;
  int gid_tbl_len = 0;
};
// Why an answer is one no device gives (an undefined state or NOP, an MTU
// outside 256..4096, an unknown link layer, an empty GID table), or nullptr
// when it is plausible. rdma-core copies the kernel's response into the
// caller's struct from its own stack buffer, so a device (or a fake one)
// that never wrote its response leaves indeterminate values behind; the
// provider refuses such an answer (errc::io_error) instead of acting on it.
const char* port_answer_problem(const RawPortAnswer& a) noexcept;

// enum rdma_cm_event_type -> CmEventType; nullopt for events the seam does
// not carry (multicast join/error, address change, connect response), which
// the provider handles itself.
std::optional<CmEventType> cm_event_from_rdma(int rdma_cm_event_type) noexcept;
// librdmacm's own name of an event type (rdma_event_str), for logs and tests.
std::string_view rdma_cm_event_name(int rdma_cm_event_type) noexcept;
// The error of an rdma_cm event's status (negative errno, or an IB CM reject
// reason for REJECTED); empty for status 0 on non-error events.
std::error_code cm_event_error(CmEventType type, int status) noexcept;

// Private data limits of rdma_cm over IB/RoCE with IP addressing (the CM
// message fields minus rdma_cm's own header): connect 56, accept 196,
// reject 148 bytes. The receiver sees the whole field, zero-padded.
enum class CmPrivateData : std::uint8_t { connect, accept, reject };
std::size_t max_private_data(CmPrivateData use) noexcept;

// ------------------------------------------------------------- factory

// The verbs provider. Never fails: with no devices or no rdma_cm the
// provider exists, lists no devices and returns errors from open_device and
// create_event_channel.
std::unique_ptr<Provider> make_provider();
// The same with `options`: `options.dscp` is the type of service of every
// rdma_cm id until CmId::set_qos changes it, and every rdma_cm connection's
// QP gets the source GID (auto-selected or pinned), SL and path MTU cap of
// `options` (apply_selected_path). errc::config_error (and nullptr) when
// `options` are invalid.
std::unique_ptr<Provider> make_provider(const VerbsPathOptions& options, std::error_code& ec);

}  // namespace siphon::rdma::verbs
