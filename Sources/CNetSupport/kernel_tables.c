// Neighbour entries through rtnetlink and link-layer multicast memberships: the NLMSG_* / RTA_* macros and the
// socket options are not importable into Swift.
#define _GNU_SOURCE 1

#include "CNetSupport.h"

#include <errno.h>
#include <linux/if_packet.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

// Older headers lack these; the values are the kernel's (linux/netlink.h).
#ifndef NETLINK_CAP_ACK
#define NETLINK_CAP_ACK 10
#endif
#ifndef NETLINK_EXT_ACK
#define NETLINK_EXT_ACK 11
#endif
#ifndef NLM_F_CAPPED
#define NLM_F_CAPPED 0x100
#endif
#ifndef NLM_F_ACK_TLVS
#define NLM_F_ACK_TLVS 0x200
#endif
#ifndef NLMSGERR_ATTR_MSG
#define NLMSGERR_ATTR_MSG 1
#endif

const uint16_t sp_nud_permanent = NUD_PERMANENT;

static int netlink_fail(int fd, sp_netlink_open_step step, sp_netlink_open_step *failed_step) {
    int error = errno;
    if (fd >= 0) {
        close(fd);
    }
    if (failed_step != NULL) {
        *failed_step = step;
    }
    return -error;
}

int sp_netlink_route_open(uint32_t timeout_ms, uint32_t *port_id, sp_netlink_open_step *failed_step) {
    if (failed_step != NULL) {
        *failed_step = SP_NETLINK_OPEN_STEP_NONE;
    }
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd < 0) {
        return netlink_fail(-1, SP_NETLINK_OPEN_STEP_SOCKET, failed_step);
    }
    // Both are optional: without them errors still arrive, only without the kernel's text (before Linux 4.12)
    // or with the request echoed back (before 4.3).
    int on = 1;
    (void)setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &on, sizeof on);
    (void)setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &on, sizeof on);

    struct timeval timeout = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout) != 0) {
        return netlink_fail(fd, SP_NETLINK_OPEN_STEP_RECEIVE_TIMEOUT, failed_step);
    }
    struct sockaddr_nl local;
    memset(&local, 0, sizeof local);
    local.nl_family = AF_NETLINK;
    if (bind(fd, (struct sockaddr *)&local, sizeof local) != 0) {
        return netlink_fail(fd, SP_NETLINK_OPEN_STEP_BIND, failed_step);
    }
    socklen_t length = sizeof local;
    if (getsockname(fd, (struct sockaddr *)&local, &length) != 0) {
        return netlink_fail(fd, SP_NETLINK_OPEN_STEP_LOCAL_NAME, failed_step);
    }
    if (port_id != NULL) {
        *port_id = local.nl_pid;
    }
    return fd;
}

static void add_attribute(struct nlmsghdr *header, size_t capacity, unsigned short type, const void *data,
                          size_t length) {
    size_t offset = NLMSG_ALIGN(header->nlmsg_len);
    size_t total = RTA_LENGTH(length);
    if (offset + RTA_ALIGN(total) > capacity) {
        return;  // The request buffer below is sized for the largest request; this cannot happen.
    }
    struct rtattr *attribute = (struct rtattr *)((char *)header + offset);
    attribute->rta_type = type;
    attribute->rta_len = (unsigned short)total;
    memcpy(RTA_DATA(attribute), data, length);
    header->nlmsg_len = (uint32_t)(offset + RTA_ALIGN(total));
}

/// Copies the NLMSGERR_ATTR_MSG string of an extended ACK into `message`.
static void copy_kernel_message(const struct nlmsghdr *header, char *message, size_t message_size) {
    if (message_size == 0 || !(header->nlmsg_flags & NLM_F_ACK_TLVS)) {
        return;
    }
    const struct nlmsgerr *error = NLMSG_DATA(header);
    // The TLVs follow the echoed request: its header only when capped, the whole request otherwise.
    size_t offset = NLMSG_HDRLEN + sizeof *error;
    if (!(header->nlmsg_flags & NLM_F_CAPPED)) {
        offset += error->msg.nlmsg_len - NLMSG_HDRLEN;
    }
    offset = NLMSG_ALIGN(offset);
    while (offset + sizeof(struct nlattr) <= header->nlmsg_len) {
        const struct nlattr *attribute = (const struct nlattr *)((const char *)header + offset);
        if (attribute->nla_len < sizeof *attribute || offset + attribute->nla_len > header->nlmsg_len) {
            return;
        }
        if ((attribute->nla_type & NLA_TYPE_MASK) == NLMSGERR_ATTR_MSG) {
            size_t length = attribute->nla_len - NLA_HDRLEN;
            const char *text = (const char *)attribute + NLA_HDRLEN;
            size_t used = strnlen(text, length);
            if (used >= message_size) {
                used = message_size - 1;
            }
            memcpy(message, text, used);
            message[used] = 0;
            return;
        }
        offset += NLA_ALIGN(attribute->nla_len);
    }
}

