// in6_pktinfo and IPV6_RECVPKTINFO are GNU extensions in glibc's <netinet/in.h>.
#define _GNU_SOURCE 1

#include "CNetSupport.h"

#include <stdio.h>
#include <time.h>

#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <linux/filter.h>
#include <sys/socket.h>
#include <unistd.h>

ssize_t sp_udp_receive(int fd, uint8_t *buffer, size_t capacity, sp_udp_datagram_info *info) {
    memset(info, 0, sizeof *info);

    struct sockaddr_storage source;
    memset(&source, 0, sizeof source);
    struct iovec vector = {.iov_base = buffer, .iov_len = capacity};
    // Room for one packet-info message of either family, aligned as cmsghdr wants.
    union {
        char bytes[CMSG_SPACE(sizeof(struct in_pktinfo)) + CMSG_SPACE(sizeof(struct in6_pktinfo))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    struct msghdr message = {
        .msg_name = &source,
        .msg_namelen = sizeof source,
        .msg_iov = &vector,
        .msg_iovlen = 1,
        .msg_control = control.bytes,
        .msg_controllen = sizeof control.bytes,
    };

    // MSG_TRUNC makes a UDP recvmsg return the datagram's real length even when the buffer is shorter.
    ssize_t result;
    do {
        result = recvmsg(fd, &message, MSG_DONTWAIT | MSG_TRUNC);
    } while (result < 0 && errno == EINTR);
    if (result < 0) {
        return -errno;
    }

    info->wire_length = (size_t)result;
    info->truncated = (message.msg_flags & MSG_TRUNC) != 0 || (size_t)result > capacity;

    if (source.ss_family == AF_INET) {
        struct sockaddr_in *address = (struct sockaddr_in *)&source;
        info->source_family = AF_INET;
        memcpy(info->source_address, &address->sin_addr, 4);
        info->source_port = ntohs(address->sin_port);
    } else if (source.ss_family == AF_INET6) {
        struct sockaddr_in6 *address = (struct sockaddr_in6 *)&source;
        info->source_family = AF_INET6;
        memcpy(info->source_address, &address->sin6_addr, 16);
        info->source_port = ntohs(address->sin6_port);
        info->source_scope_id = address->sin6_scope_id;
    }

    for (struct cmsghdr *header = CMSG_FIRSTHDR(&message); header != NULL;
         header = CMSG_NXTHDR(&message, header)) {
        if (header->cmsg_level == IPPROTO_IP && header->cmsg_type == IP_PKTINFO
            && header->cmsg_len >= CMSG_LEN(sizeof(struct in_pktinfo))) {
            struct in_pktinfo packet_info;
            memcpy(&packet_info, CMSG_DATA(header), sizeof packet_info);
            info->destination_family = AF_INET;
            memcpy(info->destination_address, &packet_info.ipi_addr, 4);
            info->interface_index = (uint32_t)packet_info.ipi_ifindex;
        } else if (header->cmsg_level == IPPROTO_IPV6 && header->cmsg_type == IPV6_PKTINFO
                   && header->cmsg_len >= CMSG_LEN(sizeof(struct in6_pktinfo))) {
            struct in6_pktinfo packet_info;
            memcpy(&packet_info, CMSG_DATA(header), sizeof packet_info);
            info->destination_family = AF_INET6;
            memcpy(info->destination_address, &packet_info.ipi6_addr, 16);
            info->interface_index = packet_info.ipi6_ifindex;
        }
    }

    return (size_t)result > capacity ? (ssize_t)capacity : result;
}

/// Room for one packet-info control message of either family, aligned as cmsghdr wants.
typedef union sp_packet_info_control {
    char bytes[CMSG_SPACE(sizeof(struct in6_pktinfo))];
    struct cmsghdr align;
} sp_packet_info_control;

/// Fills `destination` and `control` for one datagram as sp_udp_send describes; returns the control length, or 0
/// for a family other than AF_INET and AF_INET6.
static size_t sp_prepare_datagram(int family, const uint8_t *destination_address, uint16_t destination_port,
                                  uint32_t destination_scope_id, const uint8_t *source_address,
                                  uint32_t interface_index, struct sockaddr_storage *destination,
                                  socklen_t *destination_length, sp_packet_info_control *control) {
    memset(destination, 0, sizeof *destination);
    memset(control, 0, sizeof *control);
    if (family == AF_INET) {
        struct sockaddr_in *address = (struct sockaddr_in *)destination;
        address->sin_family = AF_INET;
        address->sin_port = htons(destination_port);
        memcpy(&address->sin_addr, destination_address, 4);
        *destination_length = sizeof *address;

        struct in_pktinfo packet_info;
        memset(&packet_info, 0, sizeof packet_info);
        packet_info.ipi_ifindex = (int)interface_index;
        if (source_address != NULL) {
            // ipi_spec_dst is the source address to use; ipi_addr is ignored when sending.
            memcpy(&packet_info.ipi_spec_dst, source_address, 4);
        }
        struct cmsghdr *header = (struct cmsghdr *)control->bytes;
        header->cmsg_level = IPPROTO_IP;
        header->cmsg_type = IP_PKTINFO;
        header->cmsg_len = CMSG_LEN(sizeof packet_info);
        memcpy(CMSG_DATA(header), &packet_info, sizeof packet_info);
        return CMSG_SPACE(sizeof packet_info);
    }
    if (family == AF_INET6) {
        struct sockaddr_in6 *address = (struct sockaddr_in6 *)destination;
        address->sin6_family = AF_INET6;
        address->sin6_port = htons(destination_port);
        memcpy(&address->sin6_addr, destination_address, 16);
        address->sin6_scope_id = destination_scope_id;
        *destination_length = sizeof *address;

        struct in6_pktinfo packet_info;
        memset(&packet_info, 0, sizeof packet_info);
        packet_info.ipi6_ifindex = interface_index;
        if (source_address != NULL) {
            memcpy(&packet_info.ipi6_addr, source_address, 16);
        }
        struct cmsghdr *header = (struct cmsghdr *)control->bytes;
        header->cmsg_level = IPPROTO_IPV6;
        header->cmsg_type = IPV6_PKTINFO;
        header->cmsg_len = CMSG_LEN(sizeof packet_info);
        memcpy(CMSG_DATA(header), &packet_info, sizeof packet_info);
        return CMSG_SPACE(sizeof packet_info);
    }
    return 0;
}

size_t sp_udp_send_batch(int fd, int family, const sp_udp_outgoing *datagrams, size_t count, int *errors) {
    if (count > SP_UDP_BATCH) count = SP_UDP_BATCH;
    struct sockaddr_storage destinations[SP_UDP_BATCH];
    sp_packet_info_control controls[SP_UDP_BATCH];
    struct iovec vectors[SP_UDP_BATCH];
    struct mmsghdr messages[SP_UDP_BATCH];
    for (size_t i = 0; i < count; i++) {
        const sp_udp_outgoing *datagram = &datagrams[i];
        socklen_t destination_length = 0;
        size_t control_length = sp_prepare_datagram(
            family, datagram->destination_address, datagram->destination_port, datagram->destination_scope_id,
            datagram->has_source ? datagram->source_address : NULL, datagram->interface_index, &destinations[i],
            &destination_length, &controls[i]);
        if (control_length == 0) {
            for (size_t j = 0; j < count; j++) errors[j] = -EAFNOSUPPORT;
            return 0;
        }
        vectors[i] = (struct iovec){.iov_base = (void *)datagram->bytes, .iov_len = datagram->length};
        memset(&messages[i], 0, sizeof messages[i]);
        messages[i].msg_hdr = (struct msghdr){
            .msg_name = &destinations[i],
            .msg_namelen = destination_length,
            .msg_iov = &vectors[i],
            .msg_iovlen = 1,
            .msg_control = controls[i].bytes,
            .msg_controllen = control_length,
        };
        errors[i] = 0;
    }
    size_t next = 0;
    size_t sent = 0;
    while (next < count) {
        int result = sendmmsg(fd, &messages[next], (unsigned int)(count - next), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (result > 0) {
            next += (size_t)result;
            sent += (size_t)result;
        } else if (result < 0 && errno == EINTR) {
            continue;
        } else {
            // The first datagram left failed: note it, and go on with the rest.
            errors[next] = result < 0 ? -errno : -EIO;
            next += 1;
        }
    }
    return sent;
}

ssize_t sp_udp_send(int fd, int family, const uint8_t *bytes, size_t length, const uint8_t *destination_address,
                    uint16_t destination_port, uint32_t destination_scope_id, const uint8_t *source_address,
                    uint32_t interface_index) {
    struct sockaddr_storage destination;
    socklen_t destination_length = 0;
    sp_packet_info_control control;
    size_t control_length =
        sp_prepare_datagram(family, destination_address, destination_port, destination_scope_id, source_address,
                            interface_index, &destination, &destination_length, &control);
    if (control_length == 0) return -EAFNOSUPPORT;

    struct iovec vector = {.iov_base = (void *)bytes, .iov_len = length};
    struct msghdr message = {
        .msg_name = &destination,
        .msg_namelen = destination_length,
        .msg_iov = &vector,
        .msg_iovlen = 1,
        .msg_control = control.bytes,
        .msg_controllen = control_length,
    };
    ssize_t result;
    do {
        result = sendmsg(fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL);
    } while (result < 0 && errno == EINTR);
    return result < 0 ? -errno : result;
}

// Older C libraries lack these; the values are the kernel's (linux/in.h, linux/in6.h).
#ifndef IP_MULTICAST_ALL
#define IP_MULTICAST_ALL 49
#endif
#ifndef IPV6_MULTICAST_ALL
#define IPV6_MULTICAST_ALL 29
#endif

static int udp_fail(int fd, sp_udp_step step, sp_udp_step *failed_step) {
    int error = errno;
    if (fd >= 0) {
        close(fd);
    }
    if (failed_step != NULL) {
        *failed_step = step;
    }
    return -error;
}

static int set_flag(int fd, int level, int name, int value) {
    return setsockopt(fd, level, name, &value, sizeof value);
}

int sp_udp_socket(const sp_udp_options *options, uint16_t *bound_port, sp_udp_step *failed_step) {
    if (failed_step != NULL) {
        *failed_step = SP_UDP_STEP_NONE;
    }
    int family = options->family;
    const int v4 = family == AF_INET;
    const uint32_t index = options->interface_index;
    if (family != AF_INET && family != AF_INET6) {
        errno = EAFNOSUPPORT;
        return udp_fail(-1, SP_UDP_STEP_ARGUMENTS, failed_step);
    }
    if (options->group != NULL && (index == 0 || index > INT32_MAX)) {
        errno = ENODEV;
        return udp_fail(-1, SP_UDP_STEP_ARGUMENTS, failed_step);
    }
    if (options->hop_limit < 0 || options->hop_limit > 255) {
        errno = EINVAL;
        return udp_fail(-1, SP_UDP_STEP_ARGUMENTS, failed_step);
    }
    // The kernel silently truncates longer names, and an empty one removes the binding: refuse both.
    const char *name = options->interface_name;
    size_t name_length = name == NULL ? 0 : strnlen(name, IFNAMSIZ);
    if (name_length == 0 || name_length >= IFNAMSIZ) {
        errno = EINVAL;
        return udp_fail(-1, SP_UDP_STEP_BIND_TO_DEVICE, failed_step);
    }

    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
    if (fd < 0) {
        return udp_fail(-1, SP_UDP_STEP_SOCKET, failed_step);
    }
    if (set_flag(fd, SOL_SOCKET, SO_REUSEADDR, 1) != 0) {
        return udp_fail(fd, SP_UDP_STEP_REUSE_ADDRESS, failed_step);
    }
    if (options->share_port && set_flag(fd, SOL_SOCKET, SO_REUSEPORT, 1) != 0) {
        return udp_fail(fd, SP_UDP_STEP_REUSE_PORT, failed_step);
    }
    if (!v4 && set_flag(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1) != 0) {
        return udp_fail(fd, SP_UDP_STEP_V6_ONLY, failed_step);
    }
    // Without a device, a socket bound to a group also gets the group's datagrams from every other interface
    // where anybody on the host joined it; one bound to the wildcard gets every interface's unicast.
    if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, name, (socklen_t)(name_length + 1)) != 0) {
        return udp_fail(fd, SP_UDP_STEP_BIND_TO_DEVICE, failed_step);
    }
    if (set_flag(fd, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_PKTINFO : IPV6_RECVPKTINFO, 1) != 0) {
        return udp_fail(fd, SP_UDP_STEP_PACKET_INFO, failed_step);
    }
    if (options->group != NULL) {
        if (set_flag(fd, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_MULTICAST_ALL : IPV6_MULTICAST_ALL, 0) != 0) {
            return udp_fail(fd, SP_UDP_STEP_MULTICAST_ALL, failed_step);
        }
        int interface_result;
        if (v4) {
            struct ip_mreqn outgoing;
            memset(&outgoing, 0, sizeof outgoing);
            outgoing.imr_ifindex = (int)index;
            interface_result = setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &outgoing, sizeof outgoing);
        } else {
            interface_result = set_flag(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, (int)index);
        }
        if (interface_result != 0) {
            return udp_fail(fd, SP_UDP_STEP_MULTICAST_INTERFACE, failed_step);
        }
        if (set_flag(fd, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_MULTICAST_LOOP : IPV6_MULTICAST_LOOP, 1) != 0) {
            return udp_fail(fd, SP_UDP_STEP_MULTICAST_LOOP, failed_step);
        }
    }
    if (options->hop_limit != 0) {
        if (set_flag(fd, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_MULTICAST_TTL : IPV6_MULTICAST_HOPS,
                     options->hop_limit) != 0) {
            return udp_fail(fd, SP_UDP_STEP_MULTICAST_TTL, failed_step);
        }
        if (set_flag(fd, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_TTL : IPV6_UNICAST_HOPS, options->hop_limit) != 0) {
            return udp_fail(fd, SP_UDP_STEP_UNICAST_TTL, failed_step);
        }
    }

    struct sockaddr_storage local;
    memset(&local, 0, sizeof local);
    socklen_t local_length;
    if (v4) {
        struct sockaddr_in *address = (struct sockaddr_in *)&local;
        address->sin_family = AF_INET;
        address->sin_port = htons(options->port);
        if (options->group != NULL) {
            memcpy(&address->sin_addr, options->group, 4);
        } else {
            address->sin_addr.s_addr = htonl(INADDR_ANY);
        }
        local_length = sizeof *address;
    } else {
        struct sockaddr_in6 *address = (struct sockaddr_in6 *)&local;
        address->sin6_family = AF_INET6;
        address->sin6_port = htons(options->port);
        if (options->group != NULL) {
            memcpy(&address->sin6_addr, options->group, 16);
            // A link-scope group needs its scope (the device the socket is bound to already).
            address->sin6_scope_id = index;
        } else {
            address->sin6_addr = in6addr_any;
        }
        local_length = sizeof *address;
    }
    if (bind(fd, (struct sockaddr *)&local, local_length) != 0) {
        return udp_fail(fd, SP_UDP_STEP_BIND, failed_step);
    }

    if (options->group != NULL) {
        int join_result;
        if (v4) {
            struct ip_mreqn request;
            memset(&request, 0, sizeof request);
            memcpy(&request.imr_multiaddr, options->group, 4);
            request.imr_ifindex = (int)index;
            join_result = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &request, sizeof request);
        } else {
            struct ipv6_mreq request;
            memset(&request, 0, sizeof request);
            memcpy(&request.ipv6mr_multiaddr, options->group, 16);
            request.ipv6mr_interface = index;
            join_result = setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &request, sizeof request);
        }
        if (join_result != 0) {
            return udp_fail(fd, SP_UDP_STEP_JOIN, failed_step);
        }
    }

    memset(&local, 0, sizeof local);
    local_length = sizeof local;
    if (getsockname(fd, (struct sockaddr *)&local, &local_length) != 0) {
        return udp_fail(fd, SP_UDP_STEP_LOCAL_NAME, failed_step);
    }
    if (bound_port != NULL) {
        *bound_port = v4 ? ntohs(((struct sockaddr_in *)&local)->sin_port)
                         : ntohs(((struct sockaddr_in6 *)&local)->sin6_port);
    }
    return fd;
}

