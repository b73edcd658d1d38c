import FleetProtocol
import GNSS

#if canImport(Glibc)
import Glibc
#endif

/// Writes to the process's standard output (the executable's only printing path), unbuffered:
/// each call is written at once, so that pipes (`| jq`) see every line as it happens.
struct StandardOutput: Sendable {
    /// Whether stdout is a terminal (then the live ANSI table is drawn).
    var isTerminal: Bool { isatty(STDOUT_FILENO) == 1 }

    /// The terminal's height in rows, when stdout is a terminal.
    var terminalRows: Int? {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_row > 0 else { return nil }
        return Int(size.ws_row)
    }

    /// Writes `text`, retrying partial writes. A closed pipe ends the process with SIGPIPE, as
    /// for any Unix filter (`fleet-watch --json | head`); another write error drops the text.
    func write(_ text: String) {
        let bytes = Array(text.utf8)
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(STDOUT_FILENO, base + offset, buffer.count - offset)
                if n > 0 {
                    offset += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }

    /// Writes `text` and a newline.
    func writeLine(_ text: String) {
        write(text + "\n")
    }
}
