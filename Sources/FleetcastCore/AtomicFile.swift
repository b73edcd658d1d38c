#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Small POSIX file helpers for the agent's state directory: whole-file reads and crash-safe
/// replacement (temporary file + `fsync` + `rename` + `fsync` of the directory).
package enum AtomicFile {
    /// An I/O failure: the operation, the path and the system's error text.
    package struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        package let operation: String
        package let path: String
        package let errno: Int32
        package var description: String { "cannot \(operation) \(path): \(String(cString: strerror(errno)))" }

        package init(operation: String, path: String, errno: Int32) {
            self.operation = operation
            self.path = path
            self.errno = errno
        }
    }

    /// Reads a whole (small) file; `nil` when it does not exist.
    package static func contents(of path: String, limit: Int = 4096) throws(Failure) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw Failure(operation: "open", path: path, errno: errno)
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 512)
        while bytes.count < limit {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(operation: "read", path: path, errno: errno)
            }
            if n == 0 { break }
            bytes.append(contentsOf: buffer[..<n])
        }
        return bytes
    }

    /// Replaces `path` with `bytes` so that a crash leaves either the old or the new content:
    /// writes `path.tmp`, `fsync`s it, renames it over `path` and `fsync`s the directory.
    package static func replace(_ path: String, with bytes: [UInt8]) throws(Failure) {
        let temporary = path + ".tmp"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        if fd < 0 { throw Failure(operation: "create", path: temporary, errno: errno) }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { raw in
                raw.baseAddress.map { write(fd, $0 + written, raw.count - written) } ?? 0
            }
            if n <= 0 {
                if n < 0, errno == EINTR { continue }
                let error = n < 0 ? errno : EIO
                close(fd)
                unlink(temporary)
                throw Failure(operation: "write", path: temporary, errno: error)
            }
            written += n
        }
        if fsync(fd) != 0 {
            let error = errno
            close(fd)
            unlink(temporary)
            throw Failure(operation: "fsync", path: temporary, errno: error)
        }
        close(fd)
        if rename(temporary, path) != 0 {
            let error = errno
            unlink(temporary)
            throw Failure(operation: "rename to", path: path, errno: error)
        }
        let directory = Self.directory(of: path)
        let dirFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            defer { close(dirFD) }
            if fsync(dirFD) != 0 { throw Failure(operation: "fsync directory", path: directory, errno: errno) }
        }
    }

    /// Creates `path` as a directory (mode 0755) unless it exists; throws when it cannot.
    package static func ensureDirectory(_ path: String) throws(Failure) {
        var info = stat()
        if stat(path, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFDIR else {
                throw Failure(operation: "use as a directory", path: path, errno: ENOTDIR)
            }
            // The vehicle's whereabouts: its user's alone (an older agent made it 0755).
            FilePermissions.makePrivate(path)
            return
        }
        if mkdir(path, 0o700) != 0, errno != EEXIST {
            throw Failure(operation: "create directory", path: path, errno: errno)
        }
    }

    /// The directory part of a path (`.` when there is none).
    package static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
