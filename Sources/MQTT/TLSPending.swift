import CMosquitto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The decrypted bytes a client's TLS session holds that `poll(2)` cannot see: OpenSSL's
/// `SSL_pending` on libmosquitto's session (`mosquitto_ssl_get`), as libmosquitto's own
/// `SSL_DATA_PENDING` reads it. `SSL_pending` is looked up once in the libssl that
/// libmosquitto loaded, so the package neither links libssl nor needs OpenSSL's headers.
enum TLSPending {
    private typealias Pending = @convention(c) (UnsafeMutableRawPointer?) -> Int32

    /// `SSL_pending`, or `nil` when no libssl is loaded (libmosquitto built without TLS).
    private static let pending: Pending? = {
        // RTLD_DEFAULT (a null handle): the libraries loaded with the program, libmosquitto's
        // libssl among them.
        guard let symbol = dlsym(nil, "SSL_pending") else { return nil }
        return unsafeBitCast(symbol, to: Pending.self)
    }()

    /// The bytes `mosq`'s TLS session holds, decrypted and not yet read; 0 without TLS.
    static func bytes(_ mosq: OpaquePointer?) -> Int32 {
        guard let session = mosquitto_ssl_get(mosq), let pending else { return 0 }
        return pending(session)
    }
}