int64_t sp_wall_clock_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000000000 + (int64_t)now.tv_nsec;
}

int64_t sp_boot_clock_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_BOOTTIME, &now);
    return (int64_t)now.tv_sec * 1000000000 + (int64_t)now.tv_nsec;
}

size_t sp_format_utc(int64_t ns, char *buffer, size_t size) {
    time_t seconds = (time_t)(ns / 1000000000);
    int millis = (int)((ns % 1000000000) / 1000000);
    struct tm parts;
    if (gmtime_r(&seconds, &parts) == NULL) return 0;
    int written = snprintf(buffer, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900,
                           parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec, millis);
    return written > 0 && (size_t)written < size ? (size_t)written : 0;
}

int sp_discard_input(int fd) {
    // One instruction: "return 0", the number of bytes to keep.
    struct sock_filter drop_all[] = {{BPF_RET | BPF_K, 0, 0, 0}};
    struct sock_fprog program = {.len = 1, .filter = drop_all};
    if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof program) != 0) {
        return -errno;
    }
    return 0;
}

int sp_hold_udp_port(int family, uint16_t port) {
    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int on = 1;
    int bound;
    if (family == AF_INET6) {
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
        struct sockaddr_in6 address = {.sin6_family = AF_INET6, .sin6_port = htons(port)};
        bound = bind(fd, (const struct sockaddr *)&address, sizeof address);
    } else {
        struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port)};
        bound = bind(fd, (const struct sockaddr *)&address, sizeof address);
    }
    if (bound != 0) {
        int error = errno;
        close(fd);
        return -error;
    }
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    // IP_MULTICAST_ALL (49) and IPV6_MULTICAST_ALL (29) off: not every group that any socket here joined.
    int off = 0;
    if (family == AF_INET6) {
        (void)setsockopt(fd, IPPROTO_IPV6, 29, &off, sizeof off);
    } else {
        (void)setsockopt(fd, IPPROTO_IP, 49, &off, sizeof off);
    }
    (void)sp_discard_input(fd);
    return fd;
}
