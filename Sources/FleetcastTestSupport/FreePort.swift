import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Loopback TCP ports for tests.
public enum FreePort {
    /// Every port ``next()`` has handed out in this process.
    private static let handedOut = Locked(Set<Int>())

    /// A TCP port on 127.0.0.1 that was free a moment ago (the kernel picked it for a socket
    /// bound to port 0, which is then closed), and that no earlier call in this process
    /// returned. The kernel hands a port back out as soon as it is closed, so without that a
    /// parallel test could start listening on the port of a server another test has just
    /// stopped, and that test's "nothing listens any more" would find it.
    public static func next() throws -> Int {
        for _ in 0..<1000 {
            let port = try kernelPicked()
            if handedOut.withLock({ $0.insert(port).inserted }) { return port }
        }
        throw TestSupportError.system("bind (no port left that this process has not used)", EADDRINUSE)
    }

    private static func kernelPicked() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestSupportError.system("socket", errno) }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw TestSupportError.system("bind", errno) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else { throw TestSupportError.system("getsockname", errno) }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// True when something accepts TCP connections on 127.0.0.1:`port` right now.
    public static func isAccepting(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return connectLoopback(fd, port: port) == 0
    }

    /// Connects the TCP socket `fd` (its options already set) to 127.0.0.1:`port`; returns
    /// `connect(2)`'s result (`errno` tells why on -1).
    public static func connectLoopback(_ fd: Int32, port: Int) -> Int32 {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }
}

/// The path of an executable product of this package (`fleetcast-agent`, `fleet-watch`…): in
/// the build directory the running tests were built into (`swift test` builds every product it
/// declares), else in the first directory of `FLEETCAST_PRODUCT_PATH` (colon-separated) that
/// holds it: the test command's ThreadSanitizer build, which leaves fleet-watch out, runs the
/// fleet side's debug build's (deploy/test.sh). Where neither has it, the build directory's path
/// (which does not exist).
public func builtProduct(_ name: String) -> String {
    let runner = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").resolvingSymlinksInPath()
    var directory = runner.deletingLastPathComponent()
    // On macOS the runner sits inside `…/PackageTests.xctest/Contents/MacOS/`.
    while directory.path.contains(".xctest") { directory = directory.deletingLastPathComponent() }
    let own = directory.appendingPathComponent(name).path
    if FileManager.default.isExecutableFile(atPath: own) { return own }
    let elsewhere = (ProcessInfo.processInfo.environment["FLEETCAST_PRODUCT_PATH"] ?? "").split(separator: ":")
        .map { URL(fileURLWithPath: String($0)).appendingPathComponent(name).path }
    return elsewhere.first { FileManager.default.isExecutableFile(atPath: $0) } ?? own
}

/// Whether the executable product `name` is there to run (``builtProduct(_:)``): the
/// ThreadSanitizer build leaves the fleet side, and so `fleet-watch`, out.
public func isBuilt(_ name: String) -> Bool {
    FileManager.default.isExecutableFile(atPath: builtProduct(name))
}
