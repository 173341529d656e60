// The ceiling of `make bench`'s mDNS figures: a responder that does no work. It answers every query on its UDP
// port with the query's own header and first question and one canned A record, from one receive/send loop, so
// that what it reaches is what the kernel, the lab's veth pair and the load generator allow on this machine.
// Nothing is parsed but the first name's length; nothing is looked up, allocated or logged.
//
//   mdns-ceiling ADDRESS PORT            one recvfrom and one sendto per query
//   mdns-ceiling ADDRESS PORT batched    recvmmsg and sendmmsg, up to 64 queries a call
//
// ADDRESS is an IPv4 address of this host. It runs until SIGTERM or SIGINT and then prints
// `answered: N` on standard output.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { BATCH = 64, SIZE = 1500 };

static volatile sig_atomic_t stopping = 0;

static void stop(int signal_number) {
    (void)signal_number;
    stopping = 1;
}

// Turns the query in `buffer` (`length` bytes) into the answer, in place; returns its length, or 0 to send nothing.
static size_t answer(unsigned char *buffer, size_t length) {
    if (length < 12 || (buffer[2] & 0x80) || buffer[4] != 0 || buffer[5] == 0) return 0;
    size_t offset = 12;
    while (offset < length && buffer[offset] != 0) {
        if ((buffer[offset] & 0xC0) == 0xC0) {
            offset += 1;
            break;
        }
        offset += 1 + buffer[offset];
    }
    offset += 1 + 4;  // the root label (or the pointer's second byte), type and class
    if (offset > length || offset + 16 > SIZE) return 0;
    static const unsigned char record[16] = {
        0xC0, 0x0C,              // the question's name
        0x00, 0x01, 0x00, 0x01,  // A, IN
        0x00, 0x00, 0x00, 0x0A,  // TTL 10 s, as legacy unicast answers have
        0x00, 0x04, 10, 77, 0, 99,
    };
    buffer[2] = 0x84;  // response, authoritative
    buffer[3] = 0x00;
    buffer[4] = 0x00;
    buffer[5] = 0x01;  // one question
    buffer[6] = 0x00;
    buffer[7] = 0x01;  // one answer
    memset(buffer + 8, 0, 4);
    memcpy(buffer + offset, record, sizeof record);
    return offset + sizeof record;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: mdns-ceiling ADDRESS PORT [batched]\n");
        return 64;
    }
    int batched = argc > 3 && strcmp(argv[3], "batched") == 0;
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &address.sin_addr) != 1) {
        fprintf(stderr, "mdns-ceiling: not an IPv4 address: %s\n", argv[1]);
        return 64;
    }
    int descriptor = socket(AF_INET, SOCK_DGRAM, 0);
    int one = 1;
    int buffer_size = 4 << 20;
    setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &buffer_size, sizeof buffer_size);
    if (bind(descriptor, (struct sockaddr *)&address, sizeof address) != 0) {
        perror("mdns-ceiling: bind");
        return 1;
    }
    struct sigaction action = {.sa_handler = stop};
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);
    // Ready: the benchmark waits for this line before it starts the load.
    printf("listening\n");
    fflush(stdout);

    static unsigned char buffers[BATCH][SIZE];
    struct sockaddr_in sources[BATCH];
    struct iovec vectors[BATCH];
    struct mmsghdr messages[BATCH];
    unsigned long long answered = 0;
    while (!stopping) {
        if (!batched) {
            socklen_t source_length = sizeof sources[0];
            ssize_t length = recvfrom(
                descriptor, buffers[0], SIZE, 0, (struct sockaddr *)&sources[0], &source_length);
            if (length <= 0) continue;
            size_t reply = answer(buffers[0], (size_t)length);
            if (reply == 0) continue;
            if (sendto(descriptor, buffers[0], reply, 0, (struct sockaddr *)&sources[0], source_length) > 0) {
                answered += 1;
            }
            continue;
        }
        for (int i = 0; i < BATCH; i++) {
            vectors[i] = (struct iovec){.iov_base = buffers[i], .iov_len = SIZE};
            messages[i].msg_hdr = (struct msghdr){
                .msg_name = &sources[i], .msg_namelen = sizeof sources[i], .msg_iov = &vectors[i], .msg_iovlen = 1};
        }
        int received = recvmmsg(descriptor, messages, BATCH, MSG_WAITFORONE, NULL);
        if (received <= 0) continue;
        int replies = 0;
        for (int i = 0; i < received; i++) {
            size_t reply = answer(buffers[i], messages[i].msg_len);
            if (reply == 0) continue;
            vectors[i].iov_len = reply;
            if (replies != i) {
                messages[replies] = messages[i];
            }
            replies += 1;
        }
        int sent = 0;
        while (sent < replies) {
            int count = sendmmsg(descriptor, messages + sent, (unsigned int)(replies - sent), 0);
            if (count <= 0) break;
            sent += count;
        }
        answered += (unsigned long long)sent;
    }
    printf("answered: %llu\n", answered);
    return 0;
}
