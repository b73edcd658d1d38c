import CMosquitto

/// Process-wide libmosquitto initialisation, done once.
enum MosquittoLibrary {
    /// Swift initialises a `static let` exactly once, thread-safely (`swift_once`).
    private static let initialised: Int32 = mosquitto_lib_init()

    /// Calls `mosquitto_lib_init` the first time; later calls do nothing.
    static func ensureInitialised() {
        _ = initialised
    }
}
