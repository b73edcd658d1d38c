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
        let calls = try XSIPseudoTerminalCalls()
        let master = calls.openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard master >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        var name = [CChar](repeating: 0, count: 128)
        guard calls.grant(master) == 0, calls.unlock(master) == 0, calls.name(master, &name, name.count) == 0 else {
            let code = errno
            Glibc.close(master)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
        let path = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let slave = open(path, O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard slave >= 0 else {
            let code = errno
            Glibc.close(master)
            throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO)
        }
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

/// glibc's `posix_openpt`, `grantpt`, `unlockpt` and `ptsname_r`, looked up at run time: Swift's
/// Glibc module does not import these XSI functions (their declarations need `_XOPEN_SOURCE`),
/// and `openpty` lives in libutil, which no target links.
private struct XSIPseudoTerminalCalls {
    let openpt: @convention(c) (Int32) -> Int32
    let grant: @convention(c) (Int32) -> Int32
    let unlock: @convention(c) (Int32) -> Int32
    let name: @convention(c) (Int32, UnsafeMutablePointer<CChar>, Int) -> Int32

    init() throws {
        guard let library = dlopen(nil, RTLD_NOW),
              let openpt = dlsym(library, "posix_openpt"), let grant = dlsym(library, "grantpt"),
              let unlock = dlsym(library, "unlockpt"), let name = dlsym(library, "ptsname_r")
        else { throw POSIXError(.ENOSYS) }
        self.openpt = unsafeBitCast(openpt, to: (@convention(c) (Int32) -> Int32).self)
        self.grant = unsafeBitCast(grant, to: (@convention(c) (Int32) -> Int32).self)
        self.unlock = unsafeBitCast(unlock, to: (@convention(c) (Int32) -> Int32).self)
        self.name = unsafeBitCast(name, to: (@convention(c) (Int32, UnsafeMutablePointer<CChar>, Int) -> Int32).self)
    }
}
