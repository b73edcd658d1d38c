import GNSS
import JSONEscaping

/// Turns gpsd JSON objects (one per line) into ``GNSS/GNSSEvent`` values. Pure: no I/O.
///
/// TPV becomes a `Fix` (gpsd's keys and units are the contract's: `lat`, `lon` degrees,
/// `altHAE`, `altMSL`, `eph`, `epv` metres, `speed`, `climb` m/s, `track` degrees) or, with
/// `mode` < 2, `.state(.noFix)`; ATT becomes a `Heading` (source `.gpsd`); SKY supplies the
/// satellites used and the DOPs of the fixes that follow; a DEVICE whose `activated` is 0
/// (the receiver went away) becomes a `.reconnecting` state. Lines that are not JSON, not
/// objects, or lack what a class needs are counted in ``statistics`` and skipped.
public struct GPSDMessageDecoder: Sendable {
    /// What the decoder saw.
    public struct Statistics: Sendable, Equatable {
        /// JSON objects understood (any class).
        public var objects = 0
        /// Lines that were not JSON objects, or objects of a known class with missing or
        /// mistyped keys.
        public var malformed = 0
        /// Lines dropped for being longer than the line limit.
        public var overlong = 0
        /// Objects of classes this decoder does not use (GST, PPS, TOFF…), and reports of
        /// devices past ``GPSDMessageDecoder/maximumDevices``.
        public var ignored = 0
        /// All counters at zero.
        public init() {}
    }

    /// Counters since the decoder was made.
    public private(set) var statistics = Statistics()
    /// gpsd's release string, from its VERSION banner.
    public private(set) var gpsdRelease: String?
    /// Device paths gpsd reported (DEVICES/DEVICE), with whether each is open, at most
    /// ``maximumDevices`` of them (gpsd itself serves 4 unless built for more); the paths
    /// of further devices are counted as ignored.
    public private(set) var devices: [String: Bool] = [:]
    /// Whether gpsd sent its device list (DEVICES, its answer to the watch).
    public private(set) var receivedDeviceList = false
    /// gpsd's last ERROR message ("No such device as /dev/ttyUSB0", its answer to a watch
    /// that names a device it does not have), at most 200 characters, control characters
    /// escaped: fit for a log line.
    public private(set) var lastError: String?
    /// The most device paths ``devices`` keeps.
    public static let maximumDevices = 64

    /// Whether gpsd listed its devices and `device` (or, for `nil`, any device) is not open
    /// among them: a gpsd without the receiver, which reports nothing after its answer to
    /// the watch.
    public func listsNoOpenDevice(_ device: String? = nil) -> Bool {
        guard receivedDeviceList else { return false }
        guard let device else { return !devices.values.contains(true) }
        return devices[device] != true
    }

    private var satellitesUsed: Int?
    private var hdop: Double?
    private var vdop: Double?
    private var pdop: Double?

    /// A decoder with empty counters.
    public init() {}

    /// Records a line dropped by the framer for its length.
    public mutating func noteOverlongLine() {
        statistics.overlong += 1
    }

    /// Decodes one line (one JSON object, without the newline), emitting what it means.
    public mutating func decode(line: some Collection<UInt8>, emit: (GNSSEvent) -> Void) {
        guard let object = JSONValue.parse(line), case .object = object, let cls = object["class"]?.string else {
            statistics.malformed += 1
            return
        }
        switch cls {
        case "TPV":
            decodeTPV(object, emit: emit)
        case "ATT":
            decodeATT(object, emit: emit)
        case "SKY":
            decodeSKY(object)
        case "VERSION":
            gpsdRelease = object["release"]?.string
            statistics.objects += 1
        case "DEVICES":
            guard let list = object["devices"]?.array else {
                statistics.malformed += 1
                return
            }
            statistics.objects += 1
            receivedDeviceList = true
            for device in list {
                decodeDevice(device, emit: emit)
            }
        case "DEVICE":
            if object["path"]?.string == nil {
                statistics.malformed += 1
            } else if decodeDevice(object, emit: emit) {
                statistics.objects += 1
            }
        case "WATCH":
            statistics.objects += 1
        case "ERROR":
            statistics.malformed += 1
            if let message = object["message"]?.string {
                lastError = JSONString.escaped(String(message.unicodeScalars.prefix(200)))
            }
        default:
            statistics.ignored += 1
        }
    }

