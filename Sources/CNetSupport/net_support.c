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
#include <sys/socket.h>
#include <unistd.h>

static int fail(int fd, sp_udp_open_step step, sp_udp_open_step *failed_step) {
    int error = errno;
    if (fd >= 0) {
        close(fd);
    }
    if (failed_step != NULL) {
        *failed_step = step;
    }
    return -error;
}

int sp_udp_open(int family, const char *interface, uint16_t port, uint16_t *bound_port,
                sp_udp_open_step *failed_step) {
    static const int on = 1;
    if (failed_step != NULL) {
        *failed_step = SP_UDP_OPEN_STEP_NONE;
    }
    if (family != AF_INET && family != AF_INET6) {
        errno = EAFNOSUPPORT;
        return fail(-1, SP_UDP_OPEN_STEP_FAMILY, failed_step);
    }
    // The kernel silently truncates longer names, and an empty one removes the binding: refuse both.
    size_t name_length = interface == NULL ? 0 : strnlen(interface, IFNAMSIZ);
    if (name_length == 0 || name_length >= IFNAMSIZ) {
        errno = EINVAL;
        return fail(-1, SP_UDP_OPEN_STEP_BIND_TO_DEVICE, failed_step);
    }

    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
    if (fd < 0) {
        return fail(-1, SP_UDP_OPEN_STEP_SOCKET, failed_step);
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0) {
        return fail(fd, SP_UDP_OPEN_STEP_REUSE_ADDRESS, failed_step);
    }
    if (family == AF_INET6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) != 0) {
        return fail(fd, SP_UDP_OPEN_STEP_V6_ONLY, failed_step);
    }
    if (setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, interface, (socklen_t)(name_length + 1)) != 0) {
        return fail(fd, SP_UDP_OPEN_STEP_BIND_TO_DEVICE, failed_step);
    }
    int packet_info_result = family == AF_INET
        ? setsockopt(fd, IPPROTO_IP, IP_PKTINFO, &on, sizeof on)
        : setsockopt(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, &on, sizeof on);
    if (packet_info_result != 0) {
        return fail(fd, SP_UDP_OPEN_STEP_PACKET_INFO, failed_step);
    }

    struct sockaddr_storage local;
    memset(&local, 0, sizeof local);
    socklen_t local_length;
    if (family == AF_INET) {
        struct sockaddr_in *address = (struct sockaddr_in *)&local;
        address->sin_family = AF_INET;
        address->sin_port = htons(port);
        address->sin_addr.s_addr = htonl(INADDR_ANY);
        local_length = sizeof *address;
    } else {
        struct sockaddr_in6 *address = (struct sockaddr_in6 *)&local;
        address->sin6_family = AF_INET6;
        address->sin6_port = htons(port);
        address->sin6_addr = in6addr_any;
        local_length = sizeof *address;
    }
    if (bind(fd, (struct sockaddr *)&local, local_length) != 0) {
        return fail(fd, SP_UDP_OPEN_STEP_BIND, failed_step);
    }

    memset(&local, 0, sizeof local);
    local_length = sizeof local;
    if (getsockname(fd, (struct sockaddr *)&local, &local_length) != 0) {
        return fail(fd, SP_UDP_OPEN_STEP_LOCAL_NAME, failed_step);
    }
    if (bound_port != NULL) {
        *bound_port = family == AF_INET ? ntohs(((struct sockaddr_in *)&local)->sin_port)
                                        : ntohs(((struct sockaddr_in6 *)&local)->sin6_port);
    }
    return fd;
}

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

