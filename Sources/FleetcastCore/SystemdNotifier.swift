#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Tells systemd how the agent is doing, over the `sd_notify` datagram protocol: `READY=1`
/// once it runs (for `Type=notify`), `STOPPING=1` when it starts to shut down, `WATCHDOG=1`
/// while it is alive (for `WatchdogSec=`), and `STATUS=…` lines that `systemctl status` shows.
///
/// systemd names its socket in `$NOTIFY_SOCKET`: a path, or an abstract socket name with a
/// leading `@`. Each message is one `AF_UNIX` `SOCK_DGRAM` datagram of `KEY=value` lines.
/// Outside systemd (no `$NOTIFY_SOCKET`) there is no notifier and nothing is sent.
public struct SystemdNotifier: Sendable {
    /// The socket address as systemd gave it (`@name` for an abstract socket).
    public let socketPath: String
    /// How often systemd expects `WATCHDOG=1` (`$WATCHDOG_USEC`), when the watchdog is on and
    /// meant for this process (`$WATCHDOG_PID`, if set, is ours).
    public let watchdogInterval: Duration?

    /// The notifier systemd asked for in `environment`, or `nil` when not run by systemd
    /// with `Type=notify` (or with an unusable socket address).
    public init?(environment: [String: String], pid: Int32 = getpid()) {
        guard let path = environment["NOTIFY_SOCKET"], path.utf8.count >= 2,
            path.hasPrefix("/") || path.hasPrefix("@"),
            path.utf8.count < MemoryLayout.size(ofValue: sockaddr_un().sun_path)
        else { return nil }
        socketPath = path
        if let usec = environment["WATCHDOG_USEC"].flatMap(UInt64.init), usec > 0,
            environment["WATCHDOG_PID"].map({ Int32($0) == pid }) ?? true
        {
            watchdogInterval = .microseconds(usec)
        } else {
            watchdogInterval = nil
        }
    }

    /// Sends `message` (`KEY=value` lines) as one datagram; returns `false` when it could not
    /// be sent (systemd gone: nothing to do about it, the agent goes on).
    @discardableResult
    public func notify(_ message: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let name = Array(socketPath.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { sunPath in
            sunPath.copyBytes(from: name)
            if name.first == UInt8(ascii: "@") { sunPath[0] = 0 }  // abstract: a leading NUL
        }
        // An abstract address is exactly as long as its name (no terminating NUL counts).
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path)!
        let length = socklen_t(pathOffset + name.count + (name.first == UInt8(ascii: "@") ? 0 : 1))
        let bytes = Array(message.utf8)
        let sent = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddrPointer in
                bytes.withUnsafeBytes { buffer in
                    sendto(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL), sockaddrPointer, length)
                }
            }
        }
        return sent == bytes.count
    }
}
