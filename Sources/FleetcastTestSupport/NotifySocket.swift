import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// systemd's side of `Type=notify` and `WatchdogSec=`, played by a real `AF_UNIX` datagram
/// socket (a path, or an abstract name), as systemd binds it for the service.
public final class NotifySocket: Sendable {
    /// What goes in `$NOTIFY_SOCKET`.
    public let address: String
    private let fd: Int32
    private let received = Locked<[String]>([])

    /// A socket bound to a new path in a temporary directory, or to a new abstract name.
    public init(abstract: Bool) throws {
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError.system("socket", errno) }
        let name =
            abstract
            ? "@fleetcast-notify-\(UUID().uuidString.prefix(8))"
            : try makeTemporaryDirectory(prefix: "notify") + "/notify.sock"
        address = name
        var sun = sockaddr_un()
        sun.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(name.utf8)
        withUnsafeMutableBytes(of: &sun.sun_path) { path in
            path.copyBytes(from: bytes)
            if abstract { path[0] = 0 }
        }
        let length = socklen_t(MemoryLayout<sockaddr_un>.offset(of: \.sun_path)! + bytes.count + (abstract ? 0 : 1))
        let rc = withUnsafePointer(to: &sun) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard rc == 0 else { throw TestSupportError.system("bind \(name)", errno) }
    }

    deinit { close(fd) }

    /// Every datagram so far, in order (reads what is waiting without blocking).
    public var messages: [String] {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            guard n > 0 else { break }
            let text = String(decoding: buffer[0..<n], as: UTF8.self)
            received.withLock { $0.append(text) }
        }
        return received.withLock { $0 }
    }

    /// Waits until a datagram satisfying `accept` arrives.
    public func wait(for what: String, timeout: Duration = .seconds(20), _ accept: @escaping @Sendable ([String]) -> Bool) async throws {
        try await waitUntil(what, timeout: timeout) { accept(self.messages) }
    }
}
