#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Opens a serial device in raw 8N1 mode (termios), for ``SerialSource``.
enum SerialPort {
    /// A failed system call on a device: the call, the path and the errno.
    struct Failure: Error, CustomStringConvertible {
        let call: String
        let path: String
        let errno: Int32

        /// `open /dev/ttyUSB0: No such file or directory (errno 2)`
        var description: String { "\(call) \(path): \(errnoText(errno)) (errno \(errno))" }
    }

    /// Opens `path` non-blocking, puts it in raw mode, 8 data bits, no parity, 1 stop bit,
    /// no flow control, receiver on, at `baud` bits/s; returns the descriptor (close-on-exec).
    static func openRaw(path: String, baud: Int) throws(Failure) -> Int32 {
        let fd = path.withCString { open($0, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC) }
        guard fd >= 0 else { throw Failure(call: "open", path: path, errno: errno) }
        do {
            try configure(fd: fd, path: path, baud: baud)
            return fd
        } catch {
            close(fd)
            throw error
        }
    }

    private static func configure(fd: Int32, path: String, baud: Int) throws(Failure) {
        var tio = termios()
        guard tcgetattr(fd, &tio) == 0 else { throw Failure(call: "tcgetattr", path: path, errno: errno) }
        cfmakeraw(&tio)
        tio.c_cflag &= ~(tcflag_t(PARENB) | tcflag_t(CSTOPB) | tcflag_t(CSIZE) | tcflag_t(CRTSCTS))
        tio.c_cflag |= tcflag_t(CS8) | tcflag_t(CLOCAL) | tcflag_t(CREAD)
        let speed = speedConstant(baud)
        guard cfsetispeed(&tio, speed) == 0, cfsetospeed(&tio, speed) == 0 else {
            throw Failure(call: "cfsetspeed", path: path, errno: errno)
        }
        guard tcsetattr(fd, TCSANOW, &tio) == 0 else { throw Failure(call: "tcsetattr", path: path, errno: errno) }
        // Drop whatever the line held before we looked: it is from an unknown time.
        _ = tcflush(fd, TCIFLUSH)
    }

    /// The termios constant of one of ``GNSSSourceDescriptor/standardBaudRates``.
    static func speedConstant(_ baud: Int) -> speed_t {
        switch baud {
        case 4800: return speed_t(B4800)
        case 19200: return speed_t(B19200)
        case 38400: return speed_t(B38400)
        case 57600: return speed_t(B57600)
        case 115_200: return speed_t(B115200)
        case 230_400: return speed_t(B230400)
        case 460_800: return speed_t(B460800)
        case 921_600: return speed_t(B921600)
        default: return speed_t(B9600)
        }
    }
}

/// `strerror` text for an errno value.
func errnoText(_ code: Int32) -> String {
    String(cString: strerror(code))
}