    private mutating func decodeTPV(_ o: JSONValue, emit: (GNSSEvent) -> Void) {
        guard let modeNumber = o["mode"]?.int else {
            statistics.malformed += 1
            return
        }
        statistics.objects += 1
        guard modeNumber >= 2 else {
            emit(.state(.noFix))
            return
        }
        guard let lat = o["lat"]?.double, (-90...90).contains(lat),
            let lon = o["lon"]?.double, (-180...180).contains(lon),
            let timeText = o["time"]?.string, let time = UTCTimestamp(iso8601: timeText)
        else {
            // A 2D/3D report without position or time (gpsd sends these mid-cycle): not a fix.
            statistics.objects -= 1
            statistics.malformed += 1
            return
        }
        let fix = Fix(
            time: time, latitude: lat, longitude: lon,
            altitudeHAE: o["altHAE"]?.double, altitudeMSL: o["altMSL"]?.double ?? o["alt"]?.double,
            geoidSeparation: o["geoidSep"]?.double,
            speed: o["speed"]?.double, track: o["track"]?.double, magneticVariation: o["magvar"]?.double,
            climb: o["climb"]?.double,
            mode: modeNumber >= 3 ? .threeD : .twoD,
            quality: Self.quality(status: o["status"]?.int),
            satellitesUsed: satellitesUsed, hdop: hdop, vdop: vdop, pdop: pdop,
            eph: o["eph"]?.double, epv: o["epv"]?.double
        )
        emit(.fix(fix))
    }

    private mutating func decodeATT(_ o: JSONValue, emit: (GNSSEvent) -> Void) {
        let heading = o["heading"]?.double.flatMap(Self.degrees)
        let magnetic = o["mheading"]?.double.flatMap(Self.degrees)
        guard heading != nil || magnetic != nil else {
            statistics.malformed += 1
            return
        }
        statistics.objects += 1
        let time = o["time"]?.string.flatMap { UTCTimestamp(iso8601: $0) }
        emit(.heading(Heading(time: time, trueHeading: heading, magneticHeading: magnetic, source: .gpsd)))
    }

    private mutating func decodeSKY(_ o: JSONValue) {
        statistics.objects += 1
        if let used = o["uSat"]?.int {
            satellitesUsed = used
        } else if let sats = o["satellites"]?.array {
            satellitesUsed = sats.filter { $0["used"] == .bool(true) }.count
        }
        if let h = o["hdop"]?.double { hdop = h }
        if let v = o["vdop"]?.double { vdop = v }
        if let p = o["pdop"]?.double { pdop = p }
    }

    /// Follows one device's report; false when it is dropped (no path, or past the bound).
    @discardableResult
    private mutating func decodeDevice(_ o: JSONValue, emit: (GNSSEvent) -> Void) -> Bool {
        guard let path = o["path"]?.string else { return false }
        guard devices[path] != nil || devices.count < Self.maximumDevices else {
            statistics.ignored += 1
            return false
        }
        // `activated` is a timestamp (string) while the device is open, and 0 once it closed.
        let active = o["activated"].map { $0 != .number(0) } ?? true
        let wasActive = devices[path]
        devices[path] = active
        if !active, wasActive != false {
            emit(.state(.reconnecting(reason: "gpsd: device \(JSONString.escaped(path)) went away", delay: .zero)))
        }
        return true
    }

    /// gpsd's TPV `status` as a GGA-style quality.
    static func quality(status: Int?) -> FixQuality? {
        switch status {
        case 1: return .gps
        case 2: return .dgps
        case 3: return .rtkFixed
        case 4: return .rtkFloat
        case 5, 6: return .deadReckoning
        case 8: return .simulation
        case 9: return .pps
        default: return nil
        }
    }

    static func degrees(_ value: Double) -> Double? {
        (0...360).contains(value) ? value.truncatingRemainder(dividingBy: 360) : nil
    }
}
