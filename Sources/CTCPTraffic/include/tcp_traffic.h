#ifndef FLEETCAST_TCP_TRAFFIC_H
#define FLEETCAST_TCP_TRAFFIC_H
#include <stdint.h>

/// The kernel's counters of a TCP socket (Linux `TCP_INFO`), for the bytes a broker
/// connection costs: payload bytes (TLS records included) sent and acknowledged, and received;
/// segments out and in; and the size of each segment's IP and TCP headers (20 or 40 bytes of
/// IPv4 or IPv6, 20 of TCP plus 12 when the timestamps option is on). Returns 0, or -1 when the
/// socket is gone or the kernel is older than Linux 4.2.
int fleetcast_tcp_traffic(int fd, uint64_t *sent, uint64_t *received, uint32_t *segmentsOut, uint32_t *segmentsIn,
                          uint32_t *headerBytes);
#endif
