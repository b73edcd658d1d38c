import FleetCore
import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// Who a connection comes from, for the limits kept per client (connections at once, failed
/// authentications): its IPv4 address, or the /64 of its IPv6 address (the usual allocation of one
/// site: a client that holds a /64 could otherwise spread itself over 2^64 addresses). An
/// IPv4-mapped IPv6 address (`::ffff:192.0.2.7`, a dual-stack listener's IPv4 client) is its IPv4
/// address. Pure, so the rule is tested without a server.
package enum PeerAddress {
    /// The key of a connection's remote address: `192.0.2.7`, `2001:db8:1:2::/64`, or `-` when it
    /// has none (a Unix socket).
    package static func key(_ address: SocketAddress?) -> String {
        guard let ip = address?.ipAddress else { return "-" }
        return key(ipAddress: ip)
    }

    /// The key of an IP address in text (as `SocketAddress.ipAddress` writes it); anything that is
    /// not an IPv6 address is returned as it is.
    package static func key(ipAddress: String) -> String {
        var v6 = in6_addr()
        guard ipAddress.contains(":"), inet_pton(AF_INET6, ipAddress, &v6) == 1 else { return ipAddress }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            return bytes[12...].map { String($0) }.joined(separator: ".")
        }
        let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        return groups.joined(separator: ":") + "::/64"
    }
}
