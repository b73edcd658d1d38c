/// A broker password file as `fleetcast-agent` and `fleet-watch` both read it: its first line,
/// without the line's end (`\n`, or `\r\n` as an editor on Windows writes it). At most
/// ``maximumBytes`` are read: a password file is a line, not a document.
package enum PasswordFile {
    /// The most bytes read of a password file.
    package static let maximumBytes = 4096

    /// The password in the file at `path`; `nil` when there is no such file.
    package static func read(_ path: String) throws(AtomicFile.Failure) -> String? {
        try AtomicFile.contents(of: path, limit: maximumBytes).map { password(in: $0) }
    }

    /// The password in a password file's `contents`: the text before the first line break.
    package static func password(in contents: [UInt8]) -> String {
        var line = contents.prefix { $0 != UInt8(ascii: "\n") }
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        return String(decoding: line, as: UTF8.self)
    }
}
