#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Binds the TCP socket `fd` to a free port on 127.0.0.1 and returns that port (the kernel's
/// choice, read back with `getsockname`), or nil when either call failed.
func bindToFreeLoopbackPort(_ fd: Int32) -> Int? {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
        }
    }
    return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
}
