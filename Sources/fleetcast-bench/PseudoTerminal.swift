import Foundation

/// A pseudo-terminal pair standing for a GNSS receiver on a serial line: the bench writes
/// NMEA bytes to the master side; the agent opens ``path`` (the `/dev/pts/N` slave) as its
/// serial device. The slave is put in raw mode at once (no echo, no line editing, no CR→NL),
/// and this side keeps it open so the line never hangs up between the agent's opens.
final class PseudoTerminal {
    /// The slave device path, such as `/dev/pts/3`.
    let path: String
    private var master: Int32
    private var slave: Int32

    /// Opens a new pair; throws a `POSIXError` when the system has none to give.
    init() throws {
        var master: Int32 = -1
        var slave: Int32 = -1
        // No name buffer: openpty(3) copies the name without a length; ttyname_r below has one.
        guard openpty(&master, &slave, nil, nil, nil) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        // openpty opens both sides without O_CLOEXEC.
        _ = fcntl(master, F_SETFD, FD_CLOEXEC)
        _ = fcntl(slave, F_SETFD, FD_CLOEXEC)
        var name = [CChar](repeating: 0, count: 128)
        let failure = ttyname_r(slave, &name, name.count)
        guard failure == 0 else {
            Glibc.close(master)
            Glibc.close(slave)
            throw POSIXError(POSIXErrorCode(rawValue: failure) ?? .EIO)
        }
        let path = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        var tio = termios()
        if tcgetattr(slave, &tio) == 0 {
            cfmakeraw(&tio)
            _ = tcsetattr(slave, TCSANOW, &tio)
        }
        self.path = path
        self.master = master
        self.slave = slave
    }

    deinit { close() }

    /// Writes all of `bytes` to the master side (blocking while the line's buffer is full).
    func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < buffer.count {
                let n = Glibc.write(master, base + offset, buffer.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += n
            }
        }
    }

    /// Closes both sides (idempotent).
    func close() {
        if master >= 0 { Glibc.close(master) }
        if slave >= 0 { Glibc.close(slave) }
        master = -1
        slave = -1
    }
}
