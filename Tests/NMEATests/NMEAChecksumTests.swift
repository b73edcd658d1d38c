import NMEA
import Testing

@Suite("NMEAChecksum")
struct NMEAChecksumTests {
    func verify(_ s: String) -> NMEAChecksum.Verdict {
        Array(s.utf8).withUnsafeBytes { NMEAChecksum.verify($0) }
    }

    @Test("upper- and lower-case hex both verify")
    func cases() {
        let rmb = "$GPRMB,A,0.66,L,003,004,4917.24,N,12309.57,W,001.3,052.5,000.5,V*20"
        #expect(verify(rmb) == .valid(payloadLength: rmb.utf8.count - 4))
        #expect(verify("$GPRMC,,V,,,,,,,,,,N*53") == .valid(payloadLength: 19))
        #expect(verify("$GPGSA,A,1,,,,,,,,,,,,,,,*1e") == .valid(payloadLength: 24))
    }

    @Test("a wrong, short or non-hex checksum is a mismatch")
    func mismatch() {
        #expect(verify("$GPRMC,,V,,,,,,,,,,N*54") == .mismatch)
        #expect(verify("$GPRMC,,V,,,,,,,,,,N*5") == .mismatch)
        #expect(verify("$GPRMC,,V,,,,,,,,,,N*5G") == .mismatch)
        #expect(verify("$GPRMC,,V,,,,,,,,,,N*533") == .mismatch)
    }

    @Test("no * means missing")
    func missing() {
        #expect(verify("$GPZDA,160012.71,11,03,2004,-1,00") == .missing(payloadLength: 32))
    }
}
