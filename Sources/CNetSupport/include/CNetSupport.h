#ifndef SLEEPPROXY_CNETSUPPORT_H
#define SLEEPPROXY_CNETSUPPORT_H

// Thin wrappers around the socket calls Swift cannot make directly: recvmsg and sendmsg with IP_PKTINFO /
// IPV6_PKTINFO control messages (the CMSG_* macros are not importable). Every function returns a negative errno
// on failure, so the Swift side builds its own error text.

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SP_SWIFT_NAME(name) __attribute__((swift_name(#name)))

/// How sp_udp_socket opens a socket.
typedef struct sp_udp_options {
    /// AF_INET or AF_INET6; an AF_INET6 socket is IPv6-only (IPV6_V6ONLY).
    int family;
    /// The interface the socket is bound to with SO_BINDTODEVICE: 1 to IFNAMSIZ - 1 bytes, NUL-terminated.
    const char *interface_name;
    /// The same interface's index: the scope of an IPv6 group, where the group is joined and multicast sent.
    /// Needed with `group` only.
    uint32_t interface_index;
    /// NULL: bind to the wildcard address. Otherwise a multicast group, 4 or 16 bytes by `family`: bind to it
    /// (IPv6 with `interface_index` as scope) and join it on `interface_index`; multicast leaves through that
    /// interface and is looped back to local listeners, and IP_MULTICAST_ALL / IPV6_MULTICAST_ALL are off, so only
    /// the group joined on this interface is delivered.
    const uint8_t *group;
    /// Host order; 0: an ephemeral port.
    uint16_t port;
    /// Non-zero: SO_REUSEPORT besides SO_REUSEADDR, both set before binding, to share the port with another
    /// process that sets both.
    int share_port;
    /// 1 to 255: the TTL / hop limit of everything sent, unicast (IP_TTL / IPV6_UNICAST_HOPS) and multicast
    /// (IP_MULTICAST_TTL / IPV6_MULTICAST_HOPS); 0: the system's defaults.
    int hop_limit;
} sp_udp_options;

/// The step of sp_udp_socket that failed.
typedef enum __attribute__((enum_extensibility(closed))) sp_udp_step {
    SP_UDP_STEP_NONE SP_SWIFT_NAME(noFailure) = 0,
    /// The options: the family is neither AF_INET nor AF_INET6 (-EAFNOSUPPORT), a group comes without an interface
    /// index (-ENODEV), the hop limit is above 255 (-EINVAL).
    SP_UDP_STEP_ARGUMENTS SP_SWIFT_NAME(arguments),
    /// socket(2).
    SP_UDP_STEP_SOCKET SP_SWIFT_NAME(socket),
    /// setsockopt SO_REUSEADDR.
    SP_UDP_STEP_REUSE_ADDRESS SP_SWIFT_NAME(reuseAddress),
    /// setsockopt SO_REUSEPORT.
    SP_UDP_STEP_REUSE_PORT SP_SWIFT_NAME(reusePort),
    /// setsockopt IPV6_V6ONLY.
    SP_UDP_STEP_V6_ONLY SP_SWIFT_NAME(v6Only),
    /// setsockopt SO_BINDTODEVICE (also: the name is empty or longer than IFNAMSIZ - 1 bytes, -EINVAL).
    SP_UDP_STEP_BIND_TO_DEVICE SP_SWIFT_NAME(bindToDevice),
    /// setsockopt IP_PKTINFO / IPV6_RECVPKTINFO.
    SP_UDP_STEP_PACKET_INFO SP_SWIFT_NAME(packetInfo),
    /// setsockopt IP_MULTICAST_ALL / IPV6_MULTICAST_ALL (off).
    SP_UDP_STEP_MULTICAST_ALL SP_SWIFT_NAME(multicastAll),
    /// setsockopt IP_MULTICAST_IF / IPV6_MULTICAST_IF.
    SP_UDP_STEP_MULTICAST_INTERFACE SP_SWIFT_NAME(multicastInterface),
    /// setsockopt IP_MULTICAST_LOOP / IPV6_MULTICAST_LOOP.
    SP_UDP_STEP_MULTICAST_LOOP SP_SWIFT_NAME(multicastLoop),
    /// setsockopt IP_MULTICAST_TTL / IPV6_MULTICAST_HOPS.
    SP_UDP_STEP_MULTICAST_TTL SP_SWIFT_NAME(multicastTTL),
    /// setsockopt IP_TTL / IPV6_UNICAST_HOPS.
    SP_UDP_STEP_UNICAST_TTL SP_SWIFT_NAME(unicastTTL),
    /// bind(2).
    SP_UDP_STEP_BIND SP_SWIFT_NAME(bind),
    /// setsockopt IP_ADD_MEMBERSHIP / IPV6_JOIN_GROUP.
    SP_UDP_STEP_JOIN SP_SWIFT_NAME(join),
    /// getsockname(2).
    SP_UDP_STEP_LOCAL_NAME SP_SWIFT_NAME(localName),
} sp_udp_step;

/// Opens a UDP socket as `options` say: non-blocking, close-on-exec, SO_REUSEADDR, bound to one interface with
/// SO_BINDTODEVICE, receiving packet info, bound to the wildcard address or a group and `options->port`.
///
/// Returns the descriptor and stores the bound port (host order) in `bound_port`; on failure returns -errno,
/// stores the failed step in `failed_step` and leaves nothing open.
int sp_udp_socket(const sp_udp_options *options, uint16_t *bound_port, sp_udp_step *failed_step);

/// Attaches a socket filter that accepts nothing, so that the kernel drops every datagram arriving at `fd`
/// before it is queued: for a socket that only sends, or only holds a port, and is never read. Returns 0, or
/// -errno.
int sp_discard_input(int fd);

/// A UDP socket of `family` (AF_INET or AF_INET6, IPv6 only) bound to the wildcard address and `port`, that
/// receives nothing: SO_REUSEADDR, IP_MULTICAST_ALL / IPV6_MULTICAST_ALL off, and a filter that accepts nothing.
/// Holds a port. Returns the descriptor, or -errno (the port is taken: -EADDRINUSE).
int sp_hold_udp_port(int family, uint16_t port);

/// What sp_udp_receive learnt about one datagram besides its payload.
typedef struct sp_udp_datagram_info {
    /// The datagram's full payload length; more than the bytes stored when `truncated` is set.
    size_t wire_length;
    /// Non-zero if the datagram did not fit the buffer (MSG_TRUNC).
    int truncated;
    /// AF_INET or AF_INET6.
    int source_family;
    /// 4 (IPv4) or 16 (IPv6) bytes in network order.
    uint8_t source_address[16];
    /// Host order.
    uint16_t source_port;
    /// sin6_scope_id: the interface index for a link-local IPv6 source, 0 otherwise.
    uint32_t source_scope_id;
    /// AF_INET or AF_INET6 from the packet-info control message; 0 if none arrived.
    int destination_family;
    /// The destination address of the packet's IP header (ipi_addr / ipi6_addr).
    uint8_t destination_address[16];
    /// The interface the datagram arrived on (ipi_ifindex / ipi6_ifindex).
    uint32_t interface_index;
} sp_udp_datagram_info;

/// Receives one datagram without blocking. Stores up to `capacity` payload bytes in `buffer` and the rest of
/// what is known in `info`. Returns the number of bytes stored, or -errno (-EAGAIN: nothing pending).
ssize_t sp_udp_receive(int fd, uint8_t *buffer, size_t capacity, sp_udp_datagram_info *info);

/// Sends `length` bytes to `destination_address` (4 or 16 bytes by `family`) and `destination_port` (host
/// order), with `destination_scope_id` as sin6_scope_id for IPv6. A packet-info control message sets the source
/// address (`source_address`, same family; ipi_spec_dst / ipi6_addr) and the outgoing interface
/// (`interface_index`; 0 lets the kernel choose). `source_address` may be NULL to let the kernel choose.
///
/// Returns the number of bytes sent, or -errno.
ssize_t sp_udp_send(int fd, int family, const uint8_t *bytes, size_t length, const uint8_t *destination_address,
                    uint16_t destination_port, uint32_t destination_scope_id, const uint8_t *source_address,
                    uint32_t interface_index);

/// One datagram of a batch for sp_udp_send_batch: what sp_udp_send takes, for one datagram.
typedef struct sp_udp_outgoing {
    const uint8_t *bytes;
    size_t length;
    uint8_t destination_address[16];
    /// Host order.
    uint16_t destination_port;
    uint32_t destination_scope_id;
    /// Non-zero: `source_address` is the source to use; zero lets the kernel choose.
    int has_source;
    uint8_t source_address[16];
    uint32_t interface_index;
} sp_udp_outgoing;

/// The most datagrams sp_udp_send_batch takes at once.
#define SP_UDP_BATCH 64

/// Sends `count` (at most SP_UDP_BATCH) datagrams of one `family` with as few sendmmsg calls as the kernel
/// allows, each as sp_udp_send would. `errors[i]` becomes 0 if datagram i went out, or its -errno (a datagram the
/// kernel refuses is skipped, and the rest are still sent). Returns how many went out.
size_t sp_udp_send_batch(int fd, int family, const sp_udp_outgoing *datagrams, size_t count, int *errors);

/// Wall-clock time (CLOCK_REALTIME) in nanoseconds since the Unix epoch.
int64_t sp_wall_clock_ns(void);

/// Time since boot, suspended time included (CLOCK_BOOTTIME), in nanoseconds: never steps.
int64_t sp_boot_clock_ns(void);

/// Writes `ns` (nanoseconds since the epoch) as UTC `YYYY-MM-DDTHH:MM:SS.mmmZ` into `buffer` (at least 25 bytes);
/// returns the length written, or 0 if it did not fit.
size_t sp_format_utc(int64_t ns, char *buffer, size_t size);

// MARK: Neighbour table (rtnetlink)

/// The step of sp_netlink_route_open that failed.
typedef enum __attribute__((enum_extensibility(closed))) sp_netlink_open_step {
    SP_NETLINK_OPEN_STEP_NONE SP_SWIFT_NAME(noFailure) = 0,
    /// socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE).
    SP_NETLINK_OPEN_STEP_SOCKET SP_SWIFT_NAME(socket),
    /// setsockopt SO_RCVTIMEO.
    SP_NETLINK_OPEN_STEP_RECEIVE_TIMEOUT SP_SWIFT_NAME(receiveTimeout),
    /// bind(2) to a kernel-chosen port id.
    SP_NETLINK_OPEN_STEP_BIND SP_SWIFT_NAME(bind),
    /// getsockname(2), to learn the port id.
    SP_NETLINK_OPEN_STEP_LOCAL_NAME SP_SWIFT_NAME(localName),
} sp_netlink_open_step;

/// Opens a NETLINK_ROUTE socket for requests: blocking with a receive timeout of `timeout_ms` milliseconds,
/// close-on-exec, bound to a port id the kernel chooses (stored in `port_id`), in no multicast group. Extended
/// ACKs (NETLINK_EXT_ACK, for the kernel's error text) and capped ACKs (NETLINK_CAP_ACK) are asked for where the
/// kernel knows them; their absence is not an error.
///
/// Returns the descriptor; on failure returns -errno, stores the failed step in `failed_step` and leaves nothing
/// open.
int sp_netlink_route_open(uint32_t timeout_ms, uint32_t *port_id, sp_netlink_open_step *failed_step);

/// Where sp_neighbour_change failed.
typedef enum __attribute__((enum_extensibility(closed))) sp_netlink_stage {
    SP_NETLINK_STAGE_NONE SP_SWIFT_NAME(noFailure) = 0,
    /// The arguments: family neither AF_INET nor AF_INET6 (-EAFNOSUPPORT), interface index 0 or above INT32_MAX
    /// (-ENODEV).
    SP_NETLINK_STAGE_ARGUMENTS SP_SWIFT_NAME(arguments),
    /// sendmsg(2) of the request.
    SP_NETLINK_STAGE_SEND SP_SWIFT_NAME(send),
    /// recv(2) of the answer (-EAGAIN: no answer within the socket's timeout).
    SP_NETLINK_STAGE_RECEIVE SP_SWIFT_NAME(receive),
    /// The kernel answered with an error (NLMSG_ERROR with a non-zero code).
    SP_NETLINK_STAGE_KERNEL SP_SWIFT_NAME(kernel),
} sp_netlink_stage;

/// Sends one neighbour request on the NETLINK_ROUTE socket `fd` and waits for the kernel's ACK:
/// RTM_NEWNEIGH with NLM_F_CREATE | NLM_F_REPLACE, `state` (NUD_*) and NDA_LLADDR = `link_address` (6 bytes),
/// or, with `remove` non-zero, RTM_DELNEIGH (`link_address` and `state` unused). The entry is `address` (4 or 16
/// bytes by `family`, AF_INET or AF_INET6) on `interface_index`. `sequence` numbers the request; answers with
/// another sequence number (late answers to earlier requests) are skipped.
///
/// Returns 0 when the kernel acknowledged the request, or -errno; stores where it failed in `stage` and the
/// kernel's extended-ACK text, if it sent one, NUL-terminated in `kernel_message` (`kernel_message_size` bytes,
/// may be 0).
int sp_neighbour_change(int fd, uint32_t port_id, uint32_t sequence, int remove, int family,
                        uint32_t interface_index, const uint8_t *address, const uint8_t *link_address,
                        uint16_t state, sp_netlink_stage *stage, char *kernel_message, size_t kernel_message_size);

/// NUD_PERMANENT, for Swift (the kernel header's macros are not imported).
extern const uint16_t sp_nud_permanent;

// MARK: Link-layer multicast membership

/// Opens a packet socket bound to no protocol, which therefore receives nothing: a holder of
/// PACKET_ADD_MEMBERSHIP memberships. Non-blocking, close-on-exec. Returns the descriptor or -errno.
int sp_link_membership_socket(void);

/// Adds (`add` non-zero, PACKET_ADD_MEMBERSHIP) or drops (PACKET_DROP_MEMBERSHIP) the link-layer multicast
/// address `mac` (6 bytes, PACKET_MR_MULTICAST) on `interface_index` through socket `fd`. Returns 0 or -errno.
int sp_link_membership_change(int fd, int add, const uint8_t *mac, uint32_t interface_index);

// MARK: Wake-on-LAN

/// The Wake-on-LAN modes of `interface_name` (SIOCETHTOOL, ETHTOOL_GWOL): `supported` and `enabled` are WAKE_*
/// bit sets (WAKE_MAGIC = 1 << 5 is ethtool's `g`). Returns 0 or -errno (-EOPNOTSUPP: the driver has no
/// Wake-on-LAN, as with veth, bridges and most virtual NICs; -ENODEV: no such interface).
int sp_wake_on_lan_get(const char *interface_name, uint32_t *supported, uint32_t *enabled);

/// Sets the Wake-on-LAN modes of `interface_name` to `enabled` (ETHTOOL_SWOL), which needs CAP_NET_ADMIN.
/// Returns 0 or -errno.
int sp_wake_on_lan_set(const char *interface_name, uint32_t enabled);

/// The name of the driver behind `interface_name` (SIOCETHTOOL, ETHTOOL_GDRVINFO), as `ethtool -i` prints it:
/// "veth", "bridge", "macvlan", "e1000e"... Written to `driver` (NUL-terminated, cut to `capacity`). Needs no
/// capability. Returns 0 or -errno (-ENODEV: no such interface; -EOPNOTSUPP: the driver does not say).
int sp_interface_driver(const char *interface_name, char *driver, size_t capacity);

// MARK: Capabilities

/// Adds the capabilities of `wanted` (a bit set, bit N being capability N of linux/capability.h) that the
/// process has in its permitted set to its effective set (capget, capset). A program given file capabilities
/// without the effective bit (`setcap cap_net_raw=p`) starts with them permitted but not in force, and raises
/// them itself. Returns the effective set afterwards (its low 64 bits), or -errno as a negative number.
int64_t sp_raise_effective_capabilities(uint64_t wanted);

// MARK: Whole frames

/// Sends `count` Ethernet frames (header included) out of interface `interface_index` through one AF_PACKET
/// socket that receives nothing, which needs CAP_NET_RAW. The frames lie back to back in `bytes`, frame i being
/// `lengths[i]` bytes long. Returns how many went out; -errno when none did (the socket could not be opened, or
/// every send failed: the first one's error).
int sp_send_frames(uint32_t interface_index, const uint8_t *bytes, const size_t *lengths, size_t count);

// MARK: The allocator

/// Limits glibc's allocator to `arenas` arenas (mallopt M_ARENA_MAX); arenas already made stay. Returns 0, or -1
/// if the allocator refused.
int sp_limit_allocator_arenas(int arenas);

/// Gives the allocator's free memory back to the system (malloc_trim(0): the top of each arena and the whole
/// free pages inside it). Returns 1 if some went back, 0 if none.
int sp_return_free_memory(void);

/// What the allocator holds (mallinfo2, summed over its arenas): `in_use`, the bytes of the chunks allocated now,
/// and `held`, the bytes it took from the system for them (its arenas' heaps and the chunks mapped on their own),
/// in use or kept free.
void sp_allocator_figures(size_t *in_use, size_t *held);

#endif
