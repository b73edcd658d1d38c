import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a file in fixed-size chunks on swift-nio's blocking-I/O thread pool, so that a
/// large recording is never held whole and no cooperative thread blocks in `read`.
///
/// (swift-nio's `NonBlockingFileIO` is deprecated in favour of NIOFileSystem, which is not
/// a dependency of this package; the thread pool is what both use underneath.)
final class FileChunkReader: Sendable {
    /// A failed system call on the file: the call, the path and the errno.
    struct Failure: Error, CustomStringConvertible {
        let call: String
        let path: String
        let errno: Int32
        var description: String { "\(call) \(path): \(errnoText(errno)) (errno \(errno))" }
    }

    let path: String
    let chunkSize: Int
    private let fd: Int32

    /// Opens `path` read-only.
    init(path: String, chunkSize: Int = 64 * 1024) async throws {
        let fd = try await NIOThreadPool.singleton.runIfActive {
            let fd = path.withCString { open($0, O_RDONLY | O_CLOEXEC) }
            guard fd >= 0 else { throw Failure(call: "open", path: path, errno: errno) }
            return fd
        }
        self.path = path
        self.chunkSize = max(1, chunkSize)
        self.fd = fd
    }

    /// The next chunk, empty at end of file.
    func next() async throws -> [UInt8] {
        let fd = fd, size = chunkSize, path = path
        return try await NIOThreadPool.singleton.runIfActive {
            var chunk = [UInt8](repeating: 0, count: size)
            while true {
                let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, size) }
                if n >= 0 {
                    chunk.removeSubrange(n...)
                    return chunk
                }
                if errno != EINTR { throw Failure(call: "read", path: path, errno: errno) }
            }
        }
    }

    deinit {
        close(fd)
    }
}
