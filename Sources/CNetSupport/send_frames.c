// Whole Ethernet frames out of one interface, for the sleep client's ARP and Neighbour Discovery announcements
// (the daemon sends its frames through libpcap, which the client does not link).

#include "CNetSupport.h"

#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int sp_send_frames(uint32_t interface_index, const uint8_t *bytes, const size_t *lengths, size_t count) {
    // Protocol 0: the socket is bound to no EtherType, so the kernel queues nothing on it to read.
    int fd = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int sent = 0;
    int first_error = 0;
    const uint8_t *frame = bytes;
    for (size_t i = 0; i < count; frame += lengths[i], i++) {
        if (lengths[i] < ETH_HLEN) continue;
        struct sockaddr_ll to;
        memset(&to, 0, sizeof to);
        to.sll_family = AF_PACKET;
        // The frame's EtherType, network order as in the frame: kernels before 5.1 take the packet's protocol
        // from here rather than from the header.
        memcpy(&to.sll_protocol, frame + 12, sizeof to.sll_protocol);
        to.sll_ifindex = (int)interface_index;
        to.sll_halen = ETH_ALEN;
        memcpy(to.sll_addr, frame, ETH_ALEN);
        if (sendto(fd, frame, lengths[i], 0, (const struct sockaddr *)&to, sizeof to) == (ssize_t)lengths[i]) {
            sent++;
        } else if (first_error == 0) {
            first_error = errno != 0 ? errno : EIO;
        }
    }
    close(fd);
    return sent > 0 || first_error == 0 ? sent : -first_error;
}
