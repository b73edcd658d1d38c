import CMosquitto

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The decrypted bytes a client's TLS session holds that `poll(2)` cannot see: OpenSSL's
/// `SSL_pending` on libmosquitto's session (`mosquitto_ssl_get`), as libmosquitto's own
/// `SSL_DATA_PENDING` reads it. `SSL_pending` is looked up once, through libmosquitto's own
/// handle where it has its usual name (the libssl it was linked with, whatever else the program
/// loaded), so the package neither links libssl nor needs OpenSSL's headers.
package enum TLSPending {
    private typealias Pending = @convention(c) (UnsafeMutableRawPointer?) -> Int32

    /// `SSL_pending`, or `nil` when libmosquitto was built without TLS (then no session either).
    private static let pending: Pending? = {
        // A handle on the loaded libmosquitto (no new load), whose look-up covers its
        // dependencies; without it (another name), RTLD_DEFAULT: the program's libraries.
        let library = dlopen("libmosquitto.so.1", RTLD_NOLOAD | RTLD_LAZY)
        defer { if let library { dlclose(library) } }  // it stays loaded: the program links it
        guard let symbol = dlsym(library, "SSL_pending") else { return nil }
        return unsafeBitCast(symbol, to: Pending.self)
    }()

    /// Whether `SSL_pending` was found (libmosquitto built with TLS, as Debian's is).
    package static var isAvailable: Bool { pending != nil }

    /// The bytes `mosq`'s TLS session holds, decrypted and not yet read; 0 without TLS.
    static func bytes(_ mosq: OpaquePointer?) -> Int32 {
        guard let session = mosquitto_ssl_get(mosq), let pending else { return 0 }
        return pending(session)
    }
}
