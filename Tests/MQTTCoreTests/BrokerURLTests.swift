import MQTTCore
import Testing

@Suite struct BrokerURLTests {
    @Test func parsesPlainURLWithDefaultPort() throws {
        let url = try BrokerURL(parsing: "mqtt://broker.example.com")
        #expect(url.host == "broker.example.com")
        #expect(url.port == 1883)
        #expect(!url.usesTLS)
        #expect(url.username == nil)
    }

    @Test func parsesTLSURLWithUserAndPort() throws {
        let url = try BrokerURL(parsing: "mqtts://van-7@broker.example.com:9883")
        #expect(url.host == "broker.example.com")
        #expect(url.port == 9883)
        #expect(url.usesTLS)
        #expect(url.username == "van-7")
        #expect(url.description == "mqtts://van-7@broker.example.com:9883")
    }

    @Test func configurationNeverPrintsThePassword() throws {
        let configuration = MQTTConfiguration(
            broker: try BrokerURL(parsing: "mqtts://van-7@broker.example.com"), clientID: "van-7", password: "hunter2-secret")
        var dumped = ""
        dump(configuration, to: &dumped)
        for text in ["\(configuration)", String(reflecting: configuration), dumped] {
            #expect(!text.contains("hunter2-secret"))
            #expect(text.contains("van-7@broker.example.com"))
        }
        #expect("\(configuration)".contains("password: <redacted>"))
    }

    @Test func tlsDefaultsToPort8883() throws {
        #expect(try BrokerURL(parsing: "mqtts://localhost").port == 8883)
    }

    @Test func parsesBracketedIPv6() throws {
        let url = try BrokerURL(parsing: "mqtt://[::1]:1884")
        #expect(url.host == "::1")
        #expect(url.port == 1884)
        #expect(url.description == "mqtt://[::1]:1884")
    }

    @Test(arguments: [
        ("broker.example.com", "expected mqtt://"),
        ("http://broker", "unsupported scheme 'http'"),
        ("mqtt://", "missing host"),
        ("mqtt://host:0", "port '0'"),
        ("mqtt://host:70000", "port '70000'"),
        ("mqtt://host:abc", "port 'abc'"),
        ("mqtt://user:secret@host", "a password does not belong in the URL"),
        ("mqtt://host/path", "no path"),
        ("mqtt://[::1", "unclosed '['"),
    ])
    func rejectsBadURLsWithAReason(text: String, expected: String) {
        #expect {
            _ = try BrokerURL(parsing: text)
        } throws: { error in
            guard let error = error as? MQTTError, error.code == .invalidBrokerURL else { return false }
            return error.topic == BrokerURL.redactingPassword(text) && "\(error)".contains(expected) && !error.detail.isEmpty
                && !"\(error)".contains("secret")
        }
    }

    @Test func aPasswordIsRedactedWhereverAURLIsShownAndControlCharactersEscaped() {
        #expect(BrokerURL.redactingPassword("mqtts://van-7:hunter2@broker:8883") == "mqtts://van-7:<redacted>@broker:8883")
        #expect(BrokerURL.redactingPassword("mqtt://a:b:c@d@host") == "mqtt://a:<redacted>@host")
        #expect(BrokerURL.redactingPassword("mqtt://van-7@host") == "mqtt://van-7@host")
        #expect(BrokerURL.redactingPassword("mqtt://host\u{1B}]0;x\u{07}") == #"mqtt://host\u001b]0;x\u0007"#)
        #expect(BrokerURL.redactingPassword("van-7:hunter2@broker:1883") == "van-7:<redacted>@broker:1883")
        #expect(BrokerURL.redactingPassword("mqtt:/van-7:hunter2@broker") == "mqtt:/van-7:<redacted>@broker")
    }
}
