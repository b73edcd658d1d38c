import FleetcastCore
import Testing

@Suite struct PasswordFileTests {
    @Test("the first line, without its end, whichever editor wrote it")
    func firstLine() {
        for (contents, expected) in [
            ("s3cret\n", "s3cret"), ("s3cret", "s3cret"), ("s3cret\r\n", "s3cret"), ("s3cret\nsecond line\n", "s3cret"),
            (" spaces kept \n", " spaces kept "), ("\ns3cret\n", ""), ("", ""), ("pässwörd\n", "pässwörd"),
        ] {
            #expect(PasswordFile.password(in: Array(contents.utf8)) == expected, "\(contents.debugDescription)")
        }
    }

    @Test("a missing file is nil, not an error")
    func missingFile() throws {
        #expect(try PasswordFile.read("/nonexistent/fleetcast/password") == nil)
    }
}
