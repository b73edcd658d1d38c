import GNSSSources
import Testing

@Suite struct SourceURITests {
    @Test(arguments: [
        ("serial:/dev/ttyUSB0?baud=115200", GNSSSourceDescriptor.serial(path: "/dev/ttyUSB0", baud: 115_200)),
        ("serial:///dev/ttyACM0", .serial(path: "/dev/ttyACM0", baud: 9600)),
        ("serial:/dev/serial/by-id/usb-u-blox_GNSS-if00?baud=4800", .serial(path: "/dev/serial/by-id/usb-u-blox_GNSS-if00", baud: 4800)),
        ("gpsd://localhost", .gpsd(host: "localhost", port: 2947, device: nil)),
        ("gpsd://", .gpsd(host: "localhost", port: 2947, device: nil)),
        ("gpsd://10.0.0.2:3000?device=/dev/ttyUSB1", .gpsd(host: "10.0.0.2", port: 3000, device: "/dev/ttyUSB1")),
        ("gpsd://[::1]:2948", .gpsd(host: "::1", port: 2948, device: nil)),
        ("replay:drive.nmea", .replay(path: "drive.nmea", speed: .factor(1), loop: false)),
        ("replay:/var/log/gps.nmea?speed=max&loop=true", .replay(path: "/var/log/gps.nmea", speed: .max, loop: true)),
        ("replay:x.log?speed=2.5", .replay(path: "x.log", speed: .factor(2.5), loop: false)),
        ("sim:", .simulator(SimulatorOptions())),
        (
            "sim:?rate=10&speed=20&lat=48.85&lon=2.35",
            .simulator(SimulatorOptions(rateHz: 10, cruiseSpeed: 20, latitude: 48.85, longitude: 2.35))
        ),
    ])
    func goodFormsParse(uri: String, expected: GNSSSourceDescriptor) throws {
        let parsed = try GNSSSourceDescriptor(parsing: uri)
        #expect(parsed == expected)
        // The canonical form reads back as the same descriptor.
        #expect(try GNSSSourceDescriptor(parsing: parsed.uri) == parsed)
    }

    @Test(arguments: [
        ("/dev/ttyUSB0", "scheme", "serial:PATH?baud=N"),
        ("tcp://host:1", "scheme", "one of serial:, gpsd://, replay:, sim:"),
        ("serial:/dev/ttyUSB0?baud=1234", "baud", "one of 4800, 9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600"),
        ("serial:/dev/ttyUSB0?baud=fast", "baud", "one of 4800"),
        ("serial:ttyUSB0", "path", "an absolute device path"),
        ("serial:/dev/ttyUSB0?parity=even", "query parameter", "one of baud"),
        ("gpsd:localhost", "address", "gpsd://HOST[:PORT][?device=PATH]"),
        ("gpsd://localhost:0", "port", "a TCP port number, 1...65535"),
        ("gpsd://localhost:http", "port", "a TCP port number"),
        ("gpsd://host?device=ttyUSB0", "device", "an absolute device path"),
        ("gpsd://[::1", "host", "an IPv6 address in brackets"),
        ("replay:", "path", "a file path"),
        ("replay:a.log?speed=0", "speed", "a positive number (1 = real time) or max"),
        ("replay:a.log?loop=maybe", "loop", "true or false"),
        ("replay:a.log?speed", "query parameter", "NAME=VALUE"),
        ("replay:a.log?speed=1&speed=2", "query parameter", "each parameter at most once"),
        ("sim:?rate=50", "rate", "1...10"),
        ("sim:?lat=91", "lat", "-85...85"),
        ("sim:?speed=-3", "speed", "m/s"),
        ("sim:?colour=red", "query parameter", "one of rate, speed, lat, lon"),
    ])
    func badFormsNameThePartAndTheExpectedForm(uri: String, part: String, expected: String) {
        let error = #expect(throws: SourceURIError.self) { try GNSSSourceDescriptor(parsing: uri) }
        #expect(error?.part == part)
        #expect(error?.uri == uri)
        #expect(error?.expected.contains(expected) == true, "\(error?.expected ?? "-")")
        #expect(error?.description.contains(uri) == true)
    }

    @Test func messageReadsWell() {
        let error = #expect(throws: SourceURIError.self) { try GNSSSourceDescriptor(parsing: "serial:/dev/ttyS0?baud=1234") }
        #expect(
            error?.description == """
                bad baud "1234" in source URI "serial:/dev/ttyS0?baud=1234": expected one of 4800, 9600, 19200, \
                38400, 57600, 115200, 230400, 460800, 921600
                """)
    }

    @Test func factoryMakesASourceNamedByItsURI() throws {
        let descriptor = try GNSSSourceDescriptor(parsing: "sim:?rate=5")
        let source = descriptor.makeSource(uri: "sim:?rate=5", logger: quietLogger)
        #expect(source.uri == "sim:?rate=5")
    }
}