ssize_t sp_udp_send(int fd, int family, const uint8_t *bytes, size_t length, const uint8_t *destination_address,
                    uint16_t destination_port, uint32_t destination_scope_id, const uint8_t *source_address,
                    uint32_t interface_index) {
    struct sockaddr_storage destination;
    memset(&destination, 0, sizeof destination);
    socklen_t destination_length;
    union {
        char bytes[CMSG_SPACE(sizeof(struct in6_pktinfo))];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof control);
    size_t control_length;

    if (family == AF_INET) {
        struct sockaddr_in *address = (struct sockaddr_in *)&destination;
        address->sin_family = AF_INET;
        address->sin_port = htons(destination_port);
        memcpy(&address->sin_addr, destination_address, 4);
        destination_length = sizeof *address;

        struct in_pktinfo packet_info;
        memset(&packet_info, 0, sizeof packet_info);
        packet_info.ipi_ifindex = (int)interface_index;
        if (source_address != NULL) {
            // ipi_spec_dst is the source address to use; ipi_addr is ignored when sending.
            memcpy(&packet_info.ipi_spec_dst, source_address, 4);
        }
        struct cmsghdr *header = (struct cmsghdr *)control.bytes;
        header->cmsg_level = IPPROTO_IP;
        header->cmsg_type = IP_PKTINFO;
        header->cmsg_len = CMSG_LEN(sizeof packet_info);
        memcpy(CMSG_DATA(header), &packet_info, sizeof packet_info);
        control_length = CMSG_SPACE(sizeof packet_info);
    } else if (family == AF_INET6) {
        struct sockaddr_in6 *address = (struct sockaddr_in6 *)&destination;
        address->sin6_family = AF_INET6;
        address->sin6_port = htons(destination_port);
        memcpy(&address->sin6_addr, destination_address, 16);
        address->sin6_scope_id = destination_scope_id;
        destination_length = sizeof *address;

        struct in6_pktinfo packet_info;
        memset(&packet_info, 0, sizeof packet_info);
        packet_info.ipi6_ifindex = interface_index;
        if (source_address != NULL) {
            memcpy(&packet_info.ipi6_addr, source_address, 16);
        }
        struct cmsghdr *header = (struct cmsghdr *)control.bytes;
        header->cmsg_level = IPPROTO_IPV6;
        header->cmsg_type = IPV6_PKTINFO;
        header->cmsg_len = CMSG_LEN(sizeof packet_info);
        memcpy(CMSG_DATA(header), &packet_info, sizeof packet_info);
        control_length = CMSG_SPACE(sizeof packet_info);
    } else {
        return -EAFNOSUPPORT;
    }

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

// Older C libraries lack these; the values are the kernel's (asm-generic/socket.h, linux/in.h, linux/in6.h).
#ifndef SO_BINDTOIFINDEX
#define SO_BINDTOIFINDEX 62
#endif
#ifndef IP_MULTICAST_ALL
#define IP_MULTICAST_ALL 49
#endif
#ifndef IPV6_MULTICAST_ALL
#define IPV6_MULTICAST_ALL 29
#endif

static int mdns_fail(int fd, sp_mdns_open_step step, sp_mdns_open_step *failed_step) {
    int error = errno;
    if (fd >= 0) {
        close(fd);
    }
    if (failed_step != NULL) {
        *failed_step = step;
    }
    return -error;
}

static int set_int(int fd, int level, int name, int value) {
    return setsockopt(fd, level, name, &value, sizeof value);
}

int sp_mdns_open(int family, uint32_t interface_index, sp_mdns_open_step *failed_step) {
    static const uint16_t mdns_port = 5353;
    if (failed_step != NULL) {
        *failed_step = SP_MDNS_OPEN_STEP_NONE;
    }
    if (family != AF_INET && family != AF_INET6) {
        errno = EAFNOSUPPORT;
        return mdns_fail(-1, SP_MDNS_OPEN_STEP_ARGUMENTS, failed_step);
    }
    if (interface_index == 0 || interface_index > INT32_MAX) {
        errno = ENODEV;
        return mdns_fail(-1, SP_MDNS_OPEN_STEP_ARGUMENTS, failed_step);
    }

    int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_UDP);
    if (fd < 0) {
        return mdns_fail(-1, SP_MDNS_OPEN_STEP_SOCKET, failed_step);
    }
    // avahi-daemon sets both (after its first bind attempt); either one on both sides lets the binds coexist.
    if (set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1) != 0) {
        return mdns_fail(fd, SP_MDNS_OPEN_STEP_REUSE_ADDRESS, failed_step);
    }
    if (set_int(fd, SOL_SOCKET, SO_REUSEPORT, 1) != 0) {
        return mdns_fail(fd, SP_MDNS_OPEN_STEP_REUSE_PORT, failed_step);
    }

    if (family == AF_INET) {
        // Without a device, a socket bound to the group also gets the group's datagrams from every other
        // interface where anybody on the host joined it.
        if (set_int(fd, SOL_SOCKET, SO_BINDTOIFINDEX, (int)interface_index) != 0) {
            return mdns_fail(fd, SP_MDNS_OPEN_STEP_BIND_TO_DEVICE, failed_step);
        }
        struct sockaddr_in local;
        memset(&local, 0, sizeof local);
        local.sin_family = AF_INET;
        local.sin_port = htons(mdns_port);
        local.sin_addr.s_addr = htonl(0xE00000FB); // 224.0.0.251
        if (bind(fd, (struct sockaddr *)&local, sizeof local) != 0) {
            return mdns_fail(fd, SP_MDNS_OPEN_STEP_BIND, failed_step);
        }
        struct ip_mreqn request;
        memset(&request, 0, sizeof request);
        request.imr_multiaddr = local.sin_addr;
        request.imr_ifindex = (int)interface_index;
        if (setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &request, sizeof request) != 0) {
            return mdns_fail(fd, SP_MDNS_OPEN_STEP_JOIN, failed_step);
        }
        struct ip_mreqn outgoing;
        memset(&outgoing, 0, sizeof outgoing);
        outgoing.imr_ifindex = (int)interface_index;
        if (setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &outgoing, sizeof outgoing) != 0) {
            return mdns_fail(fd, SP_MDNS_OPEN_STEP_MULTICAST_INTERFACE, failed_step);
        }
        if (set_int(fd, IPPROTO_IP, IP_MULTICAST_TTL, 255) != 0) {
            return mdns_fail(fd, SP_MDNS_OPEN_STEP_MULTICAST_TTL, failed_step);
        }
        if (set_int(fd, IPPROTO_IP, IP_TTL, 255) != 0) {
            return mdns_fail(fd, SP_MDNS_OPEN_STEP_UNICAST_TTL, failed_step);
        }
        if (set_int(fd, IPPROTO_IP, IP_MULTICAST_LOOP, 1) != 0) {
            return mdns_fail(fd, SP_MDNS_OPEN_STEP_MULTICAST_LOOP, failed_step);
        }
        if (set_int(fd, IPPROTO_IP, IP_MULTICAST_ALL, 0) != 0) {
            return mdns_fail(fd, SP_MDNS_OPEN_STEP_MULTICAST_ALL, failed_step);
        }
        if (set_int(fd, IPPROTO_IP, IP_PKTINFO, 1) != 0) {
            return mdns_fail(fd, SP_MDNS_OPEN_STEP_PACKET_INFO, failed_step);
        }
        return fd;
    }

    if (set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1) != 0) {
        return mdns_fail(fd, SP_MDNS_OPEN_STEP_V6_ONLY, failed_step);
    }
    struct sockaddr_in6 local;
    memset(&local, 0, sizeof local);
    local.sin6_family = AF_INET6;
    local.sin6_port = htons(mdns_port);
    static const uint8_t group[16] = {0xFF, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFB};
    memcpy(&local.sin6_addr, group, sizeof group);
    // A link-scope address needs its scope; binding to it binds the socket to that device too.
    local.sin6_scope_id = interface_index;
    if (bind(fd, (struct sockaddr *)&local, sizeof local) != 0) {
        return mdns_fail(fd, SP_MDNS_OPEN_STEP_BIND, failed_step);
    }
    struct ipv6_mreq request;
    memset(&request, 0, sizeof request);
    request.ipv6mr_multiaddr = local.sin6_addr;
    request.ipv6mr_interface = interface_index;
    if (setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &request, sizeof request) != 0) {
        return mdns_fail(fd, SP_MDNS_OPEN_STEP_JOIN, failed_step);
    }
    if (set_int(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, (int)interface_index) != 0) {
        return mdns_fail(fd, SP_MDNS_OPEN_STEP_MULTICAST_INTERFACE, failed_step);
    }
    if (set_int(fd, IPPROTO_IPV6, IPV6_MULTICAST_HOPS, 255) != 0) {
        return mdns_fail(fd, SP_MDNS_OPEN_STEP_MULTICAST_TTL, failed_step);
    }
    if (set_int(fd, IPPROTO_IPV6, IPV6_UNICAST_HOPS, 255) != 0) {
        return mdns_fail(fd, SP_MDNS_OPEN_STEP_UNICAST_TTL, failed_step);
    }
    if (set_int(fd, IPPROTO_IPV6, IPV6_MULTICAST_LOOP, 1) != 0) {
        return mdns_fail(fd, SP_MDNS_OPEN_STEP_MULTICAST_LOOP, failed_step);
    }
    if (set_int(fd, IPPROTO_IPV6, IPV6_MULTICAST_ALL, 0) != 0) {
        return mdns_fail(fd, SP_MDNS_OPEN_STEP_MULTICAST_ALL, failed_step);
    }
    if (set_int(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1) != 0) {
        return mdns_fail(fd, SP_MDNS_OPEN_STEP_PACKET_INFO, failed_step);
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
