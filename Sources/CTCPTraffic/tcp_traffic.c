// In C, not in a header Swift imports: the kernel's `struct tcp_info` (linux/tcp.h, which has
// the byte counters) and glibc's (netinet/tcp.h, which Swift's Glibc module holds and which
// stops before them) cannot both be seen by one Swift module.
#include "tcp_traffic.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>

int fleetcast_tcp_traffic(int fd, uint64_t *sent, uint64_t *received, uint32_t *segmentsOut, uint32_t *segmentsIn,
                          uint32_t *headerBytes) {
    struct tcp_info info;
    socklen_t length = sizeof(info);
    memset(&info, 0, sizeof(info));
    if (fd < 0 || getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return -1;
    if (length < offsetof(struct tcp_info, tcpi_segs_in) + sizeof(info.tcpi_segs_in)) return -1;
    struct sockaddr_storage address;
    socklen_t addressLength = sizeof(address);
    int family = getsockname(fd, (struct sockaddr *)&address, &addressLength) == 0 ? address.ss_family : AF_INET;
    *sent = info.tcpi_bytes_acked;
    *received = info.tcpi_bytes_received;
    *segmentsOut = info.tcpi_segs_out;
    *segmentsIn = info.tcpi_segs_in;
    *headerBytes = (family == AF_INET6 ? 40 : 20) + 20 + ((info.tcpi_options & TCPI_OPT_TIMESTAMPS) ? 12 : 0);
    return 0;
}
