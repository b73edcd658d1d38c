import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// What this process holds open, read from `/proc`, for leak checks that look only at what
/// one source owns. (Counting all of `/proc/self/fd` is process-wide: the other suites of
/// the package open and close descriptors concurrently, so a count proves nothing.)
enum OwnedResources {
    /// Targets of this process's open descriptors (`readlink /proc/self/fd/N`), by number.
    static func descriptorTargets() -> [Int32: String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return [:] }
        var targets: [Int32: String] = [:]
        for name in names {
            guard let fd = Int32(name), let target = readLink("/proc/self/fd/" + name) else { continue }
            targets[fd] = target
        }
        return targets
    }

    /// Descriptors of this process open on `path` (symbolic links resolved, so a pty link
    /// matches the `/dev/pts/N` it points at), as `fd N → target` for messages.
    static func descriptors(on path: String) -> [String] {
        let resolved = resolvedPath(path)
        return descriptorTargets()
            .filter { $0.value == resolved }
            .sorted { $0.key < $1.key }
            .map { "fd \($0.key) → \($0.value)" }
    }

    /// This process's ESTABLISHED TCP connections (IPv4 and IPv6) whose remote port is
    /// `port`, described for messages. The table lists every socket of the network
    /// namespace, so only those whose inode is one of our descriptors' sockets count.
    static func establishedConnections(toPort port: Int) -> [String] {
        let ours = Set(descriptorTargets().values.compactMap(socketInode))
        var found: [String] = []
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            // Read to the end: /proc files report a size of 0, so size-based reads see nothing.
            guard let data = try? FileHandle(forReadingFrom: URL(fileURLWithPath: table)).readToEnd() else { continue }
            let text = String(decoding: data, as: UTF8.self)
            for line in text.split(separator: "\n").dropFirst() {
                // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode …
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count > 9, fields[3] == "01",
                    let remotePort = fields[2].split(separator: ":").last.flatMap({ Int($0, radix: 16) }),
                    remotePort == port, let inode = UInt64(fields[9]), ours.contains(inode)
                else { continue }
                let localPort = fields[1].split(separator: ":").last.flatMap { Int($0, radix: 16) } ?? 0
                found.append("TCP port \(localPort) → port \(remotePort) ESTABLISHED (socket inode \(inode))")
            }
        }
        return found
    }

    /// The path with every symbolic link resolved, or the path itself when it is gone.
    static func resolvedPath(_ path: String) -> String {
        guard let real = realpath(path, nil) else { return path }
        defer { free(real) }
        return String(cString: real)
    }

    private static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n >= 0 else { return nil }
        return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `socket:[12345]` → 12345.
    private static func socketInode(_ target: String) -> UInt64? {
        guard target.hasPrefix("socket:["), target.hasSuffix("]") else { return nil }
        return UInt64(target.dropFirst(8).dropLast())
    }
}
