import GNSS
import Logging
import NMEA

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A built-in receiver for demos and load tests (`sim:?rate=10&speed=15&lat=..&lon=..`).
///
/// Drives a ``SimulatedVehicle`` around its route and, `rate` times a second, writes the
/// epoch as real NMEA bytes (``NMEASentenceGenerator``: RMC, GGA, GSA, VTG, HDT, GST, time
/// from the system's UTC clock) and decodes them through the same `NMEADecoder` as a real
/// receiver, so everything downstream sees what a serial receiver would give.
public struct SimulatorSource: GNSSSource {
    public typealias Element = GNSSEvent
    public typealias Failure = Never

    /// Rate, speed and starting point.
    public let options: SimulatorOptions
    /// The URI for logs.
    public let uri: String
    private let logger: Logger

    /// A simulator; the vehicle starts from rest at the origin on every iteration.
    public init(options: SimulatorOptions = .init(), uri: String? = nil, logger: Logger) {
        self.options = options
        self.uri = uri ?? GNSSSourceDescriptor.simulator(options).uri
        self.logger = logger.forSource(self.uri)
    }

    /// Starts a fresh drive.
    public func makeEventStream() -> AsyncStream<GNSSEvent> {
        let options = options, logger = logger
        return EventStream.run { sink in
            sink.state(.connecting)
            let rate = Swift.max(1, Swift.min(options.rateHz, 10))
            let scale = Swift.max(1, Swift.min(options.timeScale, 100))
            let period = Duration.seconds(1) / (rate * scale)
            var start = Self.utcNow()
            var vehicle = SimulatedVehicle(
                cruiseSpeed: options.cruiseSpeed, originLatitude: options.latitude, originLongitude: options.longitude)
            var decoder = NMEADecoder()
            let clock = ContinuousClock()
            var deadline = clock.now
            logger.debug("Simulator started", metadata: ["sim.rate": "\(rate)"])
            var epochs = 0
            while !Task.isCancelled {
                let p = vehicle.position
                // Each epoch is stamped on the schedule, as a receiver stamps its epochs, not
                // when the task woke: a late wake-up (a loaded machine) delays the sentences but
                // keeps time and position consistent (the vehicle moves one period per epoch).
                var time = UTCTimestamp(millisecondsSince1970: start.millisecondsSince1970 + Int64(epochs) * 1000 / Int64(rate))
                if scale == 1 {
                    // A step of the system clock (NTP setting a Pi's time after boot) moves
                    // the schedule with it.
                    let now = Self.utcNow()
                    if abs(now.millisecondsSince1970 - time.millisecondsSince1970) > 1000 {
                        start = UTCTimestamp(millisecondsSince1970: now.millisecondsSince1970 - Int64(epochs) * 1000 / Int64(rate))
                        time = now
                    }
                }
                let epoch = NMEASentenceGenerator.Epoch(
                    time: time,
                    latitude: p.latitude, longitude: p.longitude,
                    speed: vehicle.speed, track: vehicle.heading, heading: vehicle.heading)
                let bytes = NMEASentenceGenerator.bytes(for: epoch)
                bytes.withUnsafeBytes { raw in
                    decoder.decode(raw) { sink.event($0) }
                }
                vehicle.step(seconds: 1 / Double(rate))
                epochs += 1
                deadline = deadline.advanced(by: period)
                do { try await clock.sleep(until: deadline) } catch { break }
            }
            logger.debug("Simulator stopped", metadata: ["sim.epochs": "\(epochs)"])
        }
    }

    /// The system's UTC time, milliseconds.
    static func utcNow() -> UTCTimestamp {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UTCTimestamp(millisecondsSince1970: Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000)
    }
}
