import FleetcastCore
import Logging

/// What a source URI asks for: which receiver, and how to read it.
///
/// Parsed from `serial:PATH?baud=N`, `gpsd://HOST[:PORT][?device=PATH]`,
/// `replay:PATH?speed=N|max&loop=true` or `sim:?rate=HZ&speed=M_S&lat=DEG&lon=DEG`
/// by ``init(parsing:)``; turned into a running source by ``makeSource(logger:backoff:)``.
public enum GNSSSourceDescriptor: Sendable, Equatable {
    /// A receiver on a serial port (or USB CDC/pseudo-terminal), raw 8N1 at `baud` bits/s.
    case serial(path: String, baud: Int)
    /// A gpsd daemon at `host:port`, optionally watching one `device` only.
    case gpsd(host: String, port: Int, device: String?)
    /// A recorded NMEA file, paced by its own clock or read as fast as possible.
    case replay(path: String, speed: ReplaySpeed, loop: Bool)
    /// The built-in simulated receiver.
    case simulator(SimulatorOptions)

    /// Baud rates a serial source accepts (bits per second).
    public static let standardBaudRates = [4800, 9600, 19200, 38400, 57600, 115_200, 230_400, 460_800, 921_600]
    /// Baud rate when the URI gives none (the rate of most current receivers).
    public static let defaultBaudRate = 9600
    /// gpsd's registered TCP port.
    public static let defaultGPSDPort = 2947

    /// Creates the source this descriptor describes. `uri` is used in logs (`gnss.source`);
    /// `backoff` paces reconnections of serial and gpsd sources.
    public func makeSource(uri: String? = nil, logger: Logger, backoff: Backoff = .default) -> AnyGNSSSource {
        let uri = uri ?? self.uri
        switch self {
        case .serial(let path, let baud):
            return AnyGNSSSource(SerialSource(path: path, baud: baud, uri: uri, logger: logger, backoff: backoff))
        case .gpsd(let host, let port, let device):
            return AnyGNSSSource(
                GPSDSource(host: host, port: port, device: device, uri: uri, logger: logger, backoff: backoff))
        case .replay(let path, let speed, let loop):
            return AnyGNSSSource(ReplaySource(path: path, speed: speed, loop: loop, uri: uri, logger: logger))
        case .simulator(let options):
            return AnyGNSSSource(SimulatorSource(options: options, uri: uri, logger: logger))
        }
    }

    /// The canonical URI of this descriptor (parses back to the same descriptor).
    public var uri: String {
        switch self {
        case .serial(let path, let baud):
            return "serial:\(path)?baud=\(baud)"
        case .gpsd(let host, let port, let device):
            let h = host.contains(":") ? "[\(host)]" : host
            return "gpsd://\(h):\(port)" + (device.map { "?device=\($0)" } ?? "")
        case .replay(let path, let speed, let loop):
            return "replay:\(path)?speed=\(speed)" + (loop ? "&loop=true" : "")
        case .simulator(let o):
            return "sim:?rate=\(o.rateHz)&speed=\(o.cruiseSpeed)&lat=\(o.latitude)&lon=\(o.longitude)"
                + (o.timeScale == 1 ? "" : "&timeScale=\(o.timeScale)")
        }
    }
}

/// How fast a replay runs.
public enum ReplaySpeed: Sendable, Equatable, CustomStringConvertible {
    /// As fast as the decoder goes, no pacing.
    case max
    /// Paced by the recording's fix times divided by this factor (1 = real time).
    case factor(Double)

    /// `max`, or the factor as a number (the form of the URI's `speed=`).
    public var description: String {
        switch self {
        case .max: return "max"
        case .factor(let f): return "\(f)"
        }
    }
}

/// Settings of the simulated receiver (``SimulatorSource``).
public struct SimulatorOptions: Sendable, Equatable {
    /// Output rate, fixes per second (1...10).
    public var rateHz: Int
    /// Cruising speed on straights, metres per second.
    public var cruiseSpeed: Double
    /// Latitude of the route's start, degrees.
    public var latitude: Double
    /// Longitude of the route's start, degrees.
    public var longitude: Double
    /// How many times faster than real time the simulated clock runs (1...100; default 1).
    /// With more than 1, fix times advance by `1 / rateHz` s per epoch from the start time
    /// (they run ahead of the wall clock): tests and load tests compress hours of driving.
    public var timeScale: Int

    /// Simulator settings; the defaults drive at 15 m/s around a loop near Amsterdam at 1 Hz.
    public init(rateHz: Int = 1, cruiseSpeed: Double = 15, latitude: Double = 52.3702, longitude: Double = 4.8952, timeScale: Int = 1) {
        self.timeScale = timeScale
        self.rateHz = rateHz
        self.cruiseSpeed = cruiseSpeed
        self.latitude = latitude
        self.longitude = longitude
    }
}
