#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A libpq password file (`~/.pgpass`, or the file `PGPASSFILE` names), read as libpq reads it,
/// so that `psql` and fleet-watch find the same password in the same file.
///
/// One entry a line, `hostname:port:database:username:password`. Each of the first four fields
/// is matched against the connection as given (the host as written in the URL, the port as a
/// number, 5432 by default); `*` alone matches anything. `\:` is a colon and `\\` a backslash
/// within a field (the password included); the password ends at the first colon not escaped.
/// Blank lines and lines that begin with `#` are skipped, and so are lines with fewer than
/// five fields. The first line that matches gives the password.
public struct PostgresPassFile: Sendable, Equatable {
    /// One line of the file: four patterns (`nil` for `*`) and the password.
    public struct Entry: Sendable, Equatable {
        /// The host name or address to match; `nil`: any.
        public var hostname: String?
        /// The port to match, as written; `nil`: any.
        public var port: String?
        /// The database to match; `nil`: any.
        public var database: String?
        /// The role to match; `nil`: any.
        public var username: String?
        /// The password, unescaped.
        public var password: String

        /// An entry.
        public init(hostname: String?, port: String?, database: String?, username: String?, password: String) {
            self.hostname = hostname
            self.port = port
            self.database = database
            self.username = username
            self.password = password
        }

        /// Whether this entry is for a connection as `username` to `database` on `hostname:port`.
        public func matches(hostname: String, port: Int, database: String, username: String) -> Bool {
            (self.hostname.map { $0 == hostname } ?? true) && (self.port.map { $0 == String(port) } ?? true)
                && (self.database.map { $0 == database } ?? true) && (self.username.map { $0 == username } ?? true)
        }
    }

    /// Why a password file was not used. libpq ignores such a file with a warning; so does
    /// fleet-watch (see ``read(_:)``).
    public struct Refusal: Error, Sendable, Equatable, CustomStringConvertible {
        /// The file.
        public let path: String
        /// Why, in words.
        public let reason: String

        /// `password file PATH not used: REASON`.
        public var description: String { "password file \(path) not used: \(reason)" }
    }

    /// The largest file read, in bytes (64 KiB: a line per database, not a document).
    public static let maximumBytes = 64 << 10

    /// The entries, in the file's order.
    public var entries: [Entry]

    /// The entries of a password file's `contents`.
    public init(parsing contents: some Collection<UInt8>) {
        entries = contents.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true).compactMap(Self.entry)
    }

    /// One line as an entry; `nil` for a comment, a blank line or one with fewer than five fields.
    static func entry(_ line: some Collection<UInt8>) -> Entry? {
        var bytes = Array(line)
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard let first = bytes.first, first != UInt8(ascii: "#") else { return nil }
        // The four patterns: each ends at a colon not escaped; `*` alone (not `\*`) is any.
        var patterns: [String?] = []
        var index = 0
        while patterns.count < 4 {
            var field: [UInt8] = []
            var escapedAny = false
            var ended = false
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                if byte == UInt8(ascii: "\\"), index < bytes.count {
                    field.append(bytes[index])
                    escapedAny = true
                    index += 1
                } else if byte == UInt8(ascii: ":") {
                    ended = true
                    break
                } else {
                    field.append(byte)
                }
            }
            guard ended else { return nil }
            patterns.append(field == [UInt8(ascii: "*")] && !escapedAny ? nil : String(decoding: field, as: UTF8.self))
        }
        // The password: up to the next colon not escaped, unescaped.
        var password: [UInt8] = []
        while index < bytes.count, bytes[index] != UInt8(ascii: ":") {
            if bytes[index] == UInt8(ascii: "\\"), index + 1 < bytes.count { index += 1 }
            password.append(bytes[index])
            index += 1
        }
        return Entry(
            hostname: patterns[0], port: patterns[1], database: patterns[2], username: patterns[3],
            password: String(decoding: password, as: UTF8.self))
    }

    /// Reads the password file at `path`: `nil` when there is none.
    ///
    /// Like libpq, it refuses (throws ``Refusal``, which the caller reports as a warning and
    /// then connects without a password) a file that is not a plain file or that its group or
    /// others may read or write: a password others can read has leaked already, and a file psql
    /// ignores should not work for fleet-watch alone. The checks are made with `fstat` on the
    /// descriptor opened (no race with a file swapped in between), and at most
    /// ``maximumBytes`` are read.
    public static func read(_ path: String) throws(Refusal) -> PostgresPassFile? {
        // O_NONBLOCK: a FIFO put in its place must not hang the command in open(2).
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)
        guard descriptor >= 0 else {
            let error = errno
            if error == ENOENT { return nil }
            throw Refusal(path: path, reason: String(cString: strerror(error)))
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { throw Refusal(path: path, reason: String(cString: strerror(errno))) }
        guard info.st_mode & S_IFMT == S_IFREG else { throw Refusal(path: path, reason: "it is not a plain file") }
        guard info.st_mode & (S_IRWXG | S_IRWXO) == 0 else {
            throw Refusal(
                path: path,
                reason: "its group or others have access to it; permissions should be u=rw (0600) or less (chmod 0600 \(path))")
        }
        guard info.st_size <= maximumBytes else {
            throw Refusal(path: path, reason: "it has \(info.st_size) bytes, more than the \(maximumBytes) a password file may have")
        }
        var contents: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while contents.count <= maximumBytes {
            let count = buffer.withUnsafeMutableBytes { systemRead(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw Refusal(path: path, reason: String(cString: strerror(errno)))
            }
            if count == 0 { break }
            contents.append(contentsOf: buffer[..<count])
        }
        guard contents.count <= maximumBytes else {
            throw Refusal(path: path, reason: "it has more than the \(maximumBytes) bytes a password file may have")
        }
        return PostgresPassFile(parsing: contents)
    }
}

/// read(2), under a name that ``PostgresPassFile/read(_:)`` does not shadow.
private func systemRead(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}
