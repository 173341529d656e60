#ifndef SLEEPPROXY_CNETSUPPORT_H
#define SLEEPPROXY_CNETSUPPORT_H

// Thin wrappers around the socket calls Swift cannot make directly: recvmsg and sendmsg with IP_PKTINFO /
// IPV6_PKTINFO control messages (the CMSG_* macros are not importable). Every function returns a negative errno
// on failure, so the Swift side builds its own error text.

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SP_SWIFT_NAME(name) __attribute__((swift_name(#name)))

/// The step of sp_udp_open that failed.
typedef enum __attribute__((enum_extensibility(closed))) sp_udp_open_step {
    SP_UDP_OPEN_STEP_NONE SP_SWIFT_NAME(noFailure) = 0,
    /// socket(2).
    SP_UDP_OPEN_STEP_SOCKET SP_SWIFT_NAME(socket),
    /// setsockopt SO_REUSEADDR.
    SP_UDP_OPEN_STEP_REUSE_ADDRESS SP_SWIFT_NAME(reuseAddress),
    /// setsockopt IPV6_V6ONLY.
    SP_UDP_OPEN_STEP_V6_ONLY SP_SWIFT_NAME(v6Only),
    /// setsockopt SO_BINDTODEVICE (also: the name is empty or longer than IFNAMSIZ - 1 bytes, -EINVAL).
    SP_UDP_OPEN_STEP_BIND_TO_DEVICE SP_SWIFT_NAME(bindToDevice),
    /// setsockopt IP_PKTINFO / IPV6_RECVPKTINFO.
    SP_UDP_OPEN_STEP_PACKET_INFO SP_SWIFT_NAME(packetInfo),
    /// bind(2).
    SP_UDP_OPEN_STEP_BIND SP_SWIFT_NAME(bind),
    /// getsockname(2).
    SP_UDP_OPEN_STEP_LOCAL_NAME SP_SWIFT_NAME(localName),
    /// The family is neither AF_INET nor AF_INET6 (-EAFNOSUPPORT).
    SP_UDP_OPEN_STEP_FAMILY SP_SWIFT_NAME(family),
} sp_udp_open_step;

/// Opens a UDP socket of `family` (AF_INET or AF_INET6): non-blocking, close-on-exec, SO_REUSEADDR, IPV6_V6ONLY
/// for AF_INET6, bound to the interface `interface` with SO_BINDTODEVICE, receiving packet info, and bound to the
/// wildcard address and `port` (0: an ephemeral port).
///
/// Returns the descriptor and stores the bound port (host order) in `bound_port`; on failure returns -errno,
/// stores the failed step in `failed_step` and leaves nothing open.
int sp_udp_open(int family, const char *interface, uint16_t port, uint16_t *bound_port,
                sp_udp_open_step *failed_step);

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

/// Wall-clock time (CLOCK_REALTIME) in nanoseconds since the Unix epoch.
int64_t sp_wall_clock_ns(void);

/// Writes `ns` (nanoseconds since the epoch) as UTC `YYYY-MM-DDTHH:MM:SS.mmmZ` into `buffer` (at least 25 bytes);
/// returns the length written, or 0 if it did not fit.
size_t sp_format_utc(int64_t ns, char *buffer, size_t size);

#endif