int sp_neighbour_change(int fd, uint32_t port_id, uint32_t sequence, int remove, int family,
                        uint32_t interface_index, const uint8_t *address, const uint8_t *link_address,
                        uint16_t state, sp_netlink_stage *stage, char *kernel_message, size_t kernel_message_size) {
    *stage = SP_NETLINK_STAGE_NONE;
    if (kernel_message_size > 0) {
        kernel_message[0] = 0;
    }
    if (family != AF_INET && family != AF_INET6) {
        *stage = SP_NETLINK_STAGE_ARGUMENTS;
        return -EAFNOSUPPORT;
    }
    if (interface_index == 0 || interface_index > INT32_MAX) {
        *stage = SP_NETLINK_STAGE_ARGUMENTS;
        return -ENODEV;
    }

    union {
        struct nlmsghdr header;
        char bytes[NLMSG_SPACE(sizeof(struct ndmsg)) + RTA_SPACE(16) + RTA_SPACE(6)];
    } request;
    memset(&request, 0, sizeof request);
    request.header.nlmsg_len = NLMSG_LENGTH(sizeof(struct ndmsg));
    request.header.nlmsg_type = remove ? RTM_DELNEIGH : RTM_NEWNEIGH;
    request.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | (remove ? 0 : NLM_F_CREATE | NLM_F_REPLACE);
    request.header.nlmsg_seq = sequence;
    struct ndmsg *neighbour = NLMSG_DATA(&request.header);
    neighbour->ndm_family = (unsigned char)family;
    neighbour->ndm_ifindex = (int)interface_index;
    neighbour->ndm_state = remove ? 0 : state;
    neighbour->ndm_flags = 0;
    neighbour->ndm_type = 0;
    add_attribute(&request.header, sizeof request, NDA_DST, address, family == AF_INET ? 4 : 16);
    if (!remove) {
        add_attribute(&request.header, sizeof request, NDA_LLADDR, link_address, 6);
    }

    struct sockaddr_nl kernel;
    memset(&kernel, 0, sizeof kernel);
    kernel.nl_family = AF_NETLINK;
    struct iovec vector = {.iov_base = &request, .iov_len = request.header.nlmsg_len};
    struct msghdr message = {.msg_name = &kernel, .msg_namelen = sizeof kernel, .msg_iov = &vector, .msg_iovlen = 1};
    ssize_t sent;
    do {
        sent = sendmsg(fd, &message, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    if (sent < 0) {
        *stage = SP_NETLINK_STAGE_SEND;
        return -errno;
    }

    // An ACK is an nlmsgerr (capped) plus the kernel's text; 8 KiB also holds an uncapped echo of the request.
    union {
        struct nlmsghdr header;
        char bytes[8192];
    } answer;
    for (;;) {
        ssize_t received;
        do {
            received = recv(fd, &answer, sizeof answer, 0);
        } while (received < 0 && errno == EINTR);
        if (received < 0) {
            *stage = SP_NETLINK_STAGE_RECEIVE;
            return -errno;
        }
        size_t remaining = (size_t)received;
        for (struct nlmsghdr *header = &answer.header; NLMSG_OK(header, remaining);
             header = NLMSG_NEXT(header, remaining)) {
            if (header->nlmsg_seq != sequence || (header->nlmsg_pid != port_id && header->nlmsg_pid != 0)) {
                continue;
            }
            if (header->nlmsg_type != NLMSG_ERROR) {
                continue;
            }
            if (header->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
                *stage = SP_NETLINK_STAGE_RECEIVE;
                return -EBADMSG;
            }
            const struct nlmsgerr *error = NLMSG_DATA(header);
            if (error->error == 0) {
                return 0;
            }
            *stage = SP_NETLINK_STAGE_KERNEL;
            copy_kernel_message(header, kernel_message, kernel_message_size);
            return error->error < 0 ? error->error : -error->error;
        }
    }
}

int sp_link_membership_socket(void) {
    // Protocol 0: the socket is bound to no protocol and so receives no frame; it only holds memberships.
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    return fd < 0 ? -errno : fd;
}

int sp_link_membership_change(int fd, int add, const uint8_t *mac, uint32_t interface_index) {
    struct packet_mreq request;
    memset(&request, 0, sizeof request);
    request.mr_ifindex = (int)interface_index;
    request.mr_type = PACKET_MR_MULTICAST;
    request.mr_alen = 6;
    memcpy(request.mr_address, mac, 6);
    int result = setsockopt(fd, SOL_PACKET, add ? PACKET_ADD_MEMBERSHIP : PACKET_DROP_MEMBERSHIP, &request,
                            sizeof request);
    return result == 0 ? 0 : -errno;
}
